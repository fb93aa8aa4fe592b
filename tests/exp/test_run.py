"""`neens exp run` on both databases: every case-trial run, graded and saved; partial runs;
errors of the right kind, counted and never retried when they are the agent's."""

from __future__ import annotations

import asyncio
import json
import re
import sys

from neens.store.db import Database
from neens.store.experiments import get_experiment
from tests.exp.conftest import Project, saved_trials


def _experiment(database_url: str, experiment_id: str):  # type: ignore[no-untyped-def]
    async def read():  # type: ignore[no-untyped-def]
        db = Database(database_url)
        try:
            return await get_experiment(db, experiment_id)
        finally:
            await db.dispose()

    return asyncio.run(read())


def test_a_run_grades_and_saves_every_case_trial(project: Project, database_url: str) -> None:
    project.write_spec(
        task={"kind": "command", "command": f"{sys.executable} agent.py", "env": {"WRONG": "gamma"}}
    )
    result = project.exp("run", "spec.json")
    assert result.code == 0, result.err
    match = re.match(r"run (exp_[0-9A-Z]{26}) base  pass 75\.0% \(3/4\)  4 case runs\n", result.out)
    assert match, result.out
    experiment_id = match[1]
    trials = saved_trials(database_url, experiment_id)
    assert [(t.case_id, t.trial, t.passed) for t in trials] == [
        ("alpha", 0, True),
        ("beta", 0, True),
        ("delta", 0, True),
        ("gamma", 0, False),
    ]
    gamma = trials[3]
    assert gamma.output == "wrong" and gamma.status == "done" and gamma.attempts == 1
    [grade] = gamma.grades
    assert grade.grader == "exact-1" and grade.kind == "exact" and grade.score == 0.0
    assert len(grade.version) == 16
    stored = _experiment(database_url, experiment_id)
    assert stored.finished_at is not None and stored.planned == 4
    assert [c["id"] for c in stored.cases] == ["alpha", "beta", "gamma", "delta"]


def test_json_output_has_the_counts_unrounded(project: Project) -> None:
    project.write_spec(
        task={"kind": "command", "command": f"{sys.executable} agent.py", "env": {"WRONG": "beta"}}
    )
    body = project.exp_json("run", "spec.json", "--trials", "3")
    assert body["status"] == "finished"
    assert (body["planned"], body["done"], body["graded"], body["passed"]) == (12, 12, 12, 9)
    assert body["passRate"] == 0.75
    assert body["errors"] == {"infra": 0, "agent": 0}
    assert body["costUsd"] is None  # a command task reports no usage: unpriced, never $0
    assert body["id"].startswith("exp_")


def test_each_case_gets_its_input_on_stdin_and_in_the_environment(project: Project) -> None:
    log = project.path / "calls.jsonl"
    project.write_spec(
        task={"kind": "command", "command": f"{sys.executable} agent.py", "env": {"LOG": str(log)}}
    )
    project.exp_json("run", "spec.json", "--trials", "2", "--concurrency", "1")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    # Trial by trial, the cases in dataset order (one at a time here).
    assert [(c["id"], c["trial"]) for c in calls] == [
        (case, trial) for trial in ("0", "1") for case in ("alpha", "beta", "gamma", "delta")
    ]
    assert all(c["input"] == c["id"] for c in calls)


def test_an_agent_that_crashes_or_hangs_is_an_agent_error_counted_not_retried(
    project: Project, database_url: str
) -> None:
    project.write_spec(
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"CRASH": "beta", "HANG": "gamma"},
            "timeout": 1,
        }
    )
    body = project.exp_json("run", "spec.json", "--retries", "3")
    assert body["status"] == "finished"  # exit 0: it finished, errors are counted
    assert body["errors"] == {"infra": 0, "agent": 2}
    assert (body["graded"], body["passed"]) == (2, 2)
    by_case = {t.case_id: t for t in saved_trials(database_url, body["id"])}
    assert by_case["beta"].error == "the command exited with code 3: boom"
    assert by_case["gamma"].error == "no answer within 1 s (timeout)"
    assert by_case["beta"].attempts == by_case["gamma"].attempts == 1
    assert by_case["beta"].passed is None and by_case["beta"].grades == ()


