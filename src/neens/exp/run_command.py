"""`neens exp run`: a new run, or what is left of one (`--resume`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from neens_eval.errors import ConfigError
from ulid import ULID

from neens.exp.plan import Plan, Selection, make_plan, resume_problems
from neens.exp.plateau import check_series, tag_finished_run
from neens.exp.progress import RunProgress, cost_text
from neens.exp.runner import Caller, RunLimits, run_trials
from neens.exp.spec import HttpTask, read_spec
from neens.exp.store import find_experiment, open_store
from neens.exp.tasks import TaskContext, expand_headers
from neens.store.db import Database
from neens.store.experiments import (
    ExperimentRow,
    Tally,
    create_experiment,
    finish_experiment,
    latest_unfinished,
    tally,
    trials_of,
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


async def run_command(args: argparse.Namespace, holder: dict[str, Any]) -> int:
    _check_flags(args)
    cwd = Path.cwd()
    spec = read_spec(Path(args.spec))
    async with open_store(args.database_url) as db:
        failing_id = None
        if args.failing is not None:
            failing_id = (await find_experiment(db, args.failing, flag="--failing")).id
        selection = Selection(
            failing=failing_id,
            cases=tuple(dict.fromkeys(args.case)),
            first_n=args.first_n,
            sample=args.sample,
            seed=(args.seed if args.seed is not None else 0) if args.sample else None,
        )
        plan = await make_plan(
            db,
            spec,
            cwd=cwd,
            dataset=args.dataset,
            cli_graders=args.grader,
            trials=args.trials,
            selection=selection,
            failing_id=failing_id,
            seq=args.seq,
        )
        headers: dict[str, str] = {}
        if isinstance(plan.spec.task, HttpTask):
            try:
                headers = expand_headers(plan.spec.task.headers)
            except ValueError as exc:
                raise ConfigError(f"task.headers: ${{{exc}}} is not set") from None
        stored: ExperimentRow | None = None
        if args.resume is not None:
            stored = await _to_resume(db, args.resume, plan)
            await check_series(db, args.series, stored)
        todo, already = await _todo(db, plan, stored, retry_errors=args.retry_errors)
        if stored is None:
            stored = plan.row(new_experiment_id(), args.concurrency, utcnow())
            await create_experiment(db, stored)
        holder["id"] = stored.id
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
        _report(
            stored,
            counts,
            finished,
            ran=len(todo),
            resumed=args.resume is not None,
            as_json=args.json,
            series=series,
        )
    return 0


async def _to_resume(db: Database, given: str, plan: Plan) -> ExperimentRow:
    if given:
        stored = await find_experiment(db, given, flag="--resume")
    else:
        found = await latest_unfinished(db, plan.spec.name)
        if found is None:
            raise ConfigError(
                f"--resume: no unfinished run named {plan.spec.name!r} in this store; "
                "name one with --resume EXP (`neens exp list` marks partial runs)"
            )
        stored = found
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
        for trial in await trials_of(db, stored.id, grades=False):
            if not (retry_errors and trial.status == "error"):
                kept.add((trial.case_id, trial.trial))
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


def pass_text(passed: int, graded: int) -> str:
    if graded == 0:
        return "pass no data"
    return f"pass {passed / graded * 100:.1f}% ({passed}/{graded})"


def _untagged(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    line = (
        f"series {args.series}: not tagged, the run is partial; --resume it to add it as the "
        "next round"
    )
    return line, {"name": args.series, "round": None, "line": line}


def _report(
    row: ExperimentRow,
    counts: Tally,
    finished: bool,
    *,
    ran: int,
    resumed: bool,
    as_json: bool,
    series: tuple[str, dict[str, Any]] | None = None,
) -> None:
    if as_json:
        body = summary_json(row, counts, finished)
        body["ranNow"] = ran
        body["resumed"] = resumed
        if series is not None:
            body["series"] = series[1]
        print(json.dumps(body, ensure_ascii=False))
        return
    rate = pass_text(counts.passed, counts.graded)
    line = f"run {row.id} {row.name}  {rate}  {counts.done} case runs"
    if not finished:
        line += f" of {row.planned} (partial)"
    print(line)
    seq = _seq_json(row, counts)
    if seq is not None:
        print(
            f"seq@{seq['attempts']} {pass_text(counts.seq_passed, counts.graded)[5:]} "
            f"with feedback ({seq['feedback']}); the pass rate above is the first attempt's"
        )
    errors = counts.infra_errors + counts.agent_errors
    if errors:
        print(f"errors {errors} ({counts.infra_errors} infra, {counts.agent_errors} agent)")
    ungraded = counts.done - counts.graded - errors
    if ungraded:
        print(f"ungraded {ungraded} (no grader produced a verdict)")
    print(f"cost {cost_text(counts.cost_usd, counts.priced, counts.done)}")
    if series is not None:
        print(series[0])
    if resumed:
        print(f"resumed: ran {ran} case-trials left", file=sys.stderr)
