"""`neens exp sweep base=base.json t2=t2.json …`: race configs, check the winner on cases the
race never saw, and adopt it or keep the start (the first config).

The steps, each saved as it goes so that `--resume` replays the same sweep:

1. **Split.** The dataset's cases are shuffled with `random.Random(seed)`; the first
   ⌊share · n + ½⌋ (at least 1) are held out, in dataset order, and the rest are the train cases,
   drawn in the shuffled order, round by round.
2. **Race.** Sequential halving (`neens.domain.halving`) on the train cases: round r runs every
   surviving config on the same fresh cases and keeps the better half (the ceiling of half), by
   the round's own pass rate. `--budget` counts the race's case runs; when the train cases cannot
   fill its schedule, the largest budget they can fill is used, and said.
3. **Held out.** The winner and the start run on the held-out cases, and `exp compare`'s paired
   comparison decides: the winner is adopted only when the comparison would print `Ship it`
   under `--gate` (the interval's lower end above 0 and the exact sign test rejecting at 5% in
   the winner's favour, nothing holding it). Few held-out cases cannot adopt: the test needs
   at least 6 changed cases, all the winner's way.
4. **Guard.** Before adopting, the start and the winner run on every guard suite; a suite on
   which the winner fails more than τ of the cases the start solved keeps the start (exit 1).

Every run is an experiment of kind "sweep" linked to the sweep (`neens.store.experiment_sweeps`),
one per config and round, per config on the held-out cases, per config and guard suite: each
can be read with `exp compare`, and each case-trial is saved as it finishes.
"""

from __future__ import annotations

import argparse
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError
from ulid import ULID

from neens.domain.exp_compare import Comparison, compare
from neens.domain.halving import (
    PlausiblyBest,
    cases_needed,
    fit_budget,
    optimism_gap,
    plausibly_best,
    rounds_needed,
    schedule,
    smallest_budget,
    survivors,
)
from neens.exp.claims import claimed
from neens.exp.compare import load_side
from neens.exp.datasets import Case
from neens.exp.plan import Plan, Selection, load_dataset, make_plan
from neens.exp.progress import RunProgress
from neens.exp.run_command import new_experiment_id, task_headers
from neens.exp.runner import Caller, RunLimits, run_trials
from neens.exp.spec import read_spec
from neens.exp.store import find_by_id
from neens.exp.tasks import TaskContext
from neens.store.db import Database
from neens.store.experiment_sweeps import (
    SweepRow,
    SweepRunKey,
    adoptions_before,
    create_sweep,
    create_sweep_run,
    finish_sweep,
    get_sweep,
    latest_unfinished_sweep,
    sweep_ids_starting_with,
    sweep_runs,
)
from neens.store.experiments import (
    ExperimentRow,
    finish_experiment,
    get_experiment,
    tally,
    trials_of,
)
from neens.store.types import utcnow

DEFAULT_TEST_SHARE: Final = 0.3
DEFAULT_GUARD_TAU: Final = 0.10
CONFIG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
PRIOR: Final = "prior"


@dataclass(frozen=True, slots=True)
class ConfigArg:
    name: str
    path: Path


def parse_configs(texts: Sequence[str]) -> list[ConfigArg]:
    """NAME=SPEC arguments, checked: at least two, names unique; the first is the start."""
    configs: list[ConfigArg] = []
    for text in texts:
        name, sep, path = text.partition("=")
        if not sep or not path:
            raise ConfigError(f"config {text!r}: give it as NAME=SPEC.json (base=base.json)")
        if not CONFIG_NAME.match(name):
            raise ConfigError(
                f"config {text!r}: a name is letters, digits, '_', '.' and '-', starting with a "
                "letter or digit"
            )
        if any(c.name == name for c in configs):
            raise ConfigError(f"config {name}: given twice; each config needs its own name")
        configs.append(ConfigArg(name, Path(path)))
    if len(configs) < 2:
        raise ConfigError(
            f"exp sweep: {len(configs)} config given; a sweep races at least two "
            "(NAME=SPEC.json …, the first is the start)"
        )
    return configs


