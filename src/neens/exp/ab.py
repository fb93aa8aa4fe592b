"""`neens exp run --arm base=a.json --arm cand=b.json`: two configs as one A/B run.

Each arm is an experiment of kind "ab" naming the other (`pair_id`), with its arm's name,
position (0 is A, the baseline), the order's seed and the sequential flags in `spec["ab"]`.
The arms run on the same cases, chosen once (-d, --case, --first-n, --sample, --max-cases).
Case by case, every case-trial runs in both arms back to back, the two in a seeded random order,
so drift during the run (a provider's latency, a cache warming up) hits both arms alike.

With --stop-early the run is cut into the looks of a group-sequential test
(`neens.domain.group_sequential`): the cases up to a look all run and are saved, then the look
is taken from what was saved and printed; the run stops at the first look whose statistic
crosses its boundary. Both arms are then marked finished, with fewer case runs than planned.

The report is `exp compare`'s on the two arms (A the first --arm), then the sequential verdict.
`--resume [EXP]` (either arm's id) makes the same order again from the stored seed, runs only
what neither arm saved and takes the looks again from the stored outcomes, so the report equals
an uninterrupted run's; it refuses, naming what changed, when an arm's dataset, graders, task,
agent script or trials did, or the arms, the seed or the sequential flags.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError

from neens.domain.exp_compare import compare
from neens.domain.group_sequential import (
    ALPHA,
    DEFAULT_LOOKS,
    MAX_LOOKS,
    MIN_CASES,
    Look,
    LookResult,
    design,
    first_crossing,
)
from neens.exp.claims import claimed
from neens.exp.compare import aa_floor, case_groups, load_side, render, to_json
from neens.exp.datasets import Case
from neens.exp.plan import Plan, make_plan, resume_problems
from neens.exp.progress import RunProgress
from neens.exp.resume import find_to_resume, kept_trials
from neens.exp.run_command import new_experiment_id, selection_of, task_headers
from neens.exp.runner import Caller, RunLimits, run_one
from neens.exp.spec import read_spec
from neens.exp.store import open_store
from neens.exp.tasks import TaskContext
from neens.store.db import Database
from neens.store.experiments import (
    ExperimentRow,
    TrialWriter,
    create_experiment,
    finish_experiment,
    get_experiment,
    trials_of,
)
from neens.store.types import utcnow

ARM_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
METHOD: Final = (
    f"O'Brien-Fleming boundaries, Lan-DeMets spending, two-sided alpha {ALPHA:g}, on the "
    "continuity-corrected McNemar z"
)

Item = tuple[int, Case, int]
"""(arm index, case, trial)."""


@dataclass(frozen=True, slots=True)
class Arm:
    name: str
    spec: Path


def parse_arms(values: Sequence[str]) -> list[Arm]:
    """The two --arm NAME=SPEC values; ConfigError (exit 2) naming the bad one."""
    arms: list[Arm] = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not path:
            raise ConfigError(f"--arm {value}: expected NAME=SPEC, e.g. --arm base=a.json")
        if not ARM_NAME.fullmatch(name):
            raise ConfigError(
                f"--arm {value}: the arm's name must be 1 to 40 letters, digits, '_', '.' or '-'"
            )
        if any(arm.name == name for arm in arms):
            raise ConfigError(f"--arm {value}: the name {name!r} is taken by the other arm")
        arms.append(Arm(name, Path(path)))
    if len(arms) != 2:
        raise ConfigError(
            f"--arm: an A/B run has exactly two arms, got {len(arms)} "
            "(--arm base=a.json --arm cand=b.json)"
        )
    return arms


def _check_flags(args: argparse.Namespace) -> None:
    if args.spec is not None:
        raise ConfigError(f"SPEC {args.spec}: not with --arm (each arm names its own spec)")
    refused = {
        "--watch": args.watch,
        "--series": args.series is not None,
        "--eps": args.eps is not None,
        "--delta": args.delta is not None,
        "--gate": args.gate is not None,
        "--failing": args.failing is not None,
        "--seq": args.seq > 1,
        "--feedback": args.feedback is not None,
    }
    for flag, given in refused.items():
        if given:
            raise ConfigError(f"{flag}: not with --arm (an A/B run does not take it)")
    if args.retry_errors and args.resume is None:
        raise ConfigError(
            "--retry-errors: only with --resume (it runs a stored A/B run's errors again)"
        )
    if args.looks is not None and not args.stop_early:
        raise ConfigError("--looks: only with --stop-early (it sets the sequential test's looks)")
    if args.looks is not None and args.looks > MAX_LOOKS:
        raise ConfigError(f"--looks {args.looks}: at most {MAX_LOOKS}")


async def _plans(db: Database, args: argparse.Namespace, arms: list[Arm], cwd: Path) -> list[Plan]:
    """Each arm's plan, on the same cases; ConfigError naming the arm otherwise."""
    selection = selection_of(args)
    plans: list[Plan] = []
    for arm in arms:
        try:
            spec = read_spec(arm.spec)
            plan = await make_plan(
                db,
                spec,
                cwd=cwd,
                dataset=args.dataset,
                cli_graders=args.grader,
                trials=args.trials,
                selection=selection,
                failing_id=None,
            )
        except ConfigError as exc:
            raise ConfigError(f"--arm {arm.name}: {exc}") from None
        if args.max_cases is not None:
            plan = replace(plan, cases=plan.cases[: args.max_cases])
        plans.append(plan)
    a, b = plans
    names = f"{arms[0].name} and {arms[1].name}"
    if (a.dataset.ref, a.dataset.digest) != (b.dataset.ref, b.dataset.digest):
        raise ConfigError(
            f"--arm: {names} name different datasets ({a.dataset.ref}, {b.dataset.ref}); "
            "an A/B run needs the same cases in both: give one with -d NAME"
        )
    if a.trials != b.trials:
        raise ConfigError(
            f"--arm: {names} run {a.trials} and {b.trials} trials per case; give both the "
            "same with --trials N"
        )
    return plans


