"""`neens exp sweep`: a race between seeded stand-in agents on loopback whose best config is
known, the held-out check, the guard, resume, and bad input."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from scipy.stats import binomtest
from sqlalchemy import delete, update

from neens.demo.endpoints import Agent, serve
from neens.store.db import Database
from neens.store.models import ExperimentSweep, ExperimentTrial
from tests.exp.conftest import Project, hold_claims
from tests.support.sqlite_only import sqlite_only

CASES = [{"id": f"c{i:02d}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(60)]
OLD = [{"id": f"o{i}", "input": f"old{i}", "expected": f"OLD{i}"} for i in range(10)]
"""A guard suite."""


def seeded(
    config: str, skill: float, *, fails: frozenset[str] = frozenset()
) -> Callable[[str], str]:
    """A stand-in agent answering a case right with probability `skill`, fixed per case by a
    hash of the config and the input (so every run of the test draws the same answers)."""

    def answer(text: str) -> str:
        draw = int(hashlib.sha256(f"{config}:{text}".encode()).hexdigest()[:8], 16) / 2**32
        return "wrong" if text in fails or draw >= skill else text.upper()

    return answer


def _specs(project: Project, urls: dict[str, str]) -> None:
    for name, url in urls.items():
        project.write_spec(
            f"{name}.json", name=name, dataset="qa", graders=[], task={"kind": "http", "url": url}
        )


def _calls_by_experiment(server: Any) -> dict[str, list[str]]:
    by: dict[str, list[str]] = defaultdict(list)
    for call in server.calls:
        by[call.body["eval_run_id"]].append(call.body["dataset_item_id"])
    return by


SWEEP = ["sweep", "base=base.json", "t2=temp2.json", "t5=temp5.json", "-g", '{"kind":"exact"}']
SWEEP2 = ["sweep", "base=base.json", "t2=temp2.json", "-g", '{"kind":"exact"}']
"""The two-config sweep, base against t2 (`_two_specs`)."""


def _two_specs(project: Project, server: Any) -> None:
    """base.json and temp2.json, on the agents served at /base and /t2."""
    _specs(project, {"base": server.url("/base"), "temp2": server.url("/t2")})


def _three_specs(project: Project, server: Any) -> None:
    """`_two_specs` and temp5.json, on the agent served at /t5 (for `SWEEP`)."""
    _specs(
        project,
        {"base": server.url("/base"), "temp2": server.url("/t2"), "temp5": server.url("/t5")},
    )


def test_the_race_finds_the_known_best_config_and_adopts_it_on_held_out_cases(
    project: Project,
) -> None:
    project.write_dataset(CASES[:40])
    # base at 0.1: on the 12 held-out cases t2 goes up on 10 and down on none, enough for the
    # exact test (at 0.3 it is 7 up, 1 down, p = 0.07: the next test, which keeps base).
    agents = [
        Agent(seeded("base", 0.1), path="/base"),
        Agent(seeded("t2", 0.95), path="/t2"),
        Agent(seeded("t5", 0.2), path="/t5"),
    ]
    with serve(*agents) as server:
        _three_specs(project, server)
        result = project.exp(*SWEEP, "--budget", "60", "--json")
    assert result.code == 0, result.err
    body = result.json()
    # 40 cases, 12 held out, 28 to race on. R = 2: ⌊60/6⌋ = 10 cases for 3 configs, then
    # ⌊60/4⌋ = 15 for 2: 60 case runs, 25 fresh cases.
    assert body["split"] == {"train": 28, "heldOut": 12}
    assert body["budget"]["used"] == 60
    assert [(r["casesPerConfig"], len(r["configs"])) for r in body["rounds"]] == [(10, 3), (15, 2)]
    assert body["budget"]["raceCaseRuns"] == 60
    assert body["winner"] == "t2"
    assert body["decision"] == "adopt" and body["adopted"] == "t2" and body["exitCode"] == 0
    comparison = body["heldOut"]["comparison"]
    assert comparison["ship"] and comparison["interval"]["low"] > 0
    test = comparison["signTest"]
    assert test["p"] == binomtest(test["up"], test["up"] + test["down"], 0.5).pvalue < 0.05
    gap = body["optimismGap"]
    assert gap["gap"] == gap["train"] - gap["heldOut"]
    assert "t2" in body["plausiblyBest"]["members"]

    calls = _calls_by_experiment(server)
    rounds = [{s["config"]: s["experimentId"] for s in r["scores"]} for r in body["rounds"]]
    first = [sorted(calls[i]) for i in rounds[0].values()]
    second = [sorted(calls[i]) for i in rounds[1].values()]
    # Each round: every surviving config on the same cases, fresh ones each round.
    assert first[0] == first[1] == first[2] and len(first[0]) == 10
    assert second[0] == second[1] and len(second[0]) == 15
    assert not set(first[0]) & set(second[0])
    held = [sorted(calls[i]) for i in body["heldOut"]["experimentIds"].values()]
    assert held[0] == held[1] and len(held[0]) == 12
    assert not set(held[0]) & (set(first[0]) | set(second[0]))
    assert sum(len(v) for v in calls.values()) == 60 + 24

    listed = {e["id"]: e for e in project.exp_json("list")["experiments"]}
    assert listed[rounds[1]["t2"]]["kind"] == "sweep"
    compared = project.exp_json(
        "compare", body["heldOut"]["experimentIds"]["base"], body["heldOut"]["experimentIds"]["t2"]
    )
    assert compared["diff"] == comparison["diff"]


def test_a_winner_the_held_out_cases_do_not_confirm_is_not_adopted(project: Project) -> None:
    """t2 wins the race by far, but on the 12 held-out cases it goes up on 7 and down on 1: the
    interval clears 0, the exact sign test (p = 0.07) does not, and base is kept."""
    project.write_dataset(CASES[:40])
    agents = [
        Agent(seeded("base", 0.3), path="/base"),
        Agent(seeded("t2", 0.95), path="/t2"),
        Agent(seeded("t5", 0.2), path="/t5"),
    ]
    with serve(*agents) as server:
        _three_specs(project, server)
        result = project.exp(*SWEEP, "--budget", "60", "--json")
        human = project.exp(*SWEEP, "--budget", "60")
    assert result.code == 0, result.err
    body = result.json()
    assert body["winner"] == "t2"
    comparison = body["heldOut"]["comparison"]
    assert comparison["pairedCases"] == 12 and comparison["interval"]["low"] > 0
    assert (comparison["signTest"]["up"], comparison["signTest"]["down"]) == (7, 1)
    p = binomtest(7, 8, 0.5).pvalue
    assert comparison["signTest"]["p"] == p and comparison["mcnemar"]["p"] == p
    assert comparison["verdict"] == "inconclusive" and comparison["borderline"] is True
    assert body["decision"] == "keep" and body["adopted"] is None and body["exitCode"] == 0
    why = f"CI above 0 but exact sign test p={p:.3f} on 8 changed cases"
    assert body["reason"] == (
        f"t2 is not shown better than base on the held-out cases: the paired comparison says "
        f"inconclusive ({why})"
    )
    assert human.code == 0, human.err
    assert human.out.splitlines()[-1] == f"keep base: {body['reason']}"


def test_the_human_report_ends_in_adopt_or_keep(project: Project) -> None:
    project.write_dataset(CASES[:20])
    agents = [Agent(seeded("base", 0.9), path="/base"), Agent(seeded("t2", 0.2), path="/t2")]
    with serve(*agents) as server:
        _two_specs(project, server)
        result = project.exp(*SWEEP2, "--budget", "300")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("sweep swp_") and "14 train cases, 6 held out" in lines[0]
    # 300 would need ⌊300 / 2⌋ = 150 fresh cases; 14 fill budgets up to 29 (⌊29 / 2⌋ = 14).
    assert "so the race runs on a budget of 29" in lines[1]
    assert "race 28 case runs of a budget of 29 (sequential halving, Karnin et al. 2013)" in lines
    assert "winner base" in lines
    assert lines[-1] == "keep base: the start won the race"
    assert not any(line.startswith("plausibly best") for line in lines)  # two configs


def _guarded_agents(fails: frozenset[str]) -> list[Agent]:
    return [
        Agent(seeded("base", 0.3), path="/base"),
        Agent(seeded("t2", 0.97, fails=fails), path="/t2"),
    ]


def test_a_winner_that_forgets_a_guard_suite_keeps_the_start_and_exits_1(
    project: Project,
) -> None:
    project.write_dataset(CASES)
    project.write_dataset(OLD, name="old")
    # t2 fails every old case; base solves about half of them.
    with serve(*_guarded_agents(frozenset(c["input"] for c in OLD))) as server:
        _two_specs(project, server)
        result = project.exp(
            *SWEEP2,
            "--budget",
            "40",
            "--guard",
            "old",
            "--json",
        )
    assert result.code == 1, result.err
    body = result.json()
    guard = body["guard"]["results"][0]
    assert guard["suite"] == "datasets/old.jsonl" and guard["startSolved"] > 0
    assert guard["brokenShare"] == 1.0 and guard["broke"]
    assert body["decision"] == "keep" and body["adopted"] is None and body["exitCode"] == 1
    assert body["guard"]["caseRuns"] == 20


def test_a_guard_within_tau_lets_the_winner_be_adopted(project: Project) -> None:
    project.write_dataset(CASES)
    project.write_dataset(OLD, name="old")
    with serve(*_guarded_agents(frozenset())) as server:
        _two_specs(project, server)
        result = project.exp(
            *SWEEP2,
            "--budget",
            "40",
            "--guard",
            "old",
            "--guard-tau",
            "0.5",
        )
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1].startswith("adopt t2: ")
    assert any(
        line.startswith("guard datasets/old.jsonl: t2 broke 0 of the")
        for line in result.out.splitlines()
    )


def test_guard_prior_guards_the_suites_earlier_sweeps_adopted_on(project: Project) -> None:
    project.write_dataset(CASES)
    project.write_dataset(
        [{"id": f"n{i}", "input": f"new{i}", "expected": f"NEW{i}"} for i in range(40)], name="new"
    )
    with serve(*_guarded_agents(frozenset(c["input"] for c in CASES))) as server:
        _two_specs(project, server)
        # No sweep adopted anything yet: nothing to guard, and it says so.
        first = project.exp_json(
            *SWEEP2,
            "-d",
            "new",
            "--budget",
            "30",
            "--guard",
            "prior",
        )
        assert first["decision"] == "adopt", (first["reason"], first["rounds"])
        assert first["guard"]["suites"] == []
        assert first["guard"]["skipped"].startswith("prior: no earlier sweep")
        # The adoption on `new` makes it a prior suite; t2 forgot `qa`, the race's own dataset
        # now, which is never its own guard; so race on qa and guard new: t2 passes it.
        second = project.exp_json(
            *SWEEP2,
            "-d",
            "qa",
            "--budget",
            "30",
            "--guard",
            "prior",
        )
    assert second["guard"]["suites"] == ["datasets/new.jsonl"]
    assert second["guard"]["priorFrom"] == [first["id"]]


def _break_off(database_url: str, sweep_id: str, experiment_ids: list[str]) -> None:
    """What an interrupted sweep leaves: these experiments' case-trials unsaved, undecided."""

    async def go() -> None:
        db = Database(database_url)
        try:
            async with db.write() as s:
                await s.execute(
                    delete(ExperimentTrial).where(ExperimentTrial.experiment_id.in_(experiment_ids))
                )
                await s.execute(
                    update(ExperimentSweep)
                    .where(ExperimentSweep.id == sweep_id)
                    .values(finished_at=None, decision=None, adopted=None, result=None)
                )
        finally:
            await db.dispose()

    asyncio.run(go())