def split_cases(cases: Sequence[Case], seed: int, share: float) -> tuple[list[Case], list[Case]]:
    """(train cases in the order the race draws them, held-out cases in dataset order)."""
    order = list(range(len(cases)))
    random.Random(seed).shuffle(order)
    held = min(len(cases), max(1, math.floor(share * len(cases) + 0.5)))
    test = set(order[:held])
    return [cases[i] for i in order[held:]], [c for i, c in enumerate(cases) if i in test]


@dataclass(frozen=True, slots=True)
class Setup:
    """Everything the sweep runs with: the configs' plans and the frozen definition."""

    sweep: SweepRow
    names: list[str]
    plans: dict[str, Plan]
    headers: dict[str, dict[str, str]]
    train: list[Case]
    test: list[Case]
    cli_graders: list[str]
    """The -g graders, added to each config's (and to each guard suite's runs)."""
    cwd: Path = field(repr=False)

    @property
    def definition(self) -> dict[str, Any]:
        return self.sweep.definition

    @property
    def start(self) -> str:
        return self.names[0]


async def config_plans(
    db: Database, configs: list[ConfigArg], args: argparse.Namespace, cwd: Path
) -> dict[str, Plan]:
    """Each config's plan, on one dataset, with the same trials and graders."""
    specs = {}
    for c in configs:
        try:
            specs[c.name] = read_spec(c.path)
        except ConfigError as exc:
            raise ConfigError(f"config {c.name}: {exc}") from None
    ref = args.dataset
    if ref is None:
        named = {name: spec.dataset for name, spec in specs.items()}
        if all(d is None for d in named.values()):
            raise ConfigError('dataset: none given: add "dataset" to the specs or pass -d NAME')
        if len(set(named.values())) > 1:
            listed = ", ".join(f"{n}: {d or 'none'}" for n, d in named.items())
            raise ConfigError(
                f"dataset: the configs name different datasets ({listed}); a race runs them on "
                "the same cases: pass -d NAME"
            )
        ref = next(iter(named.values()))
    trials = {name: args.trials or spec.trials for name, spec in specs.items()}
    if len(set(trials.values())) > 1:
        listed = ", ".join(f"{n} {k}" for n, k in trials.items())
        raise ConfigError(
            f"trials: the configs run different trials per case ({listed}); pass --trials K"
        )
    plans: dict[str, Plan] = {}
    for name, spec in specs.items():
        plans[name] = await make_plan(
            db,
            spec,
            cwd=cwd,
            dataset=ref,
            cli_graders=args.grader,
            trials=trials[name],
            selection=Selection(),
            failing_id=None,
        )
    graded = {name: _grader_set(plan) for name, plan in plans.items()}
    if len(set(graded.values())) > 1:
        listed = "; ".join(f"{n}: {', '.join(sorted(g)) or 'none'}" for n, g in graded.items())
        raise ConfigError(
            f"graders: the configs are graded differently ({listed}); a race compares configs "
            "graded alike: give the graders with -g and leave them out of the specs"
        )
    return plans


def _grader_set(plan: Plan) -> frozenset[str]:
    return frozenset(f"{g['name']}@{g['version']}" for g in plan.graders_json())


def _fingerprint(plan: Plan, path: Path) -> dict[str, Any]:
    return {
        "spec": str(path),
        "taskHash": plan.task_hash,
        "agentFiles": plan.agent_files,
    }


async def find_sweep(db: Database, text: str) -> SweepRow:
    return await find_by_id(
        text,
        lambda id_: get_sweep(db, id_),
        lambda prefix: sweep_ids_starting_with(db, prefix),
        flag="--resume",
        what="sweep",
    )