def interleaved(cases: Sequence[Case], trials: int, seed: int) -> list[Item]:
    """Every (arm, case, trial) in run order: case by case, trial by trial, each case-trial in
    both arms next to each other in a seeded random order. A resume makes the same list."""
    order = random.Random(seed)
    items: list[Item] = []
    for case in cases:
        for trial in range(trials):
            pair = [0, 1]
            order.shuffle(pair)
            items.extend((arm, case, trial) for arm in pair)
    return items


def _ab_json(row: ExperimentRow) -> dict[str, Any]:
    found = row.spec.get("ab")
    return found if isinstance(found, dict) else {}


async def _new_pair(
    db: Database, plans: list[Plan], arms: list[Arm], args: argparse.Namespace, seed: int
) -> list[ExperimentRow]:
    ids = [new_experiment_id(), new_experiment_id()]
    created = utcnow()
    rows = []
    for position, plan in enumerate(plans):
        row = plan.row(ids[position], args.concurrency, created)
        settings = {
            "arm": arms[position].name,
            "position": position,
            "arms": [arm.name for arm in arms],
            "seed": seed,
            **_sequential_settings(args),
        }
        row = replace(row, kind="ab", pair_id=ids[1 - position], spec={**row.spec, "ab": settings})
        await create_experiment(db, row)
        rows.append(row)
    return rows


def _sequential_settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "stopEarly": bool(args.stop_early),
        "looks": (args.looks or DEFAULT_LOOKS) if args.stop_early else None,
        "maxCases": args.max_cases,
    }


