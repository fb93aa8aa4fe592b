"""`neens exp run`: a new run, or what is left of one (`--resume`)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neens_eval.errors import ConfigError
from ulid import ULID

from neens.exp.claims import claimed
from neens.exp.compare import pass_text
from neens.exp.plan import Plan, Selection, make_plan, resume_problems
from neens.exp.plateau import check_series, tag_finished_run
from neens.exp.progress import RunProgress, cost_text
from neens.exp.resume import find_to_resume, kept_trials
from neens.exp.runner import Caller, RunLimits, run_trials
from neens.exp.sessions import folder_key, join, session_report
from neens.exp.sources import Sources, hashes, sources_of
from neens.exp.spec import HttpTask, read_spec
from neens.exp.store import find_experiment, open_store
from neens.exp.tasks import TaskContext, expand_headers
from neens.store.db import Database
from neens.store.experiment_sessions import EntryRow, SessionRow, current_session
from neens.store.experiments import (
    ExperimentRow,
    Tally,
    create_experiment,
    finish_experiment,
    tally,
)
from neens.store.types import utcnow


def new_experiment_id() -> str:
    return f"exp_{ULID()}"


def _check_flags(args: argparse.Namespace) -> None:
    if args.retry_errors and args.resume is None:
        raise ConfigError(
            "--retry-errors: only with --resume (it runs a stored run's errors again)"
        )
    if args.seed is not None and args.sample is None:
        raise ConfigError("--seed: only with --sample N (it seeds the sample)")
    if args.watch and args.resume is not None:
        raise ConfigError(
            "--watch: not with --resume; finish the run with --resume first, then watch"
        )
    if args.feedback is not None and args.seq < 2:
        raise ConfigError("--feedback: only with --seq N of 2 or more (the attempts it feeds)")
    for flag in ("eps", "delta", "gate"):
        if args.series is None and getattr(args, flag) is not None:
            raise ConfigError(f"--{flag}: only with --series NAME (it sets the series' detector)")
    if args.series is not None and args.failing is not None:
        raise ConfigError(
            "--series: not with --failing (a run of only A's failing cases gains by regression "
            "to the mean, not by a change)"
        )
    if args.series is not None and args.watch:
        raise ConfigError(
            "--series: not with --watch (each round of a series is a run you chose to keep); "
            "run `neens exp run SPEC --series NAME` once the watched change is ready"
        )


@dataclass(frozen=True, slots=True)
class RunDone:
    """One `exp run` carried out: the experiment, its counts, and its session entry (None
    outside a session)."""

    row: ExperimentRow
    plan: Plan
    counts: Tally
    finished: bool
    ran: int
    entry: EntryRow | None
    series: tuple[str, dict[str, Any]] | None = None
    """The series line and its JSON, with --series."""


async def run_command(args: argparse.Namespace, holder: dict[str, Any]) -> int:
    from neens.exp.matrix_args import refuse_matrix_flags
    from neens.exp.matrix_cli import is_matrix_file, matrix_command

    if is_matrix_file(Path(args.spec)):
        return await matrix_command(args, holder)
    refuse_matrix_flags(args)
    _check_flags(args)
    if args.watch:
        from neens.exp.watch import watch_command

        return await watch_command(args, holder)
    cwd = Path.cwd()
    async with open_store(args.database_url) as db:
        session = await current_session(db, folder_key(cwd))
        done = await run_once(db, args, cwd, holder, session)
        lines: list[str] = []
        session_body = None
        if session is not None and done.entry is not None:
            lines, session_body = await session_report(db, session, done.row, done.entry)
    _report(done, resumed=args.resume is not None, as_json=args.json, session=session_body)
    if not args.json:
        for line in lines:
            print(line)
    return 0


async def make_run_plan(db: Database, args: argparse.Namespace, cwd: Path) -> Plan:
    """The run the flags describe: the spec read, the dataset loaded, the cases chosen."""
    spec = read_spec(Path(args.spec))
    failing_id = None
    if args.failing is not None:
        failing_id = (await find_experiment(db, args.failing, flag="--failing")).id
    return await make_plan(
        db,
        spec,
        cwd=cwd,
        dataset=args.dataset,
        cli_graders=args.grader,
        trials=args.trials,
        selection=selection_of(args, failing_id),
        failing_id=failing_id,
        seq=args.seq,
    )


def selection_of(args: argparse.Namespace, failing_id: str | None = None) -> Selection:
    """The cases the flags choose (--case, --first-n, --sample with --seed, and --failing's
    experiment), the same for `exp run`, its A/B arms and a matrix's cells."""
    return Selection(
        failing=failing_id,
        cases=tuple(dict.fromkeys(args.case)),
        first_n=args.first_n,
        sample=args.sample,
        seed=(args.seed if args.seed is not None else 0) if args.sample else None,
    )