async def set_up(
    db: Database, args: argparse.Namespace, cwd: Path, holder: dict[str, Any]
) -> Setup:
    """A new sweep, or the stored one to resume after checking nothing it is made of changed."""
    configs = parse_configs(args.configs)
    _check_flags(args)
    plans = await config_plans(db, configs, args, cwd)
    headers = {name: task_headers(plan) for name, plan in plans.items()}
    names = [c.name for c in configs]
    first = plans[names[0]]
    if args.resume is not None:
        sweep = await _to_resume(db, args, configs, plans)
    else:
        sweep = await _new_sweep(db, args, configs, plans)
    holder["id"] = sweep.id
    by_id = {c.id: c for c in first.dataset.cases}
    train = [by_id[i] for i in sweep.definition["train"]]
    test = [by_id[i] for i in sweep.definition["test"]]
    return Setup(sweep, names, plans, headers, train, test, list(args.grader), cwd)


def _check_flags(args: argparse.Namespace) -> None:
    if args.budget is None and args.resume is None:
        raise ConfigError("--budget: required: the race's case runs (e.g. --budget 300)")
    if args.test_share is not None and not 0 < args.test_share < 1:
        raise ConfigError(f"--test-share: a fraction between 0 and 1, not {args.test_share:g}")
    if args.guard_tau is not None and not 0 <= args.guard_tau < 1:
        raise ConfigError(f"--guard-tau: a fraction from 0 to 1, not {args.guard_tau:g}")
    if args.guard_tau is not None and not args.guard:
        raise ConfigError("--guard-tau: only with --guard SUITE (it sets what the guard allows)")


async def _new_sweep(
    db: Database, args: argparse.Namespace, configs: list[ConfigArg], plans: dict[str, Plan]
) -> SweepRow:
    names = [c.name for c in configs]
    first = plans[names[0]]
    seed = 0 if args.seed is None else args.seed
    share = DEFAULT_TEST_SHARE if args.test_share is None else args.test_share
    train, test = split_cases(first.dataset.cases, seed, share)
    n, trials, budget = len(names), first.trials, args.budget
    least = smallest_budget(n, trials)
    if budget < least:
        per = f" × {trials} trials" if trials > 1 else ""
        raise ConfigError(
            f"--budget {budget}: too small for one round: {n} configs over "
            f"{_rounds(rounds_needed(n))}{per} need at least {least} case runs (one case each "
            "in the first round)"
        )
    used = fit_budget(n, budget, trials, len(train))
    if used is None:
        raise ConfigError(
            f"dataset {first.dataset.ref}: {len(first.dataset.cases)} cases leave "
            f"{len(train)} to race on after holding out {len(test)}, too few for "
            f"{_rounds(rounds_needed(n))} of fresh cases; add cases or lower --test-share"
        )
    rounds = schedule(n, used, trials)
    guard_suites, prior_from = await _guard_suites(db, args.guard, first.dataset.ref, first.cwd)
    sweep_id = f"swp_{ULID()}"
    definition: dict[str, Any] = {
        "configs": [{"name": c.name, **_fingerprint(plans[c.name], c.path)} for c in configs],
        "start": names[0],
        "dataset": {"ref": first.dataset.ref, "hash": first.dataset.digest},
        "graders": first.graders_json(),
        "trials": trials,
        "seed": seed,
        "testShare": share,
        "train": [c.id for c in train],
        "test": [c.id for c in test],
        "budget": {
            "given": budget,
            "used": used,
            "trainCasesNeeded": cases_needed(schedule(n, budget, trials)),
        },
        "schedule": [
            {"round": r.index, "configs": r.arms, "pulls": r.pulls, "cases": r.cases}
            for r in rounds
        ],
        "guard": {
            "given": list(args.guard),
            "suites": guard_suites,
            "priorFrom": prior_from,
            "tau": DEFAULT_GUARD_TAU if args.guard_tau is None else args.guard_tau,
        },
        "concurrency": args.concurrency,
    }
    row = SweepRow(
        id=sweep_id,
        name=",".join(names),
        dataset_ref=first.dataset.ref,
        definition=definition,
        created_at=utcnow(),
    )
    await create_sweep(db, row)
    return row


def _rounds(count: int) -> str:
    return f"{count} round{'s' if count != 1 else ''}"