async def _pair_to_resume(
    db: Database, args: argparse.Namespace, plans: list[Plan], arms: list[Arm]
) -> list[ExperimentRow]:
    """Both arms of the A/B run to resume, A first; ConfigError (exit 2) naming every change
    when they may not be resumed."""
    found = await find_to_resume(db, args.resume, plans[0].spec.name, "ab")
    problems: list[str] = []
    other = None
    if found.kind != "ab" or found.pair_id is None:
        problems.extend(resume_problems(found, plans[0], kind="ab")[:1])
    else:
        other = await get_experiment(db, found.pair_id)
        if other is None:
            problems.append(f"the other arm, {found.pair_id}, is not in this store")
    if other is None and not problems:
        problems.append("it has no other arm")
    if problems or other is None:
        raise ConfigError(f"cannot resume {found.id}: {'; '.join(problems)}")
    rows = sorted([found, other], key=lambda row: int(_ab_json(row).get("position", 0)))
    settings = _ab_json(rows[0])
    stored_arms = [str(_ab_json(row).get("arm")) for row in rows]
    given_arms = [arm.name for arm in arms]
    if stored_arms != given_arms:
        problems.append(f"the arms changed ({', '.join(stored_arms)} → {', '.join(given_arms)})")
    else:
        for row, plan, arm in zip(rows, plans, arms, strict=True):
            problems.extend(f"arm {arm.name}: {p}" for p in resume_problems(row, plan, kind="ab"))
    if args.seed is not None and args.seed != settings.get("seed"):
        problems.append(f"--seed changed ({settings.get('seed')} → {args.seed})")
    for key, flag in (
        ("stopEarly", "--stop-early"),
        ("looks", "--looks"),
        ("maxCases", "--max-cases"),
    ):
        before, now = settings.get(key), _sequential_settings(args)[key]
        if before != now:
            problems.append(f"{flag} changed ({_shown(before)} → {_shown(now)})")
    if problems:
        raise ConfigError(
            f"cannot resume {rows[0].id}: {'; '.join(problems)}. Undo the change, or start a "
            "new A/B run without --resume"
        )
    return rows


def _shown(value: Any) -> str:
    if value is None or value is False:
        return "not given"
    return "given" if value is True else str(value)


async def _outcomes(
    db: Database, rows: list[ExperimentRow], cases: Sequence[Case]
) -> list[tuple[bool, bool] | None]:
    """Each case's (A passed, B passed), in run order, as `exp compare`'s McNemar counts it (a
    case passes on an arm when every graded case-trial passed); None when an arm graded none of
    its case-trials."""
    verdicts: list[dict[str, list[bool]]] = []
    for row in rows:
        found: dict[str, list[bool]] = {}
        for trial in await trials_of(db, row.id, grades=False):
            if trial.passed is not None:
                found.setdefault(trial.case_id, []).append(trial.passed)
        verdicts.append(found)
    outcomes: list[tuple[bool, bool] | None] = []
    for case in cases:
        a, b = verdicts[0].get(case.id), verdicts[1].get(case.id)
        outcomes.append(None if not a or not b else (all(a), all(b)))
    return outcomes


async def _run_items(
    db: Database,
    plans: list[Plan],
    callers: list[Caller],
    items: list[Item],
    limits: RunLimits,
    progress: RunProgress,
) -> None:
    """Run `items` in order, `limits.concurrency` at a time, each graded by its own arm's
    graders and saved as it finishes."""
    queue = iter(items)
    writer = TrialWriter(db)

    async def worker() -> None:
        for index, case, trial in queue:
            row = await run_one(writer, plans[index], callers[index], case, trial, limits)
            progress.advance(error=row.status == "error", cost_usd=row.cost_usd)

    async with asyncio.TaskGroup() as group:
        for _ in range(min(limits.concurrency, len(items))):
            group.create_task(worker())


def look_line(result: LookResult, of: int) -> str:
    """ "look 2 of 4  50 cases  z = +3.10  boundary ±2.963  stop: B better" """
    look = result.look
    paired = "" if result.paired == look.cases else f" ({result.paired} paired)"
    state = f"stop: B {result.direction}" if result.crossed else "continue"
    if not result.crossed and look.number == of:
        state = "end: no boundary crossed"
    return (
        f"look {look.number} of {of}  {look.cases} cases{paired}  z = {result.z:+.2f}  "
        f"boundary ±{look.boundary:.3f}  {state}"
    )


