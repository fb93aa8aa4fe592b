"""The client-side rules on the cost cases they share with the server's gate.

tests/shared/gate_cases.json (at the repository's root) is the one table of those cases; the
platform's tests run it against the server's gate, so the two sides cannot drift apart on a
shared meaning. Read with the standard library only, like the SDK itself.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from neens_eval import gate_policy
from neens_eval.gate_policy import RunData, evaluate, parse_policy

TABLE_PATH = Path(__file__).resolve().parents[3] / "tests" / "shared" / "gate_cases.json"
TABLE = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
SCORED = [{"item_id": "dsi_1", "status": "scored", "score": 0.9, "passed": True}]


def test_the_rules_round_with_the_tolerance_of_the_shared_table() -> None:
    assert (gate_policy.REL_TOLERANCE, gate_policy.ABS_TOLERANCE) == (
        TABLE["tolerance"]["relative"],
        TABLE["tolerance"]["absolute"],
    )


@pytest.mark.parametrize("case", TABLE["cases"], ids=[case["name"] for case in TABLE["cases"]])
def test_the_rules_give_each_shared_case_its_expected_outcome(case: dict[str, Any]) -> None:
    policy = parse_policy(
        {"rules": [{"cost": {case["rule"]: case["threshold"]}}], "on_missing_baseline": "pass"},
        source="gate_cases.json",
    )
    comparison = {"candidate": case["candidate"], "baseline": case["baseline"]}

    (rule,) = evaluate(policy, RunData(case["status"], SCORED, comparison, []))

    assert rule.status == case["expected"], rule.reason
    if "observed" in case:
        assert rule.observed is not None
        assert math.isclose(rule.observed, case["observed"], rel_tol=1e-9, abs_tol=1e-12)
    assert case.get("reason_contains", "") in rule.reason