async def _guard_suites(
    db: Database, given: Sequence[str], race_ref: str, cwd: Path
) -> tuple[list[str], list[str]]:
    """The guard suites (dataset refs, in order, each once), each read once to check it can
    be, and the sweeps `prior` took them from."""
    suites: list[str] = []
    prior_from: list[str] = []
    for text in given:
        if text == PRIOR:
            for adoption in await adoptions_before(db, utcnow()):
                if adoption.dataset_ref != race_ref and adoption.dataset_ref not in suites:
                    suites.append(adoption.dataset_ref)
                    prior_from.append(adoption.sweep_id)
            continue
        try:
            ref = (await load_dataset(db, text, cwd)).ref
        except ConfigError as exc:
            raise ConfigError(f"--guard {text}: {exc}") from None
        if ref == race_ref:
            raise ConfigError(
                f"--guard {text}: that is the race's own dataset (its held-out cases already "
                "check the winner); a guard is an earlier suite"
            )
        if ref not in suites:
            suites.append(ref)
    for suite in suites:
        try:
            await load_dataset(db, suite, cwd)
        except ConfigError as exc:
            raise ConfigError(
                f"--guard prior: the suite {suite}, adopted on by an earlier sweep, cannot be "
                f"read here: {exc}"
            ) from None
    return suites, prior_from


async def _to_resume(
    db: Database, args: argparse.Namespace, configs: list[ConfigArg], plans: dict[str, Plan]
) -> SweepRow:
    name = ",".join(c.name for c in configs)
    if args.resume:
        sweep = await find_sweep(db, args.resume)
    else:
        found = await latest_unfinished_sweep(db, name)
        if found is None:
            raise ConfigError(
                f"--resume: no unfinished sweep of {name} in this store; name one with "
                "--resume SWEEP"
            )
        sweep = found
    d = sweep.definition
    problems: list[str] = []
    stored_names = [c["name"] for c in d["configs"]]
    if stored_names != [c.name for c in configs]:
        problems.append(f"the configs changed ({', '.join(stored_names)} → {name})")
    else:
        for c, stored in zip(configs, d["configs"], strict=True):
            now = _fingerprint(plans[c.name], c.path)
            if now["spec"] != stored["spec"]:
                problems.append(f"config {c.name}'s spec changed ({stored['spec']} → {c.path})")
            if now["taskHash"] != stored["taskHash"]:
                problems.append(f"config {c.name}'s task changed")
            for path in sorted(now["agentFiles"].keys() | stored["agentFiles"].keys()):
                if now["agentFiles"].get(path) != stored["agentFiles"].get(path):
                    problems.append(f"config {c.name}'s agent script {path} changed")
    first = plans[configs[0].name]
    if first.dataset.ref != d["dataset"]["ref"]:
        problems.append(f"the dataset changed ({d['dataset']['ref']} → {first.dataset.ref})")
    elif first.dataset.digest != d["dataset"]["hash"]:
        problems.append(f"the dataset {first.dataset.ref} changed since the sweep started")
    if _grader_set(first) != frozenset(f"{g['name']}@{g['version']}" for g in d["graders"]):
        problems.append("the graders changed")
    if first.trials != d["trials"]:
        problems.append(f"the trials changed ({d['trials']} → {first.trials})")
    for flag, now_value, stored_value in (
        ("--budget", args.budget, d["budget"]["given"]),
        ("--seed", args.seed, d["seed"]),
        ("--test-share", args.test_share, d["testShare"]),
        ("--guard-tau", args.guard_tau, d["guard"]["tau"]),
    ):
        if now_value is not None and now_value != stored_value:
            problems.append(f"{flag} changed ({stored_value} → {now_value})")
    if args.guard and list(args.guard) != d["guard"]["given"]:
        problems.append(f"--guard changed ({d['guard']['given']} → {list(args.guard)})")
    if problems:
        raise ConfigError(
            f"cannot resume {sweep.id}: {'; '.join(problems)}. Undo the change, or start a new "
            "sweep without --resume"
        )
    return sweep