async def _run_with_looks(
    db: Database,
    plans: list[Plan],
    rows: list[ExperimentRow],
    callers: list[Caller],
    seed: int,
    looks: list[Look],
    kept: list[set[tuple[str, int]]] | None,
    limits: RunLimits,
    *,
    show: bool,
) -> tuple[list[LookResult], int]:
    """Run the pair's case-trials in order, look by look (all at once without looks), leaving
    out the `kept` ones; after each look's cases are saved, take the look from what was saved,
    print it when `show`, and stop at the first crossing. The looks taken and the case-trials
    run."""
    cases = plans[0].cases
    per_case = 2 * plans[0].trials
    items = interleaved(cases, plans[0].trials, seed)
    left = [(i, c, t) for i, c, t in items if kept is None or (c.id, t) not in kept[i]]
    total = len(items)
    taken: list[LookResult] = []
    ran = 0
    start = 0
    label = f"{rows[0].id} A/B"
    with RunProgress(total=total, done=total - len(left), label=label) as progress:
        async with contextlib.AsyncExitStack() as stack:
            for caller in callers:
                await stack.enter_async_context(caller.open())
            for number, stop in enumerate([look.cases for look in looks] or [len(cases)]):
                segment = [
                    (i, c, t)
                    for i, c, t in items[start * per_case : stop * per_case]
                    if kept is None or (c.id, t) not in kept[i]
                ]
                start = stop
                await _run_items(db, plans, callers, segment, limits, progress)
                ran += len(segment)
                if not looks:
                    continue
                taken = first_crossing(looks[: number + 1], await _outcomes(db, rows, cases))
                if show:
                    print(look_line(taken[-1], len(looks)), flush=True)
                if taken[-1].crossed:
                    break
    return taken, ran


async def ab_command(args: argparse.Namespace, holder: dict[str, Any]) -> int:
    _check_flags(args)
    arms = parse_arms(args.arm)
    cwd = Path.cwd()
    async with open_store(args.database_url) as db:
        plans = await _plans(db, args, arms, cwd)
        headers = [task_headers(plan) for plan in plans]
        if args.resume is not None:
            rows = await _pair_to_resume(db, args, plans, arms)
            seed = int(_ab_json(rows[0])["seed"])
        else:
            seed = 0 if args.seed is None else args.seed
            rows = await _new_pair(db, plans, arms, args, seed)
        holder["ids"] = (rows[0].id, rows[1].id)
        cases = plans[0].cases
        if not args.json:
            trials = plans[0].trials
            print(
                f"ab {arms[0].name} vs {arms[1].name}  {len(cases)} cases, {trials} "
                f"trial{'s' if trials != 1 else ''} each, in both arms back to back "
                f"(order seed {seed})",
                flush=True,
            )
        looks = design(len(cases), args.looks or DEFAULT_LOOKS) if args.stop_early else []
        short = None
        if args.stop_early and len(cases) < MIN_CASES:
            short = (
                f"--stop-early: {len(cases)} cases, fewer than {MIN_CASES}: the only look is at "
                "the end"
            )
            if not args.json:
                print(f"warning: {short}", file=sys.stderr)
        async with claimed(db, [row.id for row in rows], resuming=args.resume is not None):
            resuming = args.resume is not None
            kept = None
            if resuming:
                kept = [
                    await kept_trials(db, row.id, retry_errors=args.retry_errors) for row in rows
                ]
            limits = RunLimits(
                concurrency=args.concurrency,
                retries=args.retries,
                trial_timeout_s=args.trial_timeout,
            )
            callers = [
                Caller(plan, TaskContext(experiment_id=row.id, name=plan.spec.name, cwd=cwd), h)
                for plan, row, h in zip(plans, rows, headers, strict=True)
            ]
            taken, ran = await _run_with_looks(
                db, plans, rows, callers, seed, looks, kept, limits, show=not args.json
            )
            stopped = bool(taken) and taken[-1].crossed and taken[-1].look.number < len(looks)
            for row in rows:
                if stopped or await _complete(db, row):
                    await finish_experiment(db, row.id)
        stored = []
        for row in rows:
            found = await get_experiment(db, row.id)
            assert found is not None
            stored.append(found)
        sides = [
            replace(await load_side(db, row), name=arm.name)
            for row, arm in zip(stored, arms, strict=True)
        ]
        aa = await aa_floor(db, stored[0])
    kinds = case_groups(stored[0], "kind") | case_groups(stored[1], "kind")
    result = compare(sides[0], sides[1], aa=aa, kinds=kinds or None)
    if short is not None:
        result.warnings.append(short)
    sequential = _sequential_json(looks, taken, stopped) if args.stop_early else None
    if args.json:
        body = to_json(result, gate=False)
        body["ab"] = {
            "ids": [rows[0].id, rows[1].id],
            "arms": [
                {"name": arm.name, "id": row.id, "spec": str(arm.spec)}
                for arm, row in zip(arms, rows, strict=True)
            ],
            "orderSeed": seed,
            "cases": len(cases),
            "trials": plans[0].trials,
            "maxCases": args.max_cases,
            "ranNow": ran,
            "resumed": args.resume is not None,
        }
        body["sequential"] = sequential
        print(json.dumps(body, ensure_ascii=False, allow_nan=False))
        return 0
    for warning in result.warnings:
        if warning != short:
            print(f"warning: {warning}", file=sys.stderr)
    print("")
    print(render(result))
    if args.stop_early:
        print("")
        for line in sequential_lines(looks, taken, stopped):
            print(line)
    if args.resume is not None:
        print(f"resumed: ran {ran} case-trials left", file=sys.stderr)
    return 0


