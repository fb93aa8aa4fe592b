"""`neens exp run --arm base=a.json --arm cand=b.json`: two configs as one A/B run, each case in
both arms back to back, with an O'Brien–Fleming early stop."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, update

from neens.domain.group_sequential import lan_demets_bounds, look_cases
from neens.exp import ab as ab_module
from neens.exp.ab import interleaved
from neens.exp.datasets import Case
from neens.store.db import Database
from neens.store.models import Experiment, ExperimentTrial
from tests.exp.conftest import Project

CASES = [{"id": f"c{i:02d}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(80)]


def _arms(
    project: Project,
    *,
    wrong_a: list[int],
    wrong_b: list[int],
    log: Path | None,
    crash_a: Sequence[int] = (),
) -> None:
    """a.json and b.json: the stand-in agent, answering wrong on the given cases (and crashing
    on `crash_a` in arm A)."""
    arms: list[tuple[str, str, Sequence[int], Sequence[int]]] = [
        ("a.json", "plain", wrong_a, crash_a),
        ("b.json", "tuned", wrong_b, ()),
    ]
    for filename, name, wrong, crash in arms:
        env = {"WRONG": ",".join(f"q{i}" for i in wrong)}
        if crash:
            env["CRASH"] = ",".join(f"q{i}" for i in crash)
        if log is not None:
            env["LOG"] = str(log)
        project.write_spec(
            filename,
            name=name,
            task={"kind": "command", "command": f"{sys.executable} agent.py", "env": env},
        )


def _calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_each_case_runs_in_both_arms_back_to_back_in_a_seeded_order(project: Project) -> None:
    log = project.path / "calls.jsonl"
    project.write_dataset(CASES[:10])
    _arms(project, wrong_a=[1, 2, 3], wrong_b=[3], log=log)
    body = project.exp_json(
        "run", "--arm", "base=a.json", "--arm", "cand=b.json", "--concurrency", "1", "--seed", "5"
    )
    first, second = body["ab"]["ids"]
    assert [arm["name"] for arm in body["ab"]["arms"]] == ["base", "cand"]
    assert body["a"]["id"] == first and body["a"]["name"] == "base"
    assert body["b"]["id"] == second and body["b"]["name"] == "cand"
    calls = _calls(log)
    assert len(calls) == 20
    for index, pair in enumerate(zip(calls[::2], calls[1::2], strict=True)):
        assert {pair[0]["exp"], pair[1]["exp"]} == {first, second}
        assert pair[0]["id"] == pair[1]["id"] == f"c{index:02d}"
    # Which arm went first in each pair is the seeded order a resume makes again.
    ran = [0 if call["exp"] == first else 1 for call in calls]
    cases = [Case.from_json(c) for c in CASES[:10]]
    assert ran == [arm for arm, _, _ in interleaved(cases, 1, 5)]
    assert 0 < sum(ran[::2]) < 10  # A first in some pairs, B first in others
    assert interleaved(cases, 1, 6) != interleaved(cases, 1, 5)
    # The report is exp compare's, A the first arm.
    compared = project.exp_json("compare", first, second)
    for key in ("diff", "interval", "mcnemar", "verdict", "pairedCases"):
        assert body[key] == compared[key], key
    assert body["mcnemar"]["n01"] == 2 and body["mcnemar"]["n10"] == 0
    assert body["sequential"] is None
    listed = {e["id"]: e for e in project.exp_json("list")["experiments"]}
    assert listed[first]["kind"] == listed[second]["kind"] == "ab"
    assert listed[first]["status"] == listed[second]["status"] == "finished"


def test_stop_early_stops_at_the_first_look_past_the_boundary(project: Project) -> None:
    log = project.path / "calls.jsonl"
    project.write_dataset(CASES)
    # A fails every even case, B none: by 40 cases 20 discordant pairs all favour B.
    _arms(project, wrong_a=list(range(0, 80, 2)), wrong_b=[], log=log)
    result = project.exp("run", "--arm", "base=a.json", "--arm", "cand=b.json", "--stop-early")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == (
        "ab base vs cand  80 cases, 1 trial each, in both arms back to back (order seed 0)"
    )
    assert lines[1] == "look 1 of 4  20 cases  z = +2.85  boundary ±4.333  continue"
    assert lines[2] == "look 2 of 4  40 cases  z = +4.25  boundary ±2.963  stop: B better"
    assert "B − A   +50.0pp" in result.out
    assert (
        "sequential B better: z = +4.25 crossed ±2.963 at look 2 of 4 (40 cases); stopped early"
        in result.out
    )
    assert "not adjusted for stopping early" in result.out
    assert len(_calls(log)) == 80  # 40 cases in both arms, the other 40 never run
    listed = [e for e in project.exp_json("list")["experiments"] if e["kind"] == "ab"]
    assert all(e["status"] == "finished" and e["done"] == 40 for e in listed)
    # A stopped run is whole: compare does not hold it as partial.
    a, b = sorted(e["id"] for e in listed)
    assert project.exp_json("compare", a, b)["holds"] == []

    # Crossing only at the last look is a verdict, not an early stop.
    body = project.exp_json(
        "run", "--arm", "base=a.json", "--arm", "cand=b.json", "--stop-early", "--looks", "2",
        "--max-cases", "40",
    )  # fmt: skip
    sequential = body["sequential"]
    assert sequential["verdict"] == "better" and sequential["stoppedEarly"] is False
    assert [p["cases"] for p in sequential["planned"]] == [20, 40]
    times = [p["informationFraction"] for p in sequential["planned"]]
    assert times == [0.5, 1.0]
    assert [look["boundary"] for look in sequential["looks"]] == pytest.approx(
        lan_demets_bounds(times), abs=1e-12
    )
    assert [(look["cases"], look["n01"], look["n10"]) for look in sequential["looks"]] == [
        (20, 10, 0),
        (40, 20, 0),
    ]
    assert [look["crossed"] for look in sequential["looks"]] == [False, True]
    assert body["ab"]["ranNow"] == 80 and body["ab"]["maxCases"] == 40


def test_a_run_with_no_difference_runs_to_its_end_and_says_inconclusive(project: Project) -> None:
    project.write_dataset(CASES[:30])
    _arms(project, wrong_a=[1, 4, 9], wrong_b=[2, 4, 8], log=None, crash_a=[12])
    result = project.exp("run", "--arm", "base=a.json", "--arm", "cand=b.json", "--stop-early")
    assert result.code == 0, result.err
    # The case arm A errored on has no verdict there: it is left out of the statistic.
    assert "look 1 of 3  20 cases (19 paired)  z = +0.00  boundary ±" in result.out
    assert "look 3 of 3  30 cases (29 paired)  z = +0.00  boundary ±" in result.out
    assert "end: no boundary crossed" in result.out
    assert "sequential inconclusive: no boundary crossed in 3 looks" in result.out
    assert "stopped early" not in result.out


def test_max_cases_caps_the_cases_each_run_in_both_arms(project: Project) -> None:
    log = project.path / "calls.jsonl"
    project.write_dataset(CASES[:30])
    _arms(project, wrong_a=[], wrong_b=[], log=log)
    body = project.exp_json(
        "run", "--arm", "base=a.json", "--arm", "cand=b.json", "--max-cases", "7", "--trials", "2"
    )
    assert body["ab"]["cases"] == 7 and body["pairedCases"] == 7
    assert len(_calls(log)) == 28
    assert body["a"]["planned"] == body["b"]["planned"] == 14


def _drop_trials(database_url: str, ids: list[str], keep_cases: int) -> None:
    """What a run killed partway leaves: only the first cases saved, the arms unfinished."""

    async def drop() -> None:
        db = Database(database_url)
        try:
            async with db.write() as s:
                for index, experiment_id in enumerate(ids):
                    kept = [f"c{i:02d}" for i in range(keep_cases + index)]
                    await s.execute(
                        delete(ExperimentTrial).where(
                            ExperimentTrial.experiment_id == experiment_id,
                            ExperimentTrial.case_id.not_in(kept),
                        )
                    )
                    await s.execute(
                        update(Experiment)
                        .where(Experiment.id == experiment_id)
                        .values(finished_at=None)
                    )
        finally:
            await db.dispose()

    asyncio.run(drop())


def test_resume_runs_only_what_neither_arm_saved_and_takes_the_same_looks(
    project: Project, database_url: str
) -> None:
    log = project.path / "calls.jsonl"
    project.write_dataset(CASES[:44])
    _arms(project, wrong_a=[1, 5, 11, 30], wrong_b=[5, 7], log=log)
    flags = ["--arm", "base=a.json", "--arm", "cand=b.json", "--stop-early", "--seed", "3"]
    clean = project.exp_json("run", *flags)
    ids = clean["ab"]["ids"]
    _drop_trials(database_url, ids, keep_cases=25)
    log.unlink()
    resumed = project.exp_json("run", *flags, "--resume", ids[1])
    assert resumed["ab"]["ids"] == ids and resumed["ab"]["resumed"] is True
    ran = sorted((c["exp"], c["id"]) for c in _calls(log))
    expected = sorted(
        (experiment_id, f"c{i:02d}")
        for index, experiment_id in enumerate(ids)
        for i in range(25 + index, 44)
    )
    assert ran == expected and resumed["ab"]["ranNow"] == len(expected)
    for key in ("diff", "interval", "mcnemar", "verdict", "sequential"):
        assert resumed[key] == clean[key], key
    nothing = project.exp_json("run", *flags, "--resume", ids[0])
    assert nothing["ab"]["ranNow"] == 0 and nothing["sequential"] == clean["sequential"]


def test_ctrl_c_says_how_to_resume_and_the_resumed_run_takes_the_same_looks(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.write_dataset(CASES[:44])
    _arms(project, wrong_a=[1, 5, 11, 30], wrong_b=[5, 7], log=None)
    flags = ["--arm", "base=a.json", "--arm", "cand=b.json", "--stop-early"]
    taken = ab_module.first_crossing

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # Ctrl-C once the first look's cases are saved

    monkeypatch.setattr(ab_module, "first_crossing", interrupted)
    stopped = project.exp("run", *flags)
    assert stopped.code == 130 and stopped.out.startswith("ab base vs cand  44 cases")
    listed = [e for e in project.exp_json("list")["experiments"] if e["kind"] == "ab"]
    ids = sorted(e["id"] for e in listed)
    assert stopped.err.strip() == (
        f"neens: interrupted: the arms {ids[0]} and {ids[1]} keep every finished case-trial; "
        f"run the same command with --resume {ids[0]} to run only what is left"
    )
    assert all(e["status"] == "partial" and e["done"] == 20 for e in listed)
    monkeypatch.setattr(ab_module, "first_crossing", taken)
    resumed = project.exp_json("run", *flags, "--resume")
    assert resumed["ab"]["ids"] == ids and resumed["ab"]["ranNow"] == 48
    clean = project.exp_json("run", *flags)
    for key in ("diff", "interval", "mcnemar", "verdict", "sequential"):
        assert resumed[key] == clean[key], key
    assert [look["cases"] for look in clean["sequential"]["looks"]] == [20, 22, 33, 44]


def test_resume_refuses_a_changed_arm_seed_or_flag_and_names_it(project: Project) -> None:
    project.write_dataset(CASES[:6])
    _arms(project, wrong_a=[1], wrong_b=[], log=None)
    body = project.exp_json("run", "--arm", "base=a.json", "--arm", "cand=b.json", "--seed", "2")
    first = body["ab"]["ids"][0]
    _arms(project, wrong_a=[1], wrong_b=[2], log=None)
    result = project.exp(
        "run", "--arm", "base=a.json", "--arm", "cand=b.json", "--resume", first, "--seed", "4",
        "--max-cases", "3",
    )  # fmt: skip
    assert result.code == 2
    line = result.err.strip()
    assert line.startswith(f"neens: error: cannot resume {first}: ")
    assert "arm cand: the task changed" in line
    assert "--seed changed (2 → 4)" in line
    assert "--max-cases changed (not given → 3)" in line
    renamed = project.exp("run", "--arm", "x=a.json", "--arm", "y=b.json", "--resume", first)
    assert renamed.code == 2 and "the arms changed (base, cand → x, y)" in renamed.err
    run = project.exp_json("run", "a.json")["id"]
    refused = project.exp("run", "--arm", "base=a.json", "--arm", "cand=b.json", "--resume", run)
    assert refused.code == 2 and "it is not an A/B run (it is a run)" in refused.err


def _refused(project: Project, *args: str) -> str:
    result = project.exp(*args)
    assert result.code == 2, (result.out, result.err)
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("neens: error: ")
    return lines[0].removeprefix("neens: error: ")


def test_bad_input_is_one_line_naming_it_and_writes_nothing(project: Project) -> None:
    _arms(project, wrong_a=[], wrong_b=[], log=None)
    (project.path / "bad.json").write_text('{"dataset": "qa", "task": {"kind": "ssh"}}')
    (project.path / "broken.json").write_text("{not json")
    assert _refused(project, "run", "--arm", "base=a.json", "--arm", "cand=bad.json") == (
        '--arm cand: bad.json: task.kind: must be "command" or "http"'
    )
    assert _refused(project, "run", "--arm", "base=broken.json", "--arm", "cand=b.json").startswith(
        "--arm base: broken.json: "
    )
    assert _refused(project, "run", "--arm", "base", "--arm", "cand=b.json") == (
        "--arm base: expected NAME=SPEC, e.g. --arm base=a.json"
    )
    assert _refused(project, "run", "--arm", "base=a.json") == (
        "--arm: an A/B run has exactly two arms, got 1 (--arm base=a.json --arm cand=b.json)"
    )
    assert "is taken by the other arm" in _refused(
        project, "run", "--arm", "x=a.json", "--arm", "x=b.json"
    )
    assert "name must be" in _refused(project, "run", "--arm", "=a.json", "--arm", "b=b.json")
    assert _refused(project, "run", "spec.json", "--stop-early") == (
        "--stop-early: only with two arms (--arm base=a.json --arm cand=b.json)"
    )
    assert _refused(project, "run", "spec.json", "--max-cases", "5").startswith("--max-cases: ")
    assert _refused(project, "run") == (
        "SPEC: give the experiment spec (spec.json), or two arms with --arm NAME=SPEC"
    )
    both = _refused(project, "run", "spec.json", "--arm", "a=a.json", "--arm", "b=b.json")
    assert both == "SPEC spec.json: not with --arm (each arm names its own spec)"
    looks = _refused(project, "run", "--arm", "a=a.json", "--arm", "b=b.json", "--looks", "3")
    assert looks == "--looks: only with --stop-early (it sets the sequential test's looks)"
    series = _refused(project, "run", "--arm", "a=a.json", "--arm", "b=b.json", "--series", "s")
    assert series == "--series: not with --arm (an A/B run does not take it)"
    project.write_dataset(CASES[:3], name="other")
    project.write_spec("c.json", dataset="other")
    assert "name different datasets (datasets/qa.jsonl, datasets/other.jsonl)" in _refused(
        project, "run", "--arm", "a=a.json", "--arm", "c=c.json"
    )
    project.write_spec("d.json", trials=3)
    assert "run 1 and 3 trials per case" in _refused(
        project, "run", "--arm", "a=a.json", "--arm", "d=d.json"
    )
    assert project.exp_json("list")["experiments"] == []


def test_the_docs_say_what_the_code_computes() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "exp.md").read_text()
    section = text[text.index("### How an A/B run decides") : text.index("## `neens exp session`")]
    bounds = lan_demets_bounds([0.25, 0.5, 0.75, 1.0])
    assert ", ".join(f"±{c:.3f}" for c in bounds) in section
    assert f"(120 cases: {', '.join(map(str, look_cases(120)))};" in section
    assert f"50 cases: {', '.join(map(str, look_cases(50)))})" in section
    for phrase in ("`B better`", "`B worse`", "`inconclusive`", "never before 20 cases"):
        assert phrase in text, phrase
    assert "## Not yet available" not in text  # A/B runs were the last thing it listed
