"""Resume: after a crash (kill -9 included) the same command with --resume runs only what is
left, and refuses, naming it, when the dataset, graders, task or agent script changed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from sqlalchemy import delete, update

import neens.exp.runner
from neens.demo.endpoints import flaky, serve
from neens.store.db import Database
from neens.store.models import Experiment, ExperimentTrial
from tests.exp.conftest import Project, saved_trials

MANY = [{"id": f"c{i:02d}", "input": f"case {i}", "expected": f"CASE {i}"} for i in range(12)]


def _interrupt(database_url: str, experiment_id: str, keep: int) -> None:
    """Leave only the first `keep` saved case-trials, unfinished: what a crash leaves."""

    async def cut() -> None:
        db = Database(database_url)
        try:
            async with db.write() as s:
                rows = (
                    await s.scalars(
                        ExperimentTrial.__table__.select()
                        .with_only_columns(ExperimentTrial.pk)
                        .where(ExperimentTrial.experiment_id == experiment_id)
                        .order_by(ExperimentTrial.pk)
                    )
                ).all()
                await s.execute(delete(ExperimentTrial).where(ExperimentTrial.pk.in_(rows[keep:])))
                await s.execute(
                    update(Experiment)
                    .where(Experiment.id == experiment_id)
                    .values(finished_at=None)
                )
        finally:
            await db.dispose()

    asyncio.run(cut())


def test_resume_runs_only_what_is_left(project: Project, database_url: str) -> None:
    log = project.path / "calls.jsonl"
    project.write_spec(
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"LOG": str(log), "WRONG": "beta"},
        }
    )
    first = project.exp_json("run", "spec.json", "--trials", "2")
    complete = _outcomes(database_url, first["id"])
    _interrupt(database_url, first["id"], keep=3)
    listed = project.exp("list")
    assert "3/8 (partial)" in listed.out
    log.unlink()
    resumed = project.exp_json("run", "spec.json", "--trials", "2", "--resume")
    assert resumed["id"] == first["id"] and resumed["ranNow"] == 5
    assert resumed["status"] == "finished"
    assert len(log.read_text().splitlines()) == 5
    assert _outcomes(database_url, first["id"]) == complete
    again = project.exp_json("run", "spec.json", "--trials", "2", "--resume", first["id"])
    assert again["ranNow"] == 0 and again["done"] == 8


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("dataset", "the dataset datasets/qa.jsonl changed since the run started"),
        ("grader", "the grader exact-1 changed (version "),
        ("task", "the task changed"),
        ("agent", "the agent script agent.py changed"),
        ("trials", "the trials changed (1 → 2)"),
    ],
)
def test_resume_refuses_when_something_changed_and_names_it(
    project: Project, database_url: str, change: str, named: str
) -> None:
    first = project.exp_json("run", "spec.json")
    _interrupt(database_url, first["id"], keep=1)
    args = ["run", "spec.json", "--resume", first["id"]]
    if change == "dataset":
        project.write_dataset([{"id": "alpha", "input": "alpha", "expected": "Alpha"}])
    elif change == "grader":
        project.write_spec(graders=[{"kind": "exact", "case_sensitive": False}])
    elif change == "task":
        project.write_spec(
            task={
                "kind": "command",
                "command": f"{sys.executable} agent.py",
                "env": {"MODEL": "big"},
            }
        )
    elif change == "agent":
        (project.path / "agent.py").write_text("print('changed')\n")
    else:
        args += ["--trials", "2"]
    result = project.exp(*args)
    assert result.code == 2
    assert result.err.startswith(f"neens: error: cannot resume {first['id']}: ")
    assert named in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert len(_outcomes(database_url, first["id"])) == 1  # nothing ran


def test_resume_with_retry_errors_runs_the_errors_again(
    project: Project, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(neens.exp.runner, "RETRY_BASE_S", 0.01)
    answers = {c["input"]: c["expected"] for c in project_cases()}
    with serve(flaky(answers, first=2, fraction=0.0, path="/agent")) as server:
        project.write_spec(task={"kind": "http", "url": server.url("/agent")})
        first = project.exp_json("run", "spec.json", "--retries", "0", "--concurrency", "1")
        assert first["errors"] == {"infra": 2, "agent": 0} and first["status"] == "finished"
        plain = project.exp_json("run", "spec.json", "--resume", first["id"], "--retries", "0")
        assert plain["ranNow"] == 0
        again = project.exp_json(
            "run", "spec.json", "--resume", first["id"], "--retry-errors", "--retries", "0"
        )
    assert again["ranNow"] == 2
    assert again["errors"] == {"infra": 0, "agent": 0} and again["passed"] == 4
    assert len(_outcomes(database_url, first["id"])) == 4


def project_cases() -> list[dict[str, str]]:
    from tests.exp.conftest import CASES

    return CASES


def test_resume_without_an_id_needs_an_unfinished_run(project: Project) -> None:
    project.exp_json("run", "spec.json")
    result = project.exp("run", "spec.json", "--resume")
    assert result.code == 2
    assert "--resume: no unfinished run named 'base' in this store" in result.err


def _saved(database_url: str, experiment_id: str) -> int:
    return len(_outcomes(database_url, experiment_id))


def test_a_run_killed_with_sigkill_resumes_to_the_same_result(
    project: Project, database_url: str
) -> None:
    project.write_dataset(MANY)
    project.write_spec(
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"SLEEP": "0.15", "WRONG": "case 3,case 7"},
        }
    )
    # The agent's environment (not the spec, so the resume runs the same spec) makes every
    # case after the fourth hang: the kill lands on a run that has saved exactly 4 case-trials,
    # however slow the machine.
    hang = ",".join(f"case {i}" for i in range(4, len(MANY)))
    env = {**os.environ, "NEENS_DATABASE_URL": database_url, "HANG": hang}
    command = [
        sys.executable,
        "-m",
        "neens_eval",
        "exp",
        "run",
        "spec.json",
        "--trials",
        "2",
        "--concurrency",
        "2",
    ]
    process = subprocess.Popen(
        command,
        cwd=project.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    experiment_id = None
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            listed = project.exp_json("list")["experiments"]
            if listed and listed[0]["done"] >= 4:
                experiment_id = listed[0]["id"]
                break
            time.sleep(0.05)
        assert experiment_id is not None, "the run saved nothing in time"
        os.killpg(process.pid, signal.SIGKILL)  # the run and its hanging agents, as kill -9
    finally:
        process.wait(timeout=30)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    saved = _saved(database_url, experiment_id)
    assert saved == 4

    status = project.exp_json("status")["experiments"]
    assert [s["id"] for s in status] == [experiment_id]
    assert status[0]["status"] == "partial" and status[0]["done"] == saved
    assert status[0]["etaSeconds"] is not None and status[0]["etaSeconds"] > 0
    human = project.exp("status")
    assert f"{experiment_id} base  partial  {saved}/24 case runs" in human.out
    assert "ETA " in human.out and "cost so far unpriced" in human.out

    resumed = project.exp_json("run", "spec.json", "--trials", "2", "--resume", experiment_id)
    assert resumed["ranNow"] == 24 - saved and resumed["status"] == "finished"
    uninterrupted = project.exp_json("run", "spec.json", "--trials", "2")
    assert [(c, t, p) for c, t, p in _outcomes(database_url, experiment_id)] == _outcomes(
        database_url, uninterrupted["id"]
    )
    assert resumed["passRate"] == uninterrupted["passRate"] == 20 / 24
    # The verdict against another run equals the uninterrupted run's, interval and all.
    project.write_spec(
        "other.json",
        name="other",
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"WRONG": "case 1,case 2,case 3,case 4,case 5"},
        },
    )
    other = project.exp_json("run", "other.json", "--trials", "2")["id"]
    after_resume = project.exp_json("compare", other, experiment_id)
    after_clean_run = project.exp_json("compare", other, uninterrupted["id"])
    for key in ("diff", "interval", "seed", "mcnemar", "verdict", "probBBeatsA", "power"):
        assert after_resume[key] == after_clean_run[key], key
    listed = {e["id"]: e for e in project.exp_json("list")["experiments"]}
    assert listed[experiment_id]["status"] == "finished"
    assert json.dumps(listed[experiment_id]["errors"]) == '{"infra": 0, "agent": 0}'


def test_ctrl_c_keeps_the_finished_case_trials_and_says_how_to_resume(
    project: Project, database_url: str
) -> None:
    project.write_dataset(MANY)
    project.write_spec(
        task={"kind": "command", "command": f"{sys.executable} agent.py", "env": {"SLEEP": "0.2"}}
    )
    # Cases after the second hang (for the agent only), so Ctrl-C lands mid-run however slow
    # the machine; the resume below runs without it.
    hang = ",".join(f"case {i}" for i in range(2, len(MANY)))
    env = {**os.environ, "NEENS_DATABASE_URL": database_url, "HANG": hang}
    process = subprocess.Popen(
        [sys.executable, "-m", "neens_eval", "exp", "run", "spec.json", "--concurrency", "2"],
        cwd=project.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    listed: list[Any] = []
    while time.monotonic() < deadline:
        listed = project.exp_json("list")["experiments"]
        if listed and listed[0]["done"] >= 2:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    experiment_id = listed[0]["id"]
    assert process.returncode == 130
    assert err.strip().endswith(
        f"neens: interrupted: {experiment_id} keeps every finished case-trial; run the same "
        f"command with --resume {experiment_id} to run only what is left"
    )
    saved = _saved(database_url, experiment_id)
    assert 2 <= saved < 12
    resumed = project.exp_json("run", "spec.json", "--resume")
    assert resumed["id"] == experiment_id and resumed["ranNow"] == 12 - saved


def _outcomes(database_url: str, experiment_id: str) -> list[tuple[str, int, bool | None]]:
    return [(t.case_id, t.trial, t.passed) for t in saved_trials(database_url, experiment_id)]