@dataclass(frozen=True, slots=True)
class ConfigScore:
    config: str
    experiment_id: str
    graded: int
    passed: int
    infra_errors: int
    agent_errors: int
    done: int

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.graded if self.graded else None


@dataclass(frozen=True, slots=True)
class RoundResult:
    index: int
    pulls: int
    cases: int
    scores: list[ConfigScore]
    kept: list[str]

    @property
    def case_runs(self) -> int:
        return sum(s.done for s in self.scores)


@dataclass(frozen=True, slots=True)
class GuardResult:
    suite: str
    start_id: str
    winner_id: str
    cases: int
    start_solved: int
    broken: list[str]
    unchecked: int
    """Cases the start solved that the winner has no verdict on (errored or ungraded)."""
    tau: float
    case_runs: int

    @property
    def share(self) -> float | None:
        return len(self.broken) / self.start_solved if self.start_solved else None

    @property
    def broke(self) -> bool:
        return self.share is not None and self.share > self.tau


@dataclass(slots=True)
class SweepOutcome:
    setup: Setup
    rounds: list[RoundResult] = field(default_factory=list)
    winner: str = ""
    best: PlausiblyBest | None = None
    held_out: Comparison | None = None
    held_out_ids: dict[str, str] = field(default_factory=dict)
    held_out_runs: int = 0
    train_passed: int = 0
    train_graded: int = 0
    guards: list[GuardResult] = field(default_factory=list)
    guard_skipped: str | None = None
    decision: str = "keep"
    reason: str = ""
    ran_now: int = 0

    @property
    def adopted(self) -> str | None:
        return self.winner if self.decision == "adopt" else None

    @property
    def train_rate(self) -> float | None:
        """The winner's pass rate over every race case-trial it ran, all rounds pooled."""
        return self.train_passed / self.train_graded if self.train_graded else None

    @property
    def optimism_gap(self) -> float | None:
        held = None if self.held_out is None else self.held_out.b.pass_rate
        return optimism_gap(self.train_rate, held)

    @property
    def guard_broke(self) -> bool:
        return any(g.broke for g in self.guards)

    @property
    def exit_code(self) -> int:
        return 1 if self.guard_broke else 0


class Runner:
    """Runs the sweep's experiments: each made once (found again on a resume) and only its
    unsaved case-trials run."""

    def __init__(self, db: Database, setup: Setup, limits: RunLimits) -> None:
        self.db = db
        self.setup = setup
        self.limits = limits
        self.runs: dict[SweepRunKey, str] = {}
        self.ran = 0

    async def load(self) -> None:
        self.runs = await sweep_runs(self.db, self.setup.sweep.id)

    async def experiment(self, key: SweepRunKey, plan: Plan, cases: list[Case]) -> ExperimentRow:
        found = self.runs.get(key)
        if found is not None:
            row = await get_experiment(self.db, found)
            assert row is not None
            return row
        row = replace(plan, cases=cases).row(
            new_experiment_id(), self.setup.definition["concurrency"], utcnow()
        )
        row = replace(
            row,
            kind="sweep",
            name=key.config,
            selection={"sweep": self.setup.sweep.id, "part": key.part, "round": key.round},
        )
        if not await create_sweep_run(self.db, self.setup.sweep.id, key, row):
            raise ConfigError(
                f"cannot resume {self.setup.sweep.id}: another neens process is running it (it "
                f"started {key.config}'s {key.part} run first); let that one finish, or once it "
                "has stopped, run this again"
            )
        self.runs[key] = row.id
        return row

    async def run_together(
        self, runs: list[tuple[ExperimentRow, Plan]], cases: list[Case], label: str, salt: str
    ) -> list[ExperimentRow]:
        """Run every config's experiment on `cases`, case by case, the configs of each case in a
        seeded random order (so drift hits them alike); return the rows, finished when full."""
        # What is left is read only once the runs are ours: another process resuming the sweep
        # at the same time would otherwise run the same case-trials.
        async with claimed(self.db, [row.id for row, _ in runs], resuming=True):
            kept: list[set[tuple[str, int]]] = []
            for row, _ in runs:
                saved = await trials_of(self.db, row.id, grades=False)
                kept.append({(t.case_id, t.trial) for t in saved})
            trials = self.setup.definition["trials"]
            order = random.Random(f"{self.setup.definition['seed']}:{salt}")
            todo: list[tuple[int, Case, int]] = []
            for trial in range(trials):
                for case in cases:
                    indexes = list(range(len(runs)))
                    order.shuffle(indexes)
                    todo.extend(
                        (i, case, trial) for i in indexes if (case.id, trial) not in kept[i]
                    )
            if todo:
                callers = [
                    Caller(
                        plan,
                        TaskContext(experiment_id=row.id, name=row.name, cwd=self.setup.cwd),
                        self.setup.headers[row.name],
                    )
                    for row, plan in runs
                ]
                total = len(runs) * len(cases) * trials
                with RunProgress(total=total, done=total - len(todo), label=label) as progress:
                    await run_trials(self.db, runs[0][1], callers, todo, self.limits, progress)
                self.ran += len(todo)
            counts = await tally(self.db, [row.id for row, _ in runs])
            done: list[ExperimentRow] = []
            for row, _ in runs:
                if counts[row.id].done >= row.planned:
                    await finish_experiment(self.db, row.id)
                fresh = await get_experiment(self.db, row.id)
                assert fresh is not None
                done.append(fresh)
        return done


