"""The server's gate on the cost cases it shares with the SDK's client-side rules.

tests/shared/gate_cases.json is the one table of those cases; sdk/python/tests runs it against
`neens_eval.gate_policy`, so the two sides cannot drift apart on a shared meaning.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from neens.domain import gate
from neens.domain.gate import CostPolicy, GatePolicy, evaluate_gate
from neens.domain.preprod import CohortStats
from tests.domain.test_gate import item

TABLE = json.loads((Path(__file__).parents[1] / "shared" / "gate_cases.json").read_text())


def cohort(raw: dict[str, Any] | None) -> CohortStats | None:
    if raw is None:
        return None
    return CohortStats(
        avg_cost_usd=raw["avgCostUsd"],
        priced_sessions=raw["pricedSessions"],
        sessions=raw["sessions"],
        avg_latency_ms=None,
        avg_step_count=None,
    )


SCORED = item("i1")


def test_the_gate_rounds_with_the_tolerance_of_the_shared_table() -> None:
    assert (gate.REL_TOLERANCE, gate.ABS_TOLERANCE) == (
        TABLE["tolerance"]["relative"],
        TABLE["tolerance"]["absolute"],
    )


@pytest.mark.parametrize("case", TABLE["cases"], ids=[case["name"] for case in TABLE["cases"]])
def test_the_gate_gives_each_shared_case_its_expected_outcome(case: dict[str, Any]) -> None:
    candidate = cohort(case["candidate"])
    assert candidate is not None
    policy = GatePolicy(cost=CostPolicy(**{case["rule"]: float(case["threshold"])}))

    result = evaluate_gate(case["status"], [SCORED], policy, candidate, cohort(case["baseline"]))

    assert result.cost_rules is not None
    (rule,) = result.cost_rules
    assert rule.status == case["expected"], rule.reason
    if "observed" in case:
        assert rule.observed is not None
        assert math.isclose(rule.observed, case["observed"], rel_tol=1e-9, abs_tol=1e-12)
    assert case.get("reason_contains", "") in rule.reason