async def run_once(
    db: Database,
    args: argparse.Namespace,
    cwd: Path,
    holder: dict[str, Any],
    session: SessionRow | None,
    plan: Plan | None = None,
) -> RunDone:
    """Run `plan` (by default the one the flags describe), or what is left of a stored run with
    --resume, after joining the folder's session when there is one; count what it saved."""
    if plan is None:
        plan = await make_run_plan(db, args, cwd)
    spec_path = Path(args.spec)
    headers = task_headers(plan)
    stored: ExperimentRow | None = None
    if args.resume is not None:
        stored = await _to_resume(db, args.resume, plan)
        await check_series(db, args.series, stored)
    resumed = stored
    if stored is None:
        stored = plan.row(new_experiment_id(), args.concurrency, utcnow())
        await create_experiment(db, stored)
    async with claimed(db, [stored.id], resuming=resumed is not None):
        # What is left is read only once the run is ours: another process resuming it at the
        # same time would otherwise run the same case-trials.
        todo, already = await _todo(db, plan, resumed, retry_errors=args.retry_errors)
        holder["id"] = stored.id
        entry = None
        if session is not None:
            files = hashes(plan_sources(spec_path, plan).all(), cwd)
            entry = await join(db, session, stored, files, "run")
        limits = RunLimits(
            concurrency=args.concurrency, retries=args.retries, trial_timeout_s=args.trial_timeout
        )
        context = TaskContext(experiment_id=stored.id, name=plan.spec.name, cwd=cwd)
        caller = Caller(plan, context, headers)
        with RunProgress(total=plan.planned, done=already, label=stored.id) as progress:
            await run_trials(
                db, plan, [caller], [(0, case, trial) for case, trial in todo], limits, progress
            )
        counts = (await tally(db, [stored.id]))[stored.id]
        finished = counts.done >= stored.planned
        if finished:
            await finish_experiment(db, stored.id)
    series = None
    if args.series is not None:
        series = await tag_finished_run(db, args, stored.id) if finished else _untagged(args)
    holder.pop("id", None)
    return RunDone(stored, plan, counts, finished, len(todo), entry, series)


def task_headers(plan: Plan) -> dict[str, str]:
    """An http task's headers with their ${NAME}s read from the environment."""
    if not isinstance(plan.spec.task, HttpTask):
        return {}
    try:
        return expand_headers(plan.spec.task.headers)
    except ValueError as exc:
        raise ConfigError(f"task.headers: ${{{exc}}} is not set") from None


def plan_sources(spec_path: Path, plan: Plan) -> Sources:
    """The files this run is made from."""
    return sources_of(
        spec_path,
        plan.spec,
        [g.definition for g in plan.graders],
        None if plan.dataset.version_id is not None else plan.dataset.ref,
        plan.cwd,
    )


async def _to_resume(db: Database, given: str, plan: Plan) -> ExperimentRow:
    stored = await find_to_resume(db, given, plan.spec.name, "run")
    problems = resume_problems(stored, plan)
    if problems:
        raise ConfigError(
            f"cannot resume {stored.id}: {'; '.join(problems)}. Undo the change, or start a "
            "new run without --resume"
        )
    return stored


