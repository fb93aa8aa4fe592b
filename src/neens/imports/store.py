"""Saving an imported run as an experiment of the bench, so `neens exp compare` pairs it.

The experiment's kind is "import"; its cases are the run's case keys (with the input each tool
recorded), its trials the case-trials, each scorer a grader (kind "imported", version the
scorer's version or "unversioned"). `spec.import` keeps where it came from (tool, version, run
id, task, model, the file's SHA-256) and `unknown`: each field the format cannot express, with
the reason, so `exp list` and the docs can say "unknown" rather than a number.

How the row maps to a stored case-trial: an error of the model is an "agent" error, one of the
tool running the evaluation an "infra" error (the bench's two kinds; `exp compare` counts both
and leaves them out of the pairing); a scorer that failed is an unscored grade ("grader_error").
Token counts are not stored (the bench has no column for them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, cast

from neens_eval.errors import ConfigError
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.storable import name_problem
from neens.exp.datasets import digest
from neens.exp.run_command import new_experiment_id
from neens.imports.trial import ImportedRun, Trial
from neens.store.db import Database
from neens.store.experiments import (
    ExperimentRow,
    GradeRow,
    TrialRow,
    create_experiment,
    finish_experiment,
    save_trials,
)
from neens.store.types import utcnow

KIND: Final = "import"
GRADER_KIND: Final = "imported"
UNVERSIONED: Final = "unversioned"
ERROR_KINDS: Final = {"model": "agent", "harness": "infra", "grader": "infra"}
_BATCH: Final = 500
MAX_NAME: Final = 500
"""The longest experiment name, as `neens exp run` allows."""


@dataclass(frozen=True, slots=True)
class Saved:
    row: ExperimentRow
    trials: int
    passed: int
    graded: int
    errors: int


def _when(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        found = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def _grades(trial: Trial) -> tuple[GradeRow, ...]:
    grades = []
    for s in trial.scores:
        reason = s.error or s.reason or f"{s.scorer}: {json.dumps(s.raw, default=str)}"
        grades.append(
            GradeRow(
                grader=s.scorer[:200],
                kind=GRADER_KIND,
                version=(s.version or UNVERSIONED)[:64],
                score=s.score,
                passed=s.passed,
                unscored="grader_error" if s.error else None,
                reason=reason,
            )
        )
    return tuple(grades)


def _trial_row(trial: Trial, at: datetime) -> TrialRow:
    # An error with scores (an Inspect sample that hit a limit) is still a graded case-trial.
    errored = trial.error is not None and not trial.scores
    return TrialRow(
        case_id=trial.case_key,
        trial=trial.trial_idx,
        status="error" if errored else "done",
        error_kind=ERROR_KINDS.get(trial.error_kind or "") if errored else None,
        error=trial.error,
        output=trial.output,
        passed=None if errored else trial.passed,
        attempts=1,
        latency_ms=trial.latency_ms,
        cost_usd=trial.cost_usd,
        started_at=at,
        finished_at=at,
        grades=() if errored else _grades(trial),
    )


def experiment_name(run: ImportedRun, path: Path, name: str | None) -> str:
    """`--name`, else `tool:task:model`; ConfigError when it is blank, longer than the store's
    names (never cut) or holds a control character (an escape in a provider's label would
    recolour the terminal that lists it, and the server refuses it as a name)."""
    if name is not None:
        if not name.strip() or len(name) > MAX_NAME:
            raise ConfigError(
                f"--name: must be a non-empty name of at most {MAX_NAME} characters, not "
                f"{len(name)}" + (" (blank)" if name and not name.strip() else "")
            )
        if (problem := name_problem(name)) is not None:
            raise ConfigError(f"--name: {problem}")
        return name
    default = f"{run.tool}:{run.task or path.stem}" + (f":{run.model}" if run.model else "")
    if len(default) > MAX_NAME:
        raise ConfigError(
            f"the default name (tool:task:model) is {len(default)} characters, over "
            f"{MAX_NAME}: give the experiment's name with --name"
        )
    if (problem := name_problem(default)) is not None:
        raise ConfigError(
            f"the default name (tool:task:model), {ascii(default)}, {problem}: give the "
            "experiment's name with --name"
        )
    return default


def experiment_of(run: ImportedRun, path: Path, name: str | None) -> ExperimentRow:
    """The experiment row an imported run is saved as (not yet saved)."""
    cases: dict[str, dict[str, Any]] = {}
    for t in run.trials:
        if t.case_key not in cases:
            body: dict[str, Any] = {"id": t.case_key, "input": t.input}
            if t.expected is not None:
                body["expected"] = t.expected
            cases[t.case_key] = body
    graders: dict[str, str] = {}
    for t in run.trials:
        for s in t.scores:
            graders.setdefault(s.scorer[:200], (s.version or UNVERSIONED)[:64])
    source = {
        "tool": run.tool,
        "toolVersion": run.tool_version,
        "runId": run.run_id,
        "task": run.task,
        "model": run.model,
        "path": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "caseKeyKinds": sorted({t.case_key_kind for t in run.trials}),
        "createdAt": run.created_at,
        "unknown": run.unknown,
        "warnings": run.warnings,
    }
    return ExperimentRow(
        id=new_experiment_id(),
        kind=KIND,
        name=experiment_name(run, path, name),
        spec={"import": source},
        dataset_ref=str(path),
        dataset_version_id=None,
        dataset_hash=digest(sorted(cases)),
        task_hash=digest({"tool": run.tool, "task": run.task, "model": run.model}),
        agent_files={},
        graders=[{"name": g, "kind": GRADER_KIND, "version": v} for g, v in graders.items()],
        cases=list(cases.values()),
        selection={},
        failing_of=None,
        trials=run.repeats,
        planned=len(run.trials),
        concurrency=1,
        created_at=utcnow(),
    )


class _OneTransaction:
    """Stands in for the `Database` the bench's store functions take, handing each `write()`
    the one open transaction `save_import` writes the whole import in."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        yield self._session


async def save_import(db: Database, run: ImportedRun, path: Path, name: str | None) -> Saved:
    """Save `run` as a finished experiment and return what was saved.

    The experiment, its case-trials and its being finished are one transaction: an import
    interrupted anywhere (Ctrl-C cancels the task mid-statement; the process may be killed)
    leaves nothing, with no cleanup to run. A cleanup written after the fact would run in the
    cancelled task while the failed transaction may still hold SQLite's write lock, and fail
    with "database is locked" or be interrupted itself, leaving a half-saved experiment."""
    row = experiment_of(run, path, name)
    at = _when(run.created_at) or row.created_at
    rows = [_trial_row(t, at) for t in run.trials]
    async with db.write() as s:
        one = cast(Database, _OneTransaction(s))
        await create_experiment(one, row)
        # Batches keep each statement's bound parameters under SQLite's limit.
        for start in range(0, len(rows), _BATCH):
            await save_trials(one, [(row.id, r) for r in rows[start : start + _BATCH]])
        await finish_experiment(one, row.id)
    return Saved(
        row=row,
        trials=len(rows),
        passed=sum(r.passed is True for r in rows),
        graded=sum(r.passed is not None for r in rows),
        errors=sum(r.status == "error" for r in rows),
    )
