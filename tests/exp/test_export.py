"""`neens exp export` on real runs, on both databases: the bundle verifies offline with the
standard library alone, pass^k is reported unbiased beside the strict case rate, and a changed
byte or number fails verification, named."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from sqlalchemy import case, update

from neens.store.db import Database
from neens.store.models import ExperimentTrial
from tests.exp.conftest import Project
from tests.support.bundles import rehash, verify_py

FLAKY_AGENT = """\
import os, sys
text = sys.stdin.read()
wrong = set(filter(None, os.environ.get("WRONG", "").split(",")))
flaky = set(filter(None, os.environ.get("FLAKY", "").split(",")))
bad = text in wrong or (text in flaky and os.environ["NEENS_TRIAL"] == "1")
print("wrong" if bad else text.upper())
"""
KINDS = {0: "bad", 1: "bad", 4: "guard", 5: "control"}
CASES = [
    {
        "id": f"c{i:02d}",
        "input": f"q{i}",
        "expected": f"Q{i}",
        **({"kind": KINDS[i]} if i in KINDS else {}),
    }
    for i in range(12)
]


def _runs(project: Project) -> tuple[str, str]:
    (project.path / "flaky.py").write_text(FLAKY_AGENT)
    project.write_dataset(CASES, name="set")
    command = f"{sys.executable} flaky.py"
    project.write_spec(
        "a.json",
        name="old",
        dataset="set",
        task={"kind": "command", "command": command, "env": {"WRONG": "q0,q1,q2,q3"}},
    )
    project.write_spec(
        "b.json",
        name="new",
        dataset="set",
        task={"kind": "command", "command": command, "env": {"WRONG": "q0", "FLAKY": "q4,q5"}},
    )
    a = project.exp_json("run", "a.json", "--trials", "3")["id"]
    b = project.exp_json("run", "b.json", "--trials", "3")["id"]
    return a, b


def test_an_exported_comparison_verifies_offline_and_fails_when_changed(project: Project) -> None:
    a, b = _runs(project)
    bundle = project.path / "bundle"
    result = project.exp("export", b, "--against", a, "--out", str(bundle))
    assert result.code == 0, result.err
    decision = json.loads((bundle / "decision.json").read_text())
    old, new = decision["experiments"]
    assert (old["id"], new["id"]) == (a, b)
    # B: q0 fails every trial, q4 and q5 fail trial 1 only: 9 of 12 cases pass every trial.
    assert (new["casesPassedEveryTrial"], new["gradedCases"]) == (9, 12)
    pass_hat = {p["k"]: p["estimate"] for p in new["passHatK"]}
    assert pass_hat[1] == (11 * 3 - 2) / 36  # pass^1: the mean pass rate over cases
    assert abs(pass_hat[2] - (9 + 2 * (1 / 3)) / 12) < 1e-15  # C(2,2)/C(3,2) for q4, q5
    assert pass_hat[3] == 9 / 12  # k = trials: the strict share
    assert decision["comparison"]["a"]["id"] == a and decision["comparison"]["b"]["id"] == b
    kinds = decision["comparison"]["kinds"]
    assert (kinds["badNotFixed"], kinds["brokenGuards"], kinds["brokenControls"]) == (
        ["c00"], ["c04"], ["c05"],
    )  # fmt: skip
    comparison_out = project.exp_json("compare", a, b)
    assert comparison_out["interval"] == decision["comparison"]["interval"], "as exp compare"
    ok = verify_py(bundle)
    assert ok.returncode == 0, ok.stderr

    original = (bundle / "items.jsonl").read_bytes()
    changed = bytearray(original)
    changed[len(changed) // 3] ^= 0x20
    (bundle / "items.jsonl").write_bytes(bytes(changed))
    failed = verify_py(bundle)
    assert failed.returncode == 1 and "items.jsonl" in failed.stderr
    (bundle / "items.jsonl").write_bytes(original)

    decision["comparison"]["interval"]["low"] -= 0.2
    decision["experiments"][1]["passHatK"][1]["estimate"] = 0.9
    decision["comparison"]["kinds"]["brokenGuards"] = []
    (bundle / "decision.json").write_text(json.dumps(decision))
    rehash(bundle, "decision.json")
    wrong = verify_py(bundle)
    assert wrong.returncode == 1
    assert "comparison.interval.low (bootstrap)" in wrong.stderr
    assert f"experiments[{b}].passHatK" in wrong.stderr
    assert "comparison.kinds" in wrong.stderr


def test_one_experiment_exports_alone_and_bad_input_is_refused(project: Project) -> None:
    a, _ = _runs(project)
    bundle = project.path / "alone"
    assert project.exp("export", a, "--out", str(bundle)).code == 0
    assert verify_py(bundle).returncode == 0
    again = project.exp("export", a, "--out", str(bundle))
    assert again.code == 2 and "--out" in again.err and "not an empty directory" in again.err
    unknown = project.exp("export", "nope", "--out", str(project.path / "x"))
    assert unknown.code == 2 and "no such experiment" in unknown.err
    assert not (project.path / "x").exists(), "nothing half-written"
    unwritable = project.exp("export", a, "--out", "/proc/neens-bundle")  # no directory made there
    assert unwritable.code == 2 and "Traceback" not in unwritable.err
    assert unwritable.err.startswith(
        "neens: error: --out /proc/neens-bundle: cannot write in /proc"
    )


def test_with_pyarrow_the_case_trials_are_also_written_as_parquet(project: Project) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    a, b = _runs(project)
    bundle = project.path / "parquet"
    assert project.exp("export", b, "--against", a, "--out", str(bundle)).code == 0
    table = pq.read_table(bundle / "items.parquet").to_pylist()
    rows = [json.loads(line) for line in (bundle / "items.jsonl").read_text().splitlines()]
    assert len(table) == len(rows) == 72
    keep = ("experimentId", "caseId", "trial", "passed", "costUsd", "output")
    assert [{k: r[k] for k in keep} for r in table] == [{k: r[k] for k in keep} for r in rows]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert "items.parquet" in {f["path"] for f in manifest["files"]}
    assert verify_py(bundle).returncode == 0


def test_a_summed_cost_too_large_to_represent_is_null_and_flagged_never_infinity(
    project: Project, database_url: str
) -> None:
    """Two priced case-trials of 1e308 USD (an imported file can hold them) sum past the largest
    double: SQLite's SUM gives infinity, PostgreSQL's raises "out of range", math.fsum raises.
    Every place that sums them says the cost is too large to represent, and the JSON stays
    JSON (json.dumps would print `Infinity`)."""
    [run] = [project.exp_json("run", "spec.json")["id"]]

    async def overprice() -> None:
        db = Database(database_url)
        try:
            async with db.write() as s:
                await s.execute(
                    update(ExperimentTrial)
                    .where(ExperimentTrial.experiment_id == run)
                    .values(cost_usd=case((ExperimentTrial.case_id.in_(["alpha", "beta"]), 1e308)))
                )
        finally:
            await db.dispose()

    asyncio.run(overprice())

    listed = project.exp("list", "--json")
    assert listed.code == 0, listed.err
    [summary] = json.loads(listed.out, parse_constant=_refuse)["experiments"]
    assert (summary["costUsd"], summary["costOverflow"], summary["pricedTrials"]) == (None, True, 2)
    status = project.exp("status", run)
    assert "cost so far too large to represent (2 unpriced)" in status.out, status.out

    bundle = project.path / "bundle"
    assert project.exp("export", run, "--out", str(bundle)).code == 0
    decision = json.loads((bundle / "decision.json").read_text(), parse_constant=_refuse)
    [exported] = decision["experiments"]
    assert (exported["costUsd"], exported["costOverflow"]) == (None, True)
    assert exported["costPerTrialUsd"] == 1e308  # the mean of two doubles is one
    assert verify_py(bundle).returncode == 0
    exported["costOverflow"] = False
    (bundle / "decision.json").write_text(json.dumps(decision))
    rehash(bundle, "decision.json")
    wrong = verify_py(bundle)
    assert wrong.returncode == 1 and f"experiments[{run}].costOverflow" in wrong.stderr


def _refuse(constant: str) -> None:
    raise AssertionError(f"not JSON: {constant}")