async def run_sweep(db: Database, setup: Setup, limits: RunLimits) -> SweepOutcome:
    runner = Runner(db, setup, limits)
    await runner.load()
    outcome = SweepOutcome(setup)
    await _race(runner, outcome)
    await _held_out(runner, outcome)
    if outcome.decision == "adopt":
        await _guard(runner, outcome)
    elif setup.definition["guard"]["given"]:
        outcome.guard_skipped = "not run: the start is kept"
    outcome.ran_now = runner.ran
    return outcome


async def _race(runner: Runner, outcome: SweepOutcome) -> None:
    setup = runner.setup
    alive = list(setup.names)
    offset = 0
    for planned in setup.definition["schedule"]:
        index, cases_n = planned["round"], planned["cases"]
        cases = setup.train[offset : offset + cases_n]
        offset += cases_n
        runs = [
            (
                await runner.experiment(SweepRunKey(name, "race", index), setup.plans[name], cases),
                setup.plans[name],
            )
            for name in alive
        ]
        rows = await runner.run_together(
            runs, cases, f"{setup.sweep.id} round {index + 1}", f"race:{index}"
        )
        counts = await tally(runner.db, [r.id for r in rows])
        scores = [
            ConfigScore(
                name,
                row.id,
                counts[row.id].graded,
                counts[row.id].passed,
                counts[row.id].infra_errors,
                counts[row.id].agent_errors,
                counts[row.id].done,
            )
            for name, row in zip(alive, rows, strict=True)
        ]
        kept = [alive[i] for i in survivors([s.pass_rate for s in scores])]
        outcome.rounds.append(RoundResult(index, planned["pulls"], cases_n, scores, kept))
        if index == 0 and len(alive) >= 3:
            outcome.best = plausibly_best(
                {
                    name: await _case_passes(runner.db, row.id)
                    for name, row in zip(alive, rows, strict=True)
                }
            )
        alive = kept
    outcome.winner = alive[0]
    for result in outcome.rounds:
        for score in result.scores:
            if score.config == outcome.winner:
                outcome.train_passed += score.passed
                outcome.train_graded += score.graded


async def _case_passes(db: Database, experiment_id: str) -> dict[str, bool]:
    """Each graded case's outcome: passed when every graded case-trial passed."""
    verdicts: dict[str, list[bool]] = {}
    for t in await trials_of(db, experiment_id, grades=False):
        if t.passed is not None:
            verdicts.setdefault(t.case_id, []).append(t.passed)
    return {case: all(v) for case, v in verdicts.items()}


