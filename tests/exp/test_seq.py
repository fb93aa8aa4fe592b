"""`exp run --seq N --feedback reasons`: a failing case-trial tried again with the graders'
reasons; the pass rate stays the first attempt's and Seq@N is reported beside it. `exp compare
--verdict seq` compares the Seq@N outcomes."""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.exp.conftest import Project, saved_trials

LEARNER = """\
import json, os, sys
text = sys.stdin.read()
with open(os.environ["LOG"], "a") as f:
    f.write(json.dumps([text, os.environ.get("NEENS_ATTEMPT"), os.environ.get("NEENS_FEEDBACK"),
                        os.environ.get("NEENS_PREVIOUS_OUTPUT")]) + "\\n")
stubborn = text in os.environ.get("STUBBORN", "").split(",")
slow = text in os.environ.get("SLOW", "").split(",")
attempt = int(os.environ.get("NEENS_ATTEMPT", "1"))
if stubborn or (slow and attempt < 3) or (not slow and attempt < 2 and text != "alpha"):
    print("wrong")
else:
    print(text.upper())
"""


def _spec(project: Project, filename: str, name: str, **env: str) -> None:
    log = str(project.path / f"{name}.log")
    project.write_spec(
        filename,
        name=name,
        task={
            "kind": "command",
            "command": f"{sys.executable} learner.py",
            "env": {"LOG": log, **env},
        },
    )


def test_seq_retries_failing_case_trials_with_the_graders_reasons(
    project: Project, database_url: str
) -> None:
    (project.path / "learner.py").write_text(LEARNER)
    _spec(project, "spec.json", "base", STUBBORN="delta", SLOW="gamma")
    body = project.exp_json("run", "spec.json", "--seq", "3", "--feedback", "reasons")
    # First attempts: only alpha passes. Within 3: alpha (1), beta (2), gamma (3); delta never.
    assert (body["passed"], body["graded"]) == (1, 4)
    assert body["seq"] == {"attempts": 3, "feedback": "reasons", "passed": 3, "rate": 0.75}
    trials = _trials(database_url, body["id"])
    assert {c: t.seq_passed_at for c, t in trials.items()} == {
        "alpha": 1,
        "beta": 2,
        "gamma": 3,
        "delta": None,
    }
    assert [e["attempt"] for e in trials["delta"].seq_log] == [2, 3]
    assert trials["beta"].passed is False  # the pass rate stays the first attempt's
    calls = [json.loads(line) for line in (project.path / "base.log").read_text().splitlines()]
    beta_again = next(c for c in calls if c[0] == "beta" and c[1] == "2")
    assert beta_again[2].startswith("exact-1: the output differs from the expected output")
    assert beta_again[3] == "wrong"
    human = project.exp("run", "spec.json", "--seq", "3")
    assert "seq@3 75.0% (3/4) with feedback (reasons); the pass rate above is the first " in (
        human.out
    )


def test_compare_verdict_seq_uses_seq_outcomes_of_runs_with_the_same_seq(
    project: Project,
) -> None:
    (project.path / "learner.py").write_text(LEARNER)
    _spec(project, "a.json", "a", STUBBORN="beta,gamma,delta")
    _spec(project, "b.json", "b", STUBBORN="delta")
    a = project.exp_json("run", "a.json", "--seq", "2")["id"]
    b = project.exp_json("run", "b.json", "--seq", "2")["id"]
    first = project.exp_json("compare", a, b)
    assert first["diff"] == 0.0 and first["verdictFrom"] == "first attempt"
    seq = project.exp_json("compare", a, b, "--verdict", "seq")
    assert seq["diff"] == 0.5 and seq["verdictFrom"] == "Seq@2"
    assert seq["mcnemar"]["n01"] == 2
    human = project.exp("compare", a, b, "--verdict", "seq")
    assert "(4 paired cases, 95% paired bootstrap, Seq@2)" in human.out
    plain = project.exp_json("run", "b.json")["id"]
    refused = project.exp("compare", a, plain, "--verdict", "seq")
    assert refused.code == 2
    assert refused.err.strip() == (
        "neens: error: --verdict seq: A and B must both have run with the same --seq and "
        "--feedback (A: --seq 2 --feedback reasons, B: without --seq)"
    )


def test_resume_refuses_a_changed_seq(project: Project) -> None:
    (project.path / "learner.py").write_text(LEARNER)
    _spec(project, "spec.json", "base")
    first = project.exp_json("run", "spec.json", "--seq", "2")
    result = project.exp("run", "spec.json", "--resume", first["id"], "--seq", "3")
    assert result.code == 2 and "--seq changed (2 → 3)" in result.err
    assert project.exp("run", "spec.json", "--feedback", "reasons").code == 2


def _trials(database_url: str, experiment_id: str) -> dict[str, Any]:
    return {t.case_id: t for t in saved_trials(database_url, experiment_id)}
