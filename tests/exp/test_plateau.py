"""`exp run --series` and `exp plateau` on both databases, with a seeded stand-in agent whose
quality each round sets: a loop that improves, then plateaus, stops, and resumes."""

from __future__ import annotations

import asyncio
import random
import re
import sys

from neens.store.db import Database
from neens.store.experiment_series import series_rounds
from tests.exp.conftest import Project
from tests.support.sqlite_only import sqlite_only

SEED = "loop-7"
CASES = [f"case{i:02d}" for i in range(20)]
# Each case's seeded difficulty; the agent solves the cases easier than its QUALITY.
DIFFICULTY = sorted(random.Random(f"{SEED}:{case}").random() for case in CASES)

AGENT = """\
import os, random, sys
case = sys.stdin.read()
difficulty = random.Random(os.environ["SEED"] + ":" + case).random()
print(case.upper() if difficulty < float(os.environ["QUALITY"]) else "wrong")
"""


def _quality(solved: int) -> float:
    """A quality at which exactly `solved` of the 20 cases pass."""
    if solved == 0:
        return 0.0
    if solved == len(CASES):
        return 1.0
    return (DIFFICULTY[solved - 1] + DIFFICULTY[solved]) / 2


def _setup(project: Project) -> None:
    (project.path / "standin.py").write_text(AGENT)
    project.write_dataset([{"id": c, "input": c, "expected": c.upper()} for c in CASES])


def _write_round_spec(project: Project, solved: int) -> None:
    """spec.json for a round whose agent solves `solved` cases."""
    project.write_spec(
        name="loop",
        task={
            "kind": "command",
            "command": f"{sys.executable} standin.py",
            "env": {"SEED": SEED, "QUALITY": repr(_quality(solved))},
        },
    )


def _round(project: Project, solved: int, *extra: str) -> str:
    """Run one round whose agent solves `solved` cases; its series line."""
    _write_round_spec(project, solved)
    result = project.exp("run", "spec.json", "--series", "loop", *extra)
    assert result.code == 0, result.err
    return result.out.splitlines()[-1]


@sqlite_only(
    "the subject is the decision; test_series_membership_is_stored_in_order stores on both"
)
def test_a_loop_that_improves_then_plateaus_says_continue_then_stop(project: Project) -> None:
    _setup(project)
    lines = [_round(project, solved) for solved in (5, 10, 10, 11, 11, 10, 11)]
    assert lines[0] == (
        "series loop: continue, incumbent v1 (pass 25.0%); round 1 of a new series; too few "
        "rounds to decide (1 of 3)"
    )
    assert lines[1] == (
        "series loop: continue, incumbent v2 (pass 50.0%); v2 gains +25.0pp over v1 on 20 "
        "shared cases; detector 0.50 of 20; too few rounds to decide (2 of 3)"
    )
    # +5pp is kept by the greedy gate but is not more than ε: no improvement.
    assert lines[3] == (
        "series loop: continue, incumbent v4 (pass 55.0%); v4 gains +5.0pp over v2 on 20 "
        "shared cases; detector 4.81 of 20"
    )
    assert lines[6] == (
        "series loop: stop, ship v2 (pass 50.0%): detector 25.40 ≥ 20 at round 7 (the plateau "
        "began at round 3)"
    )

    result = project.exp("plateau", "--series", "loop")
    assert result.code == 3, result.err
    out = result.out.splitlines()
    assert out[0] == (
        "series loop  gate greedy  ε 5.0pp  δ 0.05: alarm at detector ≥ 20, false alarms on "
        "average no sooner than every 20 rounds"
    )
    rows = [line for line in out if re.match(r"v\d+ ", line)]
    assert len(rows) == 7
    assert re.match(r"v4 +exp_\w+ +55\.0% +v2 +\+5\.0pp +20 +no +4\.81 +v4 +kept$", rows[3])
    assert re.search(r"25\.40 +v2 +stop: the plateau began at round 3, ship v2$", rows[6])
    assert out[-1] == lines[6]

    # Stays stopped: +5pp over the shipped v2 is not more than ε.
    assert _round(project, 11) == (
        "series loop: stop, ship v2 (pass 50.0%): stopped at round 7; v8 gains +5.0pp over v2, "
        "not more than ε 5.0pp (the plateau began at round 3)"
    )
    assert project.exp("plateau", "--series", "loop").code == 3
    # Resumes: +15pp over v2.
    assert _round(project, 13) == (
        "series loop: continue, incumbent v9 (pass 65.0%); v9 beats the shipped v2 by +15.0pp, "
        "more than ε 5.0pp: the series resumes and the detector restarts"
    )
    result = project.exp("plateau", "--series", "loop")
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1] == (
        "series loop: continue, incumbent v9 (pass 65.0%); v9 beats the shipped v2 by +15.0pp, "
        "more than ε 5.0pp: the series resumes and the detector restarts"
    )