def test_resume_runs_only_what_is_left_and_decides_the_same(
    project: Project, database_url: str
) -> None:
    project.write_dataset(CASES)
    agents = [
        Agent(seeded("base", 0.5), path="/base"),
        Agent(seeded("t2", 0.95), path="/t2"),
        Agent(seeded("t5", 0.3), path="/t5"),
    ]
    with serve(*agents) as server:
        _three_specs(project, server)
        whole = project.exp_json(*SWEEP, "--budget", "60")
        second_round = [s["experimentId"] for s in whole["rounds"][1]["scores"]]
        held = list(whole["heldOut"]["experimentIds"].values())
        _break_off(database_url, whole["id"], second_round + held)
        before = len(server.calls)
        refused = project.exp(*SWEEP, "--budget", "61", "--resume")
        assert refused.code == 2
        assert refused.err.strip().endswith(
            "--budget changed (60 → 61). Undo the change, or start a new sweep without --resume"
        )
        # Another process resuming the sweep holds a run of its second round: refused, naming
        # it, and nothing runs.
        hold_claims(database_url, second_round[:1], held=True)
        busy = project.exp(*SWEEP, "--resume")
        assert busy.code == 2 and busy.out == ""
        assert busy.err.startswith(
            f"neens: error: cannot resume {second_round[0]}: it is being run by another neens "
            "process (pid 1 on another-host, "
        )
        assert len(server.calls) == before
        hold_claims(database_url, second_round[:1], held=False)
        resumed = project.exp_json(*SWEEP, "--resume")
        ran = len(server.calls) - before
    runs = whole["rounds"][1]["casesPerConfig"] * 2 + whole["split"]["heldOut"] * 2
    assert resumed["ranNow"] == ran == runs and resumed["resumed"]
    for key in ("rounds", "winner", "decision", "optimismGap", "plausiblyBest"):
        assert resumed[key] == whole[key]
    assert (
        resumed["heldOut"]["comparison"]["interval"] == whole["heldOut"]["comparison"]["interval"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["base=base.json", "t2=missing.json", "--budget", "10"],
            "config t2: missing.json: no such spec file",
        ),
        (
            ["base=base.json", "--budget", "10"],
            "exp sweep: 1 config given; a sweep races at least two",
        ),
        (["base=base.json", "base.json"], "config 'base.json': give it as NAME=SPEC.json"),
        (["base=base.json", "base=base.json"], "config base: given twice"),
        (
            ["base=base.json", "t2=base.json", "--budget", "1"],
            "--budget 1: too small for one round: 2 configs over 1 round need at least 2 case runs",
        ),
        (
            ["base=base.json", "t2=base.json", "t5=base.json", "--budget", "5"],
            "--budget 5: too small for one round: 3 configs over 2 rounds need at least 6",
        ),
        (
            ["base=base.json", "t2=base.json", "--budget", "10", "--guard", "nope"],
            "--guard nope: dataset nope: no such file",
        ),
        (
            ["base=base.json", "t2=base.json", "--budget", "10", "--guard-tau", "0.2"],
            "--guard-tau: only with --guard SUITE",
        ),
        (["base=base.json", "t2=base.json"], "--budget: required"),
    ],
)
@sqlite_only("refused before anything is written")
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    project: Project, args: list[str], message: str
) -> None:
    project.write_spec("base.json", graders=[{"kind": "exact"}])
    result = project.exp("sweep", *args)
    assert result.code == 2
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.err
    assert project.exp_json("list")["experiments"] == []


def test_configs_graded_differently_are_refused(project: Project) -> None:
    project.write_spec("base.json", graders=[{"kind": "exact"}])
    project.write_spec("other.json", graders=[{"kind": "contains"}])
    result = project.exp("sweep", "base=base.json", "t2=other.json", "--budget", "10")
    assert result.code == 2
    assert "graders: the configs are graded differently" in result.err
    assert json.loads(project.exp("list", "--json").out)["experiments"] == []


def test_every_sweep_flag_and_exit_code_is_documented() -> None:
    from tests.exp.test_docs import DOCS, _exp_commands

    text = DOCS.read_text()
    section = text[text.index("## `neens exp sweep`") : text.index("## Exit codes")]
    parser = _exp_commands()["sweep"]
    flags = [
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    assert flags and [f for f in flags if f"`{f}" not in section] == []
    assert "### How `exp sweep` decides" in section
    assert "## Not yet available" not in text
