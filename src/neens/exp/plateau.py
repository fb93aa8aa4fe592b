"""`neens exp plateau --series NAME`, and the series line `exp run … --series NAME` prints.

Reads the series' rounds from the store, pairs each with the round it is compared with
(`neens.domain.plateau.paired_gain`) and runs the detector (`neens.domain.plateau.decide`).

Exit codes of `exp plateau`: 0 continue, 3 stop, 2 fewer than 3 rounds or bad input.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any, Final

from neens_eval.errors import ConfigError

from neens.domain.exp_compare import TrialOutcome
from neens.domain.plateau import (
    MIN_ROUNDS,
    PLATEAU_LAMBDAS,
    PLATEAU_M0,
    Gain,
    RoundRow,
    SeriesDecision,
    decide,
    paired_gain,
)
from neens.exp.plateau_cli import DEFAULT_DELTA, DEFAULT_EPS, DEFAULT_GATE
from neens.exp.store import open_store
from neens.exp.table import table
from neens.store.db import Database
from neens.store.experiment_series import SeriesRound, add_round, round_of, series_rounds
from neens.store.experiments import ExperimentRow, trials_of

EXIT_CONTINUE: Final = 0
EXIT_STOP: Final = 3


@dataclass(frozen=True, slots=True)
class LoadedRound:
    round: int
    experiment_id: str
    outcomes: tuple[TrialOutcome, ...]

    @property
    def pass_rate(self) -> float | None:
        graded = [o.passed for o in self.outcomes if o.passed is not None]
        return sum(graded) / len(graded) if graded else None


@dataclass(frozen=True, slots=True)
class SeriesReport:
    name: str
    rounds: tuple[LoadedRound, ...]
    decision: SeriesDecision
    eps: float
    delta: float
    gate: str

    def of(self, number: int) -> LoadedRound:
        return self.rounds[number - 1]


async def _load(db: Database, rounds: list[SeriesRound]) -> tuple[LoadedRound, ...]:
    loaded = []
    for r in rounds:
        trials = await trials_of(db, r.experiment_id, grades=False)
        outcomes = tuple(TrialOutcome(t.case_id, t.passed, t.error_kind) for t in trials)
        loaded.append(LoadedRound(r.round, r.experiment_id, outcomes))
    return tuple(loaded)


def analyse(
    name: str, rounds: tuple[LoadedRound, ...], *, eps: float, delta: float, gate: Any
) -> SeriesReport:
    """Run the detector over loaded rounds (numbered 1…n with no gaps)."""
    if [r.round for r in rounds] != list(range(1, len(rounds) + 1)):
        raise ValueError(f"series {name}: rounds must be numbered 1…n")

    def gain_of(base: int, candidate: int) -> Gain | None:
        return paired_gain(rounds[base - 1].outcomes, rounds[candidate - 1].outcomes)

    decision = decide(len(rounds), gain_of, eps=eps, delta=delta, gate=gate)
    return SeriesReport(name, rounds, decision, eps, delta, gate)


def _pp(value: float) -> str:
    return f"{value * 100:+.1f}pp"


def _rate(value: float | None) -> str:
    return "no data" if value is None else f"{value * 100:.1f}%"


def _detector(value: float) -> str:
    return f"{value:.2f}"


def decision_line(report: SeriesReport) -> str:
    """`series NAME: continue, incumbent v4 …` or `series NAME: stop, ship v2 … (the plateau
    began at round 3)`."""
    d, name = report.decision, report.name
    last = d.rows[-1]
    eps = f"ε {report.eps * 100:.1f}pp"
    if d.action == "stop":
        assert d.stopped_at is not None and d.plateau_start is not None
        head = (
            f"series {name}: stop, ship v{d.version} (pass {_rate(report.of(d.version).pass_rate)})"
        )
        if last.round == d.stopped_at:
            assert last.detector is not None
            detail = (
                f"detector {_detector(last.detector)} ≥ {d.threshold:g} at round {d.stopped_at}"
            )
        elif last.gain is None:
            detail = (
                f"stopped at round {d.stopped_at}; v{last.round} shares no graded case with "
                f"v{d.version}"
            )
        else:
            detail = (
                f"stopped at round {d.stopped_at}; v{last.round} gains {_pp(last.gain.gain)} over "
                f"v{d.version}, not more than {eps}"
            )
        return f"{head}: {detail} (the plateau began at round {d.plateau_start})"
    head = (
        f"series {name}: continue, incumbent v{d.version} "
        f"(pass {_rate(report.of(d.version).pass_rate)})"
    )
    if last.state == "first":
        detail = "round 1 of a new series"
    elif last.state == "resumed":
        assert last.gain is not None
        detail = (
            f"v{last.round} beats the shipped v{last.compared_with} by {_pp(last.gain.gain)}, "
            f"more than {eps}: the series resumes and the detector restarts"
        )
    elif last.gain is None:
        detail = f"v{last.round} shares no graded case with v{last.compared_with}: not counted"
    else:
        assert d.detector is not None
        detail = (
            f"v{last.round} gains {_pp(last.gain.gain)} over v{last.compared_with} on "
            f"{last.gain.shared} shared cases; detector {_detector(d.detector)} of "
            f"{d.threshold:g}"
        )
    if len(report.rounds) < MIN_ROUNDS:
        detail += f"; too few rounds to decide ({len(report.rounds)} of {MIN_ROUNDS})"
    return f"{head}; {detail}"


def _note(row: RoundRow, report: SeriesReport) -> str:
    d = report.decision
    if row.state == "stop":
        return f"stop: the plateau began at round {d.plateau_start}, ship v{row.incumbent}"
    if row.state == "stopped":
        return "stopped"
    if row.state == "resumed":
        return f"resumes: beats the shipped v{row.compared_with} by more than ε"
    if row.state == "no-pairs":
        return "no shared graded case: not counted"
    if row.state == "first":
        return "first round"
    return "kept" if row.kept else ""


def _table(report: SeriesReport) -> str:
    rows = []
    for row in report.decision.rows:
        loaded = report.of(row.round)
        rows.append(
            [
                f"v{row.round}",
                loaded.experiment_id,
                _rate(loaded.pass_rate),
                "" if row.compared_with is None else f"v{row.compared_with}",
                "" if row.gain is None else _pp(row.gain.gain),
                "" if row.gain is None else str(row.gain.shared),
                "" if row.observation is None else ("yes" if row.observation else "no"),
                "" if row.detector is None else _detector(row.detector),
                f"v{row.incumbent}",
                _note(row, report),
            ]
        )
    return table(
        [
            "round",
            "experiment",
            "pass",
            "vs",
            "gain",
            "cases",
            "> ε",
            "detector",
            "incumbent",
            "note",
        ],
        rows,
        right={2, 4, 5, 7},
    )


def _round_json(row: RoundRow, report: SeriesReport) -> dict[str, Any]:
    loaded = report.of(row.round)
    return {
        "round": row.round,
        "version": f"v{row.round}",
        "experimentId": loaded.experiment_id,
        "passRate": loaded.pass_rate,
        "comparedWith": None if row.compared_with is None else f"v{row.compared_with}",
        "gain": None if row.gain is None else row.gain.gain,
        "sharedCases": None if row.gain is None else row.gain.shared,
        "improved": None if row.observation is None else bool(row.observation),
        "detector": row.detector,
        "kept": row.kept,
        "incumbent": f"v{row.incumbent}",
        "state": row.state,
    }


def decision_json(report: SeriesReport) -> dict[str, Any]:
    d = report.decision
    return {
        "action": d.action,
        "version": f"v{d.version}",
        "experimentId": report.of(d.version).experiment_id,
        "detector": d.detector,
        "plateauStart": d.plateau_start,
        "stoppedAt": d.stopped_at,
        "resumedAt": d.resumed_at,
        "resumedFrom": None if d.resumed_from is None else f"v{d.resumed_from}",
        "line": decision_line(report),
    }


def to_json(report: SeriesReport) -> dict[str, Any]:
    d = report.decision
    return {
        "series": report.name,
        "gate": report.gate,
        "eps": report.eps,
        "delta": report.delta,
        "threshold": d.threshold,
        "m0": PLATEAU_M0,
        "lambdas": list(PLATEAU_LAMBDAS),
        "rounds": [_round_json(row, report) for row in d.rows],
        "decision": decision_json(report),
    }


async def _read(db: Database, args: argparse.Namespace) -> SeriesReport:
    rounds = await series_rounds(db, args.series)
    if not rounds:
        raise ConfigError(
            f"--series {args.series}: no such series in this store; "
            f"`neens exp run SPEC --series {args.series}` starts it"
        )
    return analyse(
        args.series, await _load(db, rounds), eps=args.eps, delta=args.delta, gate=args.gate
    )


async def plateau_command(args: argparse.Namespace) -> int:
    async with open_store(args.database_url) as db:
        report = await _read(db, args)
    count = len(report.rounds)
    if count < MIN_ROUNDS:
        names = ", ".join(f"v{r.round}" for r in report.rounds)
        raise ConfigError(
            f"series {report.name}: too few experiments to decide, {count} "
            f"round{'s' if count != 1 else ''} ({names}) of the {MIN_ROUNDS} exp plateau needs; "
            f"run more with `neens exp run SPEC --series {report.name}`"
        )
    code = EXIT_STOP if report.decision.action == "stop" else EXIT_CONTINUE
    if args.json:
        body = to_json(report)
        body["exitCode"] = code
        print(json.dumps(body, ensure_ascii=False))
        return code
    threshold = report.decision.threshold
    print(
        f"series {report.name}  gate {report.gate}  ε {report.eps * 100:.1f}pp  "
        f"δ {report.delta:g}: alarm at detector ≥ {threshold:g}, false alarms on average no "
        f"sooner than every {threshold:g} rounds"
    )
    print()
    print(_table(report))
    print()
    print(decision_line(report))
    return code


async def check_series(db: Database, series: str | None, stored: ExperimentRow | None) -> None:
    """Refuse, before it runs, a resumed run that is already a round of another series."""
    if series is None or stored is None:
        return
    found = await round_of(db, stored.id)
    if found is not None and found.series != series:
        raise ConfigError(
            f"--series {series}: {stored.id} is already round v{found.round} of series "
            f"{found.series}; a run is a round of one series"
        )


async def tag_finished_run(
    db: Database, args: argparse.Namespace, experiment_id: str
) -> tuple[str, dict[str, Any]]:
    """Tag the finished run as the next round of `args.series` and say what the series should
    do: the line `exp run` prints and the `series` object of its --json."""
    eps = DEFAULT_EPS if args.eps is None else args.eps
    delta = DEFAULT_DELTA if args.delta is None else args.delta
    gate = DEFAULT_GATE if args.gate is None else args.gate
    tagged = await add_round(db, args.series, experiment_id)
    if tagged.series != args.series:
        raise ConfigError(
            f"--series {args.series}: {experiment_id} is already round v{tagged.round} of "
            f"series {tagged.series}; a run is a round of one series"
        )
    rounds = [r for r in await series_rounds(db, args.series) if r.round <= tagged.round]
    report = analyse(args.series, await _load(db, rounds), eps=eps, delta=delta, gate=gate)
    return decision_line(report), {
        "name": args.series,
        "round": tagged.round,
        "version": f"v{tagged.round}",
        "gate": gate,
        "eps": eps,
        "delta": delta,
        "decision": decision_json(report),
    }