async def _todo(
    db: Database, plan: Plan, stored: ExperimentRow | None, *, retry_errors: bool
) -> tuple[list[tuple[Any, int]], int]:
    """The (case, trial) pairs left to run, in run order (trial by trial, cases in order), and
    how many of the planned ones are kept."""
    kept: set[tuple[str, int]] = set()
    if stored is not None:
        kept = await kept_trials(db, stored.id, retry_errors=retry_errors)
    todo = [
        (case, trial)
        for trial in range(plan.trials)
        for case in plan.cases
        if (case.id, trial) not in kept
    ]
    return todo, plan.planned - len(todo)


def summary_json(row: ExperimentRow, counts: Tally, finished: bool) -> dict[str, Any]:
    return {
        "id": row.id,
        "kind": row.kind,
        "name": row.name,
        "sourceId": row.source_id,
        "status": "finished" if finished else "partial",
        "cases": len(row.cases),
        "trials": row.trials,
        "planned": row.planned,
        "done": counts.done,
        "graded": counts.graded,
        "passed": counts.passed,
        "passRate": counts.passed / counts.graded if counts.graded else None,
        "errors": {"infra": counts.infra_errors, "agent": counts.agent_errors},
        "ungraded": counts.done - counts.graded - counts.infra_errors - counts.agent_errors,
        "costUsd": counts.cost_usd if counts.priced else None,
        "costOverflow": counts.cost_overflow,
        "pricedTrials": counts.priced,
        "seq": _seq_json(row, counts),
        "createdAt": row.created_at.isoformat(),
    }


def _seq_json(row: ExperimentRow, counts: Tally) -> dict[str, Any] | None:
    seq = row.spec.get("seq")
    if not seq:
        return None
    return {
        "attempts": seq["attempts"],
        "feedback": seq["feedback"],
        "passed": counts.seq_passed,
        "rate": counts.seq_passed / counts.graded if counts.graded else None,
    }


def _report(done: RunDone, *, resumed: bool, as_json: bool, session: dict[str, Any] | None) -> None:
    row, counts, finished = done.row, done.counts, done.finished
    if as_json:
        body = summary_json(row, counts, finished)
        body["ranNow"] = done.ran
        body["resumed"] = resumed
        body["session"] = session
        if done.series is not None:
            body["series"] = done.series[1]
        print(json.dumps(body, ensure_ascii=False, allow_nan=False))
        return
    for line in run_lines(row, counts, finished):
        print(line)
    if done.series is not None:
        print(done.series[0])
    if resumed:
        print(f"resumed: ran {done.ran} case-trials left", file=sys.stderr)


def run_lines(row: ExperimentRow, counts: Tally, finished: bool) -> list[str]:
    """What `exp run` prints about a run, after the first line's "run ID NAME"."""
    rate = pass_text(counts.passed, counts.graded)
    line = f"run {row.id} {row.name}  {rate}  {counts.done} case runs"
    if not finished:
        line += f" of {row.planned} (partial)"
    lines = [line]
    seq = _seq_json(row, counts)
    if seq is not None:
        lines.append(
            f"seq@{seq['attempts']} {pass_text(counts.seq_passed, counts.graded)[5:]} "
            f"with feedback ({seq['feedback']}); the pass rate above is the first attempt's"
        )
    errors = counts.infra_errors + counts.agent_errors
    if errors:
        lines.append(f"errors {errors} ({counts.infra_errors} infra, {counts.agent_errors} agent)")
    ungraded = counts.done - counts.graded - errors
    if ungraded:
        lines.append(f"ungraded {ungraded} (no grader produced a verdict)")
    lines.append(f"cost {cost_text(counts.cost_usd, counts.priced, counts.done)}")
    return lines


def _untagged(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    line = (
        f"series {args.series}: not tagged, the run is partial; --resume it to add it as the "
        "next round"
    )
    return line, {"name": args.series, "round": None, "line": line}
