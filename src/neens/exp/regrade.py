"""`neens exp regrade EXP spec.json`: grade a stored experiment's outputs again with the spec's
graders, without calling the task.

The regrade is an experiment of its own (kind "regrade", linked to its source by `source_id`),
with the source's cases, trials and outputs, and the new graders' verdicts and versions, so it
can be compared with any run graded by those graders: regrade A with B's graders, then compare
like with like. Errored case-trials stay errors (there is no output to grade), and each
case-trial keeps the time its output was produced, so `exp compare` still sees when the outputs
were made. It prints the pass rate before and after, and every case-trial whose outcome flipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neens.exp.compare import pass_text
from neens.exp.datasets import Case
from neens.exp.graders import ReadyGrader
from neens.exp.plan import ready_graders
from neens.exp.run_command import new_experiment_id
from neens.exp.runner import grade_answer
from neens.exp.spec import read_spec
from neens.exp.store import find_experiment, open_store
from neens.exp.table import table
from neens.store.db import Database
from neens.store.experiments import (
    ExperimentRow,
    TrialRow,
    create_experiment,
    finish_experiment,
    save_trial,
    trials_of,
)
from neens.store.types import utcnow


def _outcome(passed: bool | None) -> str:
    return "ungraded" if passed is None else ("pass" if passed else "fail")


async def _regrade_one(
    db: Database,
    experiment_id: str,
    graders: list[ReadyGrader],
    case: Case,
    old: TrialRow,
    cwd: Path,
) -> TrialRow:
    grades: tuple[Any, ...] = ()
    passed = None
    if old.status == "done":
        grades, passed = await grade_answer(graders, case, old.output, cwd)
    row = TrialRow(
        case_id=old.case_id,
        trial=old.trial,
        status=old.status,
        error_kind=old.error_kind,
        error=old.error,
        output=old.output,
        passed=passed,
        attempts=0,
        latency_ms=old.latency_ms,
        cost_usd=old.cost_usd,
        started_at=old.started_at,
        finished_at=old.finished_at,
        grades=grades,
    )
    await save_trial(db, experiment_id, row)
    return row


@dataclass(frozen=True, slots=True)
class Regraded:
    row: ExperimentRow
    source: ExperimentRow
    old: list[TrialRow]
    new: list[TrialRow]


async def regrade_experiment(
    db: Database, source: ExperimentRow, graders: list[ReadyGrader], concurrency: int, cwd: Path
) -> Regraded:
    """Grade `source`'s stored outputs with `graders` and save the result as a finished
    experiment of its own (kind "regrade"), without calling the task."""
    old_trials = await trials_of(db, source.id, grades=False)
    cases = {body["id"]: Case.from_json(body) for body in source.cases}
    row = ExperimentRow(
        id=new_experiment_id(),
        kind="regrade",
        name=source.name,
        spec={
            **source.spec,
            "graders": [{"name": g.name, **g.definition.options} for g in graders],
        },
        dataset_ref=source.dataset_ref,
        dataset_version_id=source.dataset_version_id,
        dataset_hash=source.dataset_hash,
        task_hash=source.task_hash,
        agent_files=source.agent_files,
        graders=[{"name": g.name, "kind": g.kind, "version": g.version} for g in graders],
        cases=source.cases,
        selection=source.selection,
        failing_of=source.failing_of,
        trials=source.trials,
        planned=len(old_trials),
        concurrency=concurrency,
        created_at=utcnow(),
        source_id=source.id,
    )
    await create_experiment(db, row)
    limit = asyncio.Semaphore(concurrency)

    async def one(old: TrialRow) -> TrialRow:
        async with limit:
            return await _regrade_one(db, row.id, graders, cases[old.case_id], old, cwd)

    new_trials = list(await asyncio.gather(*(one(t) for t in old_trials)))
    await finish_experiment(db, row.id)
    return Regraded(row, source, old_trials, new_trials)


async def regrade_command(args: argparse.Namespace) -> int:
    cwd = Path.cwd()
    spec = read_spec(Path(args.spec))
    graders = ready_graders(spec, args.grader, cwd)
    async with open_store(args.database_url) as db:
        source = await find_experiment(db, args.experiment)
        done = await regrade_experiment(db, source, graders, args.concurrency, cwd)
    row, old_trials, new_trials = done.row, done.old, done.new
    flipped = [
        (old, new)
        for old, new in zip(old_trials, new_trials, strict=True)
        if old.passed != new.passed
    ]
    before = _counts(old_trials)
    after = _counts(new_trials)
    if args.json:
        body = {
            "id": row.id,
            "sourceId": source.id,
            "name": row.name,
            "graders": row.graders,
            "taskCalls": 0,
            "before": before,
            "after": after,
            "flipped": [
                {
                    "case": old.case_id,
                    "trial": old.trial,
                    "before": _outcome(old.passed),
                    "after": _outcome(new.passed),
                }
                for old, new in flipped
            ],
        }
        print(json.dumps(body, ensure_ascii=False))
        return 0
    print(
        f"regrade {row.id} {row.name}  {pass_text(after['passed'], after['graded'])}  "
        f"regrade of {source.id}, 0 task calls"
    )
    print(
        f"before {pass_text(before['passed'], before['graded'])}  "
        f"after {pass_text(after['passed'], after['graded'])}"
    )
    print(f"flipped {len(flipped)}")
    if flipped:
        rows = [
            [old.case_id, str(old.trial), _outcome(old.passed), _outcome(new.passed)]
            for old, new in flipped
        ]
        print(table(["case", "trial", "before", "after"], rows, right={1}))
    return 0


def _counts(trials: list[TrialRow]) -> dict[str, Any]:
    graded = sum(t.passed is not None for t in trials)
    passed = sum(t.passed is True for t in trials)
    return {"graded": graded, "passed": passed, "passRate": passed / graded if graded else None}