async def _complete(db: Database, row: ExperimentRow) -> bool:
    return len(await trials_of(db, row.id, grades=False)) >= row.planned


def sequential_verdict(taken: Sequence[LookResult]) -> str:
    if not taken or not taken[-1].crossed:
        return "inconclusive"
    direction = taken[-1].direction
    assert direction is not None
    return direction


def sequential_lines(
    looks: Sequence[Look], taken: Sequence[LookResult], stopped: bool
) -> list[str]:
    """The sequential verdict, said in a line or two after compare's report."""
    if not taken:
        return ["sequential no look taken"]
    last = taken[-1]
    at = f"look {last.look.number} of {len(looks)} ({last.look.cases} cases)"
    crossing = f"z = {last.z:+.2f} crossed ±{last.look.boundary:.3f}"
    if last.crossed:
        line = f"sequential B {last.direction}: {crossing} at {at}"
        lines = [line + ("; stopped early" if stopped else "")]
    else:
        lines = [
            f"sequential inconclusive: no boundary crossed in {len(taken)} looks "
            f"(z = {last.z:+.2f} at the last, boundary ±{last.look.boundary:.3f})"
        ]
    lines.append(f"method {METHOD}")
    if stopped:
        lines.append(
            "note B − A above is not adjusted for stopping early: it tends to overstate the effect"
        )
    return lines


def _sequential_json(
    looks: Sequence[Look], taken: Sequence[LookResult], stopped: bool
) -> dict[str, Any]:
    return {
        "method": METHOD,
        "alpha": ALPHA,
        "verdict": sequential_verdict(taken),
        "stoppedEarly": stopped,
        "planned": [
            {
                "look": look.number,
                "cases": look.cases,
                "informationFraction": look.time,
                "boundary": look.boundary,
                "alphaSpent": look.spent,
            }
            for look in looks
        ],
        "looks": [
            {
                "look": r.look.number,
                "cases": r.look.cases,
                "paired": r.paired,
                "n01": r.n01,
                "n10": r.n10,
                "z": r.z,
                "boundary": r.look.boundary,
                "crossed": r.crossed,
            }
            for r in taken
        ],
    }