async def _held_out(runner: Runner, outcome: SweepOutcome) -> None:
    setup = runner.setup
    names = [setup.start] if outcome.winner == setup.start else [setup.start, outcome.winner]
    runs = [
        (
            await runner.experiment(SweepRunKey(name, "heldout", 0), setup.plans[name], setup.test),
            setup.plans[name],
        )
        for name in names
    ]
    rows = await runner.run_together(runs, setup.test, f"{setup.sweep.id} held out", "heldout")
    outcome.held_out_ids = {name: row.id for name, row in zip(names, rows, strict=True)}
    counts = await tally(runner.db, [r.id for r in rows])
    outcome.held_out_runs = sum(c.done for c in counts.values())
    start_side = await load_side(runner.db, rows[0])
    winner_side = await load_side(runner.db, rows[-1])
    outcome.held_out = compare(start_side, winner_side)
    if outcome.winner == setup.start:
        outcome.decision, outcome.reason = "keep", "the start won the race"
    elif outcome.held_out.ship:
        outcome.decision = "adopt"
        outcome.reason = f"{outcome.winner} is better than {setup.start} on the held-out cases"
    else:
        outcome.decision = "keep"
        c = outcome.held_out
        why = (
            f"the paired comparison says {c.verdict} ({c.verdict_reason})"
            if c.verdict != "better"
            else "; ".join(c.holds)
        )
        outcome.reason = (
            f"{outcome.winner} is not shown better than {setup.start} on the held-out cases: {why}"
        )


async def _guard(runner: Runner, outcome: SweepOutcome) -> None:
    setup = runner.setup
    guard = setup.definition["guard"]
    if not guard["suites"]:
        if PRIOR in guard["given"]:
            outcome.guard_skipped = (
                "prior: no earlier sweep adopted a config on another suite; nothing to guard"
            )
        return
    names = [setup.start, outcome.winner]
    for index, suite in enumerate(guard["suites"]):
        plans: dict[str, Plan] = {}
        for name in names:
            plan = setup.plans[name]
            plans[name] = await make_plan(
                runner.db,
                plan.spec,
                cwd=setup.cwd,
                dataset=suite,
                cli_graders=setup.cli_graders,
                trials=plan.trials,
                selection=Selection(),
                failing_id=None,
            )
        cases = plans[setup.start].dataset.cases
        runs = [
            (
                await runner.experiment(SweepRunKey(name, "guard", index), plans[name], cases),
                plans[name],
            )
            for name in names
        ]
        rows = await runner.run_together(
            runs, cases, f"{setup.sweep.id} guard {suite}", f"guard:{index}"
        )
        start_passes = await _case_passes(runner.db, rows[0].id)
        winner_passes = await _case_passes(runner.db, rows[1].id)
        solved = [c for c, passed in start_passes.items() if passed]
        broken = sorted(c for c in solved if winner_passes.get(c) is False)
        counts = await tally(runner.db, [r.id for r in rows])
        outcome.guards.append(
            GuardResult(
                suite=suite,
                start_id=rows[0].id,
                winner_id=rows[1].id,
                cases=len(cases),
                start_solved=len(solved),
                broken=broken,
                unchecked=sum(c not in winner_passes for c in solved),
                tau=guard["tau"],
                case_runs=sum(c.done for c in counts.values()),
            )
        )
    broke = [g for g in outcome.guards if g.broke]
    if broke:
        g = broke[0]
        outcome.decision = "keep"
        outcome.reason = (
            f"guard {g.suite}: {outcome.winner} broke {len(g.broken)} of the {g.start_solved} "
            f"cases {setup.start} solved ({(g.share or 0) * 100:.1f}%), more than τ "
            f"{g.tau * 100:.1f}%"
        )


async def record(db: Database, outcome: SweepOutcome, body: dict[str, Any]) -> None:
    await finish_sweep(
        db,
        outcome.setup.sweep.id,
        decision=outcome.decision,
        adopted=outcome.adopted,
        result=body,
    )