@sqlite_only(
    "the subject is the decision; test_series_membership_is_stored_in_order stores on both"
)
def test_plateau_json_has_every_round_and_the_decision(project: Project) -> None:
    _setup(project)
    ids = []
    for solved in (5, 10, 10):
        _write_round_spec(project, solved)
        body = project.exp_json("run", "spec.json", "--series", "loop")
        ids.append(body["id"])
        assert body["series"]["version"] == f"v{len(ids)}"
    assert body["series"]["decision"]["action"] == "continue"
    assert body["series"]["decision"]["detector"] == 6.625 / 3

    result = project.exp("plateau", "--series", "loop", "--gate", "chain", "--json")
    assert result.code == 0, result.err
    plateau = result.json()
    assert (plateau["gate"], plateau["threshold"], plateau["m0"]) == ("chain", 20.0, 0.5)
    assert plateau["lambdas"] == [0.5, 1.0, 1.5]
    assert [r["experimentId"] for r in plateau["rounds"]] == ids
    assert [r["gain"] for r in plateau["rounds"]] == [None, 0.25, 0.0]
    assert [r["improved"] for r in plateau["rounds"]] == [None, True, False]
    assert [r["incumbent"] for r in plateau["rounds"]] == ["v1", "v2", "v3"]  # chain keeps all
    assert plateau["decision"]["version"] == "v3" and plateau["exitCode"] == 0


def test_series_membership_is_stored_in_order(project: Project, database_url: str) -> None:
    _setup(project)
    ids = []
    for solved in (5, 6):
        _write_round_spec(project, solved)
        ids.append(project.exp_json("run", "spec.json", "--series", "loop")["id"])

    async def read() -> list[tuple[int, str]]:
        db = Database(database_url)
        try:
            return [(r.round, r.experiment_id) for r in await series_rounds(db, "loop")]
        finally:
            await db.dispose()

    assert asyncio.run(read()) == [(1, ids[0]), (2, ids[1])]


@sqlite_only(
    "the subject is the decision; test_series_membership_is_stored_in_order stores on both"
)
def test_plateau_needs_three_rounds(project: Project) -> None:
    _setup(project)
    _round(project, 5)
    _round(project, 6)
    result = project.exp("plateau", "--series", "loop")
    assert result.code == 2
    assert result.out == ""
    assert result.err.strip() == (
        "neens: error: series loop: too few experiments to decide, 2 rounds (v1, v2) of the 3 "
        "exp plateau needs; run more with `neens exp run SPEC --series loop`"
    )


def test_an_unknown_series_is_named(project: Project) -> None:
    result = project.exp("plateau", "--series", "nope")
    assert result.code == 2
    assert "--series nope: no such series in this store" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_run_of_failing_cases_is_not_a_round(project: Project) -> None:
    first = project.exp_json("run", "spec.json")["id"]
    result = project.exp("run", "spec.json", "--failing", first, "--series", "loop")
    assert result.code == 2
    assert "--series: not with --failing" in result.err


def test_a_run_is_a_round_of_one_series_only(project: Project) -> None:
    first = project.exp_json("run", "spec.json", "--series", "a")["id"]
    result = project.exp("run", "spec.json", "--resume", first, "--series", "b")
    assert result.code == 2, result.out
    assert f"{first} is already round v1 of series a" in result.err
    # Resuming it in its own series keeps its round.
    again = project.exp_json("run", "spec.json", "--resume", first, "--series", "a")
    assert again["series"]["version"] == "v1"


@sqlite_only("refused before anything is written")
def test_bad_detector_settings_are_refused(project: Project) -> None:
    for flag, value in (("--eps", "1.5"), ("--delta", "0"), ("--gate", "best")):
        result = project.exp("plateau", "--series", "loop", flag, value)
        assert result.code == 2
        assert flag in result.err


@sqlite_only("refused before anything is written")
def test_detector_flags_on_exp_run_need_series(project: Project) -> None:
    result = project.exp("run", "spec.json", "--eps", "0.1")
    assert result.code == 2
    assert "--eps: only with --series NAME" in result.err


@sqlite_only(
    "the subject is the decision; test_series_membership_is_stored_in_order stores on both"
)
def test_exp_run_decides_with_the_flags_it_is_given(project: Project) -> None:
    _setup(project)
    _round(project, 5)
    # +5pp is an improvement at --eps 0.04, so the detector falls instead of rising.
    line = _round(project, 6, "--eps", "0.04", "--gate", "chain")
    assert line.endswith(
        "v2 gains +5.0pp over v1 on 20 shared cases; detector 0.50 of 20; too few rounds to "
        "decide (2 of 3)"
    )