def test_an_agent_flooding_stdout_is_cut_off_as_an_agent_error(
    project: Project, database_url: str, monkeypatch: object
) -> None:
    import neens.exp.tasks

    monkeypatch.setattr(neens.exp.tasks, "MAX_ANSWER_BYTES", 10_000)  # type: ignore[attr-defined]
    flood = "import sys\nwhile True: sys.stdout.write('x' * 4096)\n"
    (project.path / "flood.py").write_text(flood)
    project.write_spec(
        task={"kind": "command", "command": f"{sys.executable} flood.py", "timeout": 30}
    )
    body = project.exp_json("run", "spec.json", "--case", "alpha")
    [trial] = saved_trials(database_url, body["id"])
    assert trial.error_kind == "agent"
    assert trial.error == "the command wrote more than 10,000 bytes to stdout"
    assert trial.output is None and trial.latency_ms is not None and trial.latency_ms < 20_000


def test_partial_runs_choose_their_cases(project: Project, database_url: str) -> None:
    def cases(*args: str) -> list[str]:
        body = project.exp_json("run", "spec.json", *args)
        return [c["id"] for c in _experiment(database_url, body["id"]).cases]

    assert cases("--case", "gamma", "--case", "alpha") == ["alpha", "gamma"]
    assert cases("--first-n", "2") == ["alpha", "beta"]
    sample = cases("--sample", "2", "--seed", "7")
    assert len(sample) == 2 and sample == cases("--sample", "2", "--seed", "7")
    assert {tuple(cases("--sample", "2", "--seed", str(s))) for s in range(8)} != {tuple(sample)}


def test_failing_reruns_only_the_cases_that_failed(project: Project, database_url: str) -> None:
    project.write_spec(
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"WRONG": "beta,delta"},
        }
    )
    first = project.exp_json("run", "spec.json")
    project.write_spec()
    again = project.exp_json("run", "spec.json", "--failing", first["id"])
    stored = _experiment(database_url, again["id"])
    assert [c["id"] for c in stored.cases] == ["beta", "delta"]
    assert stored.failing_of == first["id"] and again["passRate"] == 1.0


def test_a_grader_from_the_command_line_is_added(project: Project, database_url: str) -> None:
    body = project.exp_json(
        "run", "spec.json", "-g", '{"kind": "regex", "pattern": "^[A-Z]+$", "name": "caps"}'
    )
    stored = _experiment(database_url, body["id"])
    assert [g["name"] for g in stored.graders] == ["exact-1", "caps"]
    trials = saved_trials(database_url, body["id"])
    assert all([g.grader for g in t.grades] == ["exact-1", "caps"] for t in trials)


def test_a_case_that_no_grader_could_grade_is_ungraded_not_failed(project: Project) -> None:
    project.write_dataset([{"id": "x", "input": "x"}, {"id": "y", "input": "y", "expected": "Y"}])
    body = project.exp_json("run", "spec.json")
    assert (body["graded"], body["passed"], body["ungraded"]) == (1, 1, 1)
    assert body["passRate"] == 1.0


def test_a_run_works_on_a_neens_dataset_frozen_at_the_start(
    project: Project, database_url: str
) -> None:
    from neens.store.datasets import NewItem, create_dataset, create_version
    from neens.store.keys import create_key

    async def seed() -> tuple[str, str]:
        db = Database(database_url)
        try:
            key = await create_key(db, company="Acme", project="Agent", role="admin")
            dataset = await create_dataset(db, key.project_id, "smoke")
            items = [
                NewItem("alpha", "ALPHA", {"id": "a"}),
                NewItem("beta", "nope", {"kind": "guard"}),
            ]
            version = await create_version(db, key.project_id, dataset.id, items, golden=True)
            return dataset.id, version.id
        finally:
            await db.dispose()

    dataset_id, version_id = asyncio.run(seed())
    body = project.exp_json("run", "spec.json", "-d", dataset_id)
    stored = _experiment(database_url, body["id"])
    assert stored.dataset_version_id == version_id
    assert stored.cases[0] == {"id": "a", "input": "alpha", "expected": "ALPHA"}
    assert stored.cases[1]["kind"] == "guard" and stored.cases[1]["id"].startswith("dsi_")
    assert (body["graded"], body["passed"]) == (2, 1)
    by_version = project.exp_json("run", "spec.json", "-d", version_id)
    assert by_version["passed"] == 1


def test_help_lists_the_exp_commands(project: Project) -> None:
    result = project.run("exp", "--help")
    assert result.code == 0
    for command in ("run", "compare", "regrade", "aa", "list", "status"):
        assert f"    {command}" in result.out
