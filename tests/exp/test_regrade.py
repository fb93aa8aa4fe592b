"""`neens exp regrade`: stored outputs graded again with a spec's graders, no task calls, saved
as an experiment of its own linked to the source."""

from __future__ import annotations

import sys

from tests.exp.conftest import Project


def test_regrade_grades_stored_outputs_again_without_calling_the_task(project: Project) -> None:
    log = project.path / "calls.jsonl"
    project.write_dataset(
        [
            {"id": "alpha", "input": "alpha", "expected": "alpha"},
            {"id": "beta", "input": "beta", "expected": "BETA"},
            {"id": "gamma", "input": "gamma", "expected": "gamma"},
            {"id": "delta", "input": "delta", "expected": "DELTA"},
        ]
    )
    project.write_spec(
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"LOG": str(log), "CRASH": "delta"},
        }
    )
    source = project.exp_json("run", "spec.json")
    assert (source["passed"], source["graded"], source["errors"]["agent"]) == (1, 3, 1)
    calls = len(log.read_text().splitlines())

    project.write_spec(
        "loose.json", graders=[{"kind": "exact", "case_sensitive": False, "name": "exact-1"}]
    )
    result = project.exp("regrade", source["id"], "loose.json")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("regrade exp_")
    assert lines[0].endswith(f"base  pass 100.0% (3/3)  regrade of {source['id']}, 0 task calls")
    assert lines[1] == "before pass 33.3% (1/3)  after pass 100.0% (3/3)"
    assert lines[2] == "flipped 2"
    assert lines[3:] == [
        "case   trial  before  after",
        "-----  -----  ------  -----",
        "alpha      0  fail    pass",
        "gamma      0  fail    pass",
    ]
    assert len(log.read_text().splitlines()) == calls  # no task call

    body = project.exp_json("regrade", source["id"], "loose.json")
    assert body["taskCalls"] == 0 and body["sourceId"] == source["id"]
    assert [f["case"] for f in body["flipped"]] == ["alpha", "gamma"]
    listed = {e["id"]: e for e in project.exp_json("list")["experiments"]}
    regraded = listed[body["id"]]
    assert regraded["kind"] == "regrade" and regraded["sourceId"] == source["id"]
    assert regraded["errors"] == {"infra": 0, "agent": 1}  # an error stays an error
    assert regraded["status"] == "finished"

    # Compared with its source, the graders differ: said, and the gate holds.
    compared = project.exp("compare", source["id"], body["id"], "--gate")
    assert compared.code == 1
    assert "grader exact-1 changed version between A and B" in compared.err
    assert "verdict " in compared.out


def test_regrade_of_an_unknown_experiment_is_refused(project: Project) -> None:
    result = project.exp("regrade", "exp_nothing", "spec.json")
    assert result.code == 2
    assert result.err.strip() == (
        "neens: error: experiment exp_nothing: no such experiment in this store (`neens exp list`)"
    )
