"""The command line of `neens exp sweep`, and its report (the race, the held-out check, the
guard, and `adopt <winner>` or `keep <start>`).

Exit codes: 0 when the sweep decided (adopt or keep), 1 when a guard suite broke (the start is
kept), 2 for bad input, 130 when interrupted (`--resume` continues).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neens_eval.arg_types import count, fraction, positive_int, seconds

from neens.exp.flags import concurrency, named, seed, trials

if TYPE_CHECKING:
    from neens.exp.sweep import SweepOutcome


def register(commands: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="race configs by sequential halving, check the winner on held-out cases, adopt or "
        "keep the start",
        description=(
            "Race two or more configs (NAME=SPEC.json, the first is the start) on the train "
            "cases by sequential halving, then run the winner and the start on the held-out "
            "cases the race never saw and print adopt <winner> or keep <start>, with the "
            "winner's optimism gap. Exits 0 when it decided, 1 when a guard suite broke."
        ),
    )
    sweep.add_argument(
        "configs",
        nargs="+",
        metavar="NAME=SPEC",
        help="a config and its spec file, e.g. base=base.json; the first is the start",
    )
    sweep.add_argument(
        "-d",
        "--dataset",
        type=named,
        metavar="NAME",
        help="datasets/NAME.jsonl, a .jsonl path, or a Neens dataset (default: the specs')",
    )
    sweep.add_argument(
        "-g",
        "--grader",
        metavar="JSON",
        action="append",
        default=[],
        help='add a grader to every config, e.g. -g \'{"kind": "exact"}\' (repeatable)',
    )
    sweep.add_argument(
        "--budget",
        type=positive_int,
        metavar="N",
        help="case runs the race may make (held-out and guard runs are extra); required",
    )
    sweep.add_argument("--trials", type=trials, help="runs of each case (default: the specs')")
    sweep.add_argument(
        "--seed",
        type=seed,
        metavar="S",
        help="seed of the train/held-out split and of the run order (default 0)",
    )
    sweep.add_argument(
        "--test-share",
        type=fraction,
        metavar="F",
        help="share of the cases held out from the race (default 0.3)",
    )
    sweep.add_argument(
        "--guard",
        metavar="SUITE",
        action="append",
        default=[],
        help="an earlier suite (dataset) the winner must not forget; 'prior': every suite a "
        "sweep adopted a config on before (repeatable)",
    )
    sweep.add_argument(
        "--guard-tau",
        type=fraction,
        metavar="T",
        help="the share of the start's solved guard cases the winner may break (default 0.10)",
    )
    sweep.add_argument(
        "--concurrency",
        type=concurrency,
        default=8,
        help="case-trials in flight at once (default 8)",
    )
    sweep.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="SWEEP",
        help="continue SWEEP (default: the newest undecided sweep of these configs)",
    )
    sweep.add_argument(
        "--retries",
        type=count,
        default=3,
        help="retries of rate limits, 5xx and network errors (default 3)",
    )
    sweep.add_argument(
        "--trial-timeout",
        type=seconds,
        metavar="SEC",
        help="cap each case-trial's task at SEC seconds, retries included",
    )
    common(sweep)
    sweep.set_defaults(func=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    holder: dict[str, Any] = {}
    try:
        return asyncio.run(sweep_command(args, holder))
    except KeyboardInterrupt:
        sweep_id = holder.get("id")
        if sweep_id is None:
            print("neens: interrupted before the sweep started", file=sys.stderr)
        else:
            print(
                f"neens: interrupted: {sweep_id} keeps every finished case-trial; run the same "
                f"command with --resume {sweep_id} to run only what is left",
                file=sys.stderr,
            )
        return 130


async def sweep_command(args: argparse.Namespace, holder: dict[str, Any]) -> int:
    from neens.exp.runner import RunLimits
    from neens.exp.store import open_store
    from neens.exp.sweep import record, run_sweep, set_up

    async with open_store(args.database_url) as db:
        setup = await set_up(db, args, Path.cwd(), holder)
        limits = RunLimits(
            concurrency=setup.definition["concurrency"],
            retries=args.retries,
            trial_timeout_s=args.trial_timeout,
        )
        outcome = await run_sweep(db, setup, limits)
        body = to_json(outcome)
        await record(db, outcome, body)
    holder.pop("id", None)
    if args.json:
        body["ranNow"] = outcome.ran_now
        body["resumed"] = args.resume is not None
        print(json.dumps(body, ensure_ascii=False, allow_nan=False))
    else:
        for line in render(outcome):
            print(line)
    return outcome.exit_code


def _rate(value: float | None) -> str:
    return "no data" if value is None else f"{value * 100:.1f}%"


def _pass(passed: int, graded: int) -> str:
    return "no data" if not graded else f"{passed / graded * 100:.1f}% ({passed}/{graded})"


def render(o: SweepOutcome) -> list[str]:
    from neens.exp.compare import pp_text

    setup, d = o.setup, o.setup.definition
    budget = d["budget"]
    lines = [
        f"sweep {setup.sweep.id} {', '.join(setup.names)} on {d['dataset']['ref']}: "
        f"{len(setup.train)} train cases, {len(setup.test)} held out "
        f"(seed {d['seed']}, test share {d['testShare']:g})"
    ]
    if budget["used"] < budget["given"]:
        lines.append(
            f"budget {budget['given']} case runs would need {budget['trainCasesNeeded']} train "
            f"cases; the train split has {len(setup.train)}, so the race runs on a budget of "
            f"{budget['used']}"
        )
    for r in o.rounds:
        scores = "  ".join(f"{s.config} {_pass(s.passed, s.graded)}" for s in r.scores)
        lines.append(
            f"round {r.index + 1}  {len(r.scores)} configs × {r.cases} cases  {scores}  "
            f"kept {', '.join(r.kept)}"
        )
        errors = [s for s in r.scores if s.infra_errors or s.agent_errors]
        if errors:
            lines.append(
                "  errors "
                + ", ".join(
                    f"{s.config} {s.infra_errors} infra + {s.agent_errors} agent" for s in errors
                )
            )
    race_runs = sum(r.case_runs for r in o.rounds)
    lines.append(
        f"race {race_runs} case runs of a budget of {budget['used']} (sequential halving, "
        f"Karnin et al. 2013)"
    )
    if o.best is not None:
        lines.append(best_line(o))
    lines.append(f"winner {o.winner}")
    c = o.held_out
    assert c is not None
    if o.winner == setup.start:
        lines.append(
            f"held out {len(setup.test)} cases: {setup.start} {_pass(c.b.passed, c.b.graded)}"
        )
    else:
        lines.append(
            f"held out {len(setup.test)} cases: {setup.start} {_pass(c.a.passed, c.a.graded)}, "
            f"{o.winner} {_pass(c.b.passed, c.b.graded)}"
        )
        if c.interval is not None and c.diff is not None:
            lines.append(
                f"{o.winner} − {setup.start}  {pp_text(c.diff)} [{pp_text(c.interval.low)}, "
                f"{pp_text(c.interval.high)}] ({len(c.cases)} paired cases, 95% paired "
                f"bootstrap)  mcnemar p={c.mcnemar_p:.3f}  verdict {c.verdict} "
                f"({c.verdict_reason})"
            )
    gap = o.optimism_gap
    train = o.train_rate
    held = c.b.pass_rate
    lines.append(
        f"optimism gap {o.winner} "
        + ("no data" if gap is None else pp_text(gap))
        + f" (train {_rate(train)} − held out {_rate(held)})"
    )
    if o.guard_skipped is not None:
        lines.append(f"guard {o.guard_skipped}")
    for g in o.guards:
        share = "no solved case to break" if g.share is None else f"{g.share * 100:.1f}%"
        line = (
            f"guard {g.suite}: {o.winner} broke {len(g.broken)} of the {g.start_solved} cases "
            f"{setup.start} solved ({share}, τ {g.tau * 100:.1f}%)"
        )
        if g.unchecked:
            line += f"; {g.unchecked} not graded for {o.winner}"
        if g.broke:
            line += f": broken ({', '.join(g.broken[:10])}{', …' if len(g.broken) > 10 else ''})"
        lines.append(line)
    guard_runs = sum(g.case_runs for g in o.guards)
    lines.append(f"extra case runs: {o.held_out_runs} held out, {guard_runs} guard")
    name = o.winner if o.decision == "adopt" else setup.start
    lines.append(f"{o.decision} {name}: {o.reason}")
    return lines


def best_line(o: SweepOutcome) -> str:
    assert o.best is not None
    best = o.best
    dropped = [m for m in best.members if m != o.winner]
    caveat = (
        f"so {', '.join(dropped)}, dropped by the race, may have lost on noise"
        if dropped
        else "and only the winner is in it"
    )
    return (
        f"plausibly best {', '.join(best.members)}: the configs not significantly worse than "
        f"the best on round 1's {best.cases} cases; it holds the truly best config 95% of the "
        f"time, {caveat}"
    )


def to_json(o: SweepOutcome) -> dict[str, Any]:
    """Every number unrounded."""
    from neens.exp.compare import to_json as comparison_json

    setup, d = o.setup, o.setup.definition
    c = o.held_out
    assert c is not None
    return {
        "id": setup.sweep.id,
        "configs": setup.names,
        "start": setup.start,
        "dataset": d["dataset"]["ref"],
        "seed": d["seed"],
        "testShare": d["testShare"],
        "trials": d["trials"],
        "split": {"train": len(setup.train), "heldOut": len(setup.test)},
        "budget": {
            "given": d["budget"]["given"],
            "used": d["budget"]["used"],
            "trainCasesNeeded": d["budget"]["trainCasesNeeded"],
            "raceCaseRuns": sum(r.case_runs for r in o.rounds),
        },
        "rounds": [
            {
                "round": r.index + 1,
                "configs": [s.config for s in r.scores],
                "pullsPerConfig": r.pulls,
                "casesPerConfig": r.cases,
                "caseRuns": r.case_runs,
                "scores": [
                    {
                        "config": s.config,
                        "experimentId": s.experiment_id,
                        "graded": s.graded,
                        "passed": s.passed,
                        "passRate": s.pass_rate,
                        "errors": {"infra": s.infra_errors, "agent": s.agent_errors},
                    }
                    for s in r.scores
                ],
                "kept": r.kept,
            }
            for r in o.rounds
        ],
        "winner": o.winner,
        "plausiblyBest": None
        if o.best is None
        else {
            "members": o.best.members,
            "method": "multiple comparisons with the best (Hsu), Bonferroni, exact one-sided "
            "McNemar on round 1's cases",
            "alpha": o.best.alpha,
            "threshold": o.best.threshold,
            "cases": o.best.cases,
            "comparisons": [
                {
                    "config": b.config,
                    "against": b.against,
                    "wins": b.wins,
                    "losses": b.losses,
                    "p": b.p_value,
                    "dropped": b.dropped,
                }
                for b in o.best.comparisons
            ],
            "line": best_line(o),
        },
        "heldOut": {
            "cases": len(setup.test),
            "experimentIds": o.held_out_ids,
            "caseRuns": o.held_out_runs,
            "comparison": None if o.winner == setup.start else comparison_json(c, gate=True),
            "startPassRate": c.a.pass_rate,
            "winnerPassRate": c.b.pass_rate,
        },
        "optimismGap": {
            "train": o.train_rate,
            "heldOut": c.b.pass_rate,
            "gap": o.optimism_gap,
        },
        "guard": {
            "given": d["guard"]["given"],
            "suites": d["guard"]["suites"],
            "priorFrom": d["guard"]["priorFrom"],
            "tau": d["guard"]["tau"],
            "skipped": o.guard_skipped,
            "results": [
                {
                    "suite": g.suite,
                    "experimentIds": {setup.start: g.start_id, o.winner: g.winner_id},
                    "cases": g.cases,
                    "startSolved": g.start_solved,
                    "broken": g.broken,
                    "brokenShare": g.share,
                    "unchecked": g.unchecked,
                    "broke": g.broke,
                    "caseRuns": g.case_runs,
                }
                for g in o.guards
            ],
            "caseRuns": sum(g.case_runs for g in o.guards),
        },
        "decision": o.decision,
        "adopted": o.adopted,
        "reason": o.reason,
        "exitCode": o.exit_code,
    }
