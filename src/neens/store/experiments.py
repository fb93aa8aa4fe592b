"""Experiments of the local bench: creating one, saving each case-trial as it finishes, reading
them back, and the Neens dataset versions an experiment may run on."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, delete, func, insert, select, tuple_, update
from sqlalchemy.orm import InstrumentedAttribute

from neens.store.db import Database
from neens.store.models import (
    DatasetItem,
    DatasetVersion,
    Experiment,
    ExperimentGrade,
    ExperimentTrial,
    GoldenMark,
)
from neens.store.types import storable_text, utcnow


@dataclass(frozen=True, slots=True)
class ExperimentRow:
    id: str
    kind: str
    name: str
    spec: dict[str, Any]
    dataset_ref: str
    dataset_version_id: str | None
    dataset_hash: str
    task_hash: str
    agent_files: dict[str, Any]
    graders: list[Any]
    cases: list[Any]
    selection: dict[str, Any]
    failing_of: str | None
    trials: int
    planned: int
    concurrency: int
    created_at: datetime
    finished_at: datetime | None = None
    source_id: str | None = None
    pair_id: str | None = None


@dataclass(frozen=True, slots=True)
class GradeRow:
    grader: str
    kind: str
    version: str
    score: float | None
    passed: bool | None
    unscored: str | None
    reason: str
    prompt: str | None = None
    raw_reply: str | None = None

    @classmethod
    def of(cls, grade: Any) -> GradeRow:
        """From anything with the same attributes: a grader's result, or a stored grade."""
        return cls(
            grader=grade.grader,
            kind=grade.kind,
            version=grade.version,
            score=grade.score,
            passed=grade.passed,
            unscored=grade.unscored,
            reason=grade.reason,
            prompt=grade.prompt,
            raw_reply=grade.raw_reply,
        )


@dataclass(frozen=True, slots=True)
class TrialRow:
    case_id: str
    trial: int
    status: str
    """"done" or "error"."""
    error_kind: str | None
    error: str | None
    output: str | None
    passed: bool | None
    attempts: int
    latency_ms: float | None
    cost_usd: float | None
    started_at: datetime
    finished_at: datetime
    grades: tuple[GradeRow, ...] = ()
    seq_passed_at: int | None = None
    seq_log: list[Any] | None = None


@dataclass(frozen=True, slots=True)
class Tally:
    """What an experiment's saved case-trials add up to."""

    done: int
    """Case-trials saved, errors included."""
    infra_errors: int
    agent_errors: int
    graded: int
    passed: int
    cost_usd: float | None
    """The priced case-trials' summed cost; None when the sum is too large to represent."""
    priced: int
    first_started_at: datetime | None
    last_finished_at: datetime | None
    seq_passed: int = 0
    """Case-trials that passed within their --seq attempts."""

    @property
    def cost_overflow(self) -> bool:
        """Some case-trials are priced, and their summed cost is too large to represent."""
        return self.priced > 0 and self.cost_usd is None


def _row(e: Experiment) -> ExperimentRow:
    return ExperimentRow(
        id=e.id,
        kind=e.kind,
        name=e.name,
        spec=e.spec,
        dataset_ref=e.dataset_ref,
        dataset_version_id=e.dataset_version_id,
        dataset_hash=e.dataset_hash,
        task_hash=e.task_hash,
        agent_files=e.agent_files,
        graders=e.graders,
        cases=e.cases,
        selection=e.selection,
        failing_of=e.failing_of,
        trials=e.trials,
        planned=e.planned,
        concurrency=e.concurrency,
        created_at=e.created_at,
        finished_at=e.finished_at,
        source_id=e.source_id,
        pair_id=e.pair_id,
    )


def experiment_model(row: ExperimentRow) -> Experiment:
    """The table object for a new experiment."""
    return Experiment(
        id=row.id,
        kind=row.kind,
        name=row.name,
        spec=row.spec,
        dataset_ref=row.dataset_ref,
        dataset_version_id=row.dataset_version_id,
        dataset_hash=row.dataset_hash,
        task_hash=row.task_hash,
        agent_files=row.agent_files,
        graders=row.graders,
        cases=row.cases,
        selection=row.selection,
        failing_of=row.failing_of,
        trials=row.trials,
        planned=row.planned,
        concurrency=row.concurrency,
        created_at=row.created_at,
        source_id=row.source_id,
        pair_id=row.pair_id,
    )


async def create_experiment(db: Database, row: ExperimentRow) -> None:
    async with db.write() as s:
        s.add(experiment_model(row))


async def save_trial(db: Database, experiment_id: str, trial: TrialRow) -> None:
    """Save one finished case-trial and its grades (`save_trials` of one)."""
    await save_trials(db, [(experiment_id, trial)])


async def save_trials(db: Database, trials: list[tuple[str, TrialRow]]) -> None:
    """Save finished case-trials and their grades in one transaction, each replacing an earlier
    row of the same experiment, case and trial (an error run again with --retry-errors)."""
    if not trials:
        return
    keys = [(experiment_id, t.case_id, t.trial) for experiment_id, t in trials]
    async with db.write() as s:
        await s.execute(
            delete(ExperimentTrial).where(
                tuple_(
                    ExperimentTrial.experiment_id, ExperimentTrial.case_id, ExperimentTrial.trial
                ).in_(keys)
            )
        )
        result = await s.execute(
            insert(ExperimentTrial).returning(ExperimentTrial.pk, sort_by_parameter_order=True),
            [
                {
                    "experiment_id": experiment_id,
                    "case_id": t.case_id,
                    "trial": t.trial,
                    "status": t.status,
                    "error_kind": t.error_kind,
                    "error": None if t.error is None else storable_text(t.error),
                    "output": t.output,
                    "passed": t.passed,
                    "attempts": t.attempts,
                    "latency_ms": t.latency_ms,
                    "cost_usd": t.cost_usd,
                    "seq_passed_at": t.seq_passed_at,
                    "seq_log": t.seq_log,
                    "started_at": t.started_at,
                    "finished_at": t.finished_at,
                }
                for experiment_id, t in trials
            ],
        )
        pks = [row[0] for row in result]
        grades = [
            {
                "trial_pk": pk,
                "grader": g.grader,
                "kind": g.kind,
                "version": g.version,
                "score": g.score,
                "passed": g.passed,
                "unscored": g.unscored,
                "reason": storable_text(g.reason),
                "prompt": None if g.prompt is None else storable_text(g.prompt),
                "raw_reply": None if g.raw_reply is None else storable_text(g.raw_reply),
            }
            for pk, (_, t) in zip(pks, trials, strict=True)
            for g in t.grades
        ]
        if grades:
            await s.execute(insert(ExperimentGrade), grades)


class TrialWriter:
    """Saves case-trials as they finish, committing together those that finish together.

    `save` returns once its case-trial is committed, as a write of its own would; while one
    transaction is being written, the case-trials finishing meanwhile wait and go into the next
    one. With many in flight (an http task at concurrency 32), that is one transaction per
    batch instead of per case-trial, which SQLite's one writer at a time would otherwise
    serialise."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._pending: list[tuple[str, TrialRow, asyncio.Future[None]]] = []
        self._writing: asyncio.Task[None] | None = None

    async def save(self, experiment_id: str, trial: TrialRow) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((experiment_id, trial, done))
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._drain())
        await asyncio.shield(done)

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await save_trials(self.db, [(e, t) for e, t, _ in batch])
            except asyncio.CancelledError:
                for _, _, done in batch:
                    done.cancel()
                raise
            except Exception as exc:  # handed to each waiting `save`, which raises it
                for _, _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            for _, _, done in batch:
                if not done.done():
                    done.set_result(None)


@dataclass(frozen=True, slots=True)
class ClaimHolder:
    """Who holds an experiment's claim, and until when unless renewed."""

    holder: str
    until: datetime


async def claim_experiment(
    db: Database,
    experiment_id: str,
    holder: str,
    *,
    lease_s: float,
    replacing: str | None = None,
) -> ClaimHolder | None:
    """Claim the experiment for `holder` (one process) for `lease_s` seconds; None when it is
    now held by `holder`, else who else holds it.

    One conditional UPDATE of the experiment's `claimed_by` and `claimed_until`, so two
    processes claiming at once cannot both win: it takes a claim that is free, lapsed, already
    `holder`'s, or `replacing`'s (a holder the caller knows is dead). A live holder renews its
    lease (`renew_claim`); one killed with `kill -9` lets it lapse."""
    e = Experiment
    async with db.write() as s:
        now = utcnow()
        taken = await s.execute(
            update(e)
            .where(
                e.id == experiment_id,
                e.claimed_by.is_(None)
                | (e.claimed_by == holder)
                | (e.claimed_until <= now)
                | (e.claimed_by == (replacing or holder)),
            )
            .values(claimed_by=holder, claimed_until=now + timedelta(seconds=lease_s))
        )
        if getattr(taken, "rowcount", 0) == 1:
            return None
        found = (
            await s.execute(select(e.claimed_by, e.claimed_until).where(e.id == experiment_id))
        ).first()
    if found is None or found[0] is None or found[1] is None:
        raise RuntimeError(f"no experiment {experiment_id} to claim")
    return ClaimHolder(holder=found[0], until=found[1])


async def renew_claim(db: Database, experiment_id: str, holder: str, *, lease_s: float) -> bool:
    """Extend `holder`'s claim by `lease_s` from now; False when it no longer holds it."""
    async with db.write() as s:
        result = await s.execute(
            update(Experiment)
            .where(Experiment.id == experiment_id, Experiment.claimed_by == holder)
            .values(claimed_until=utcnow() + timedelta(seconds=lease_s))
        )
        return getattr(result, "rowcount", 0) == 1


async def release_claim(db: Database, experiment_id: str, holder: str) -> None:
    """Give the claim up, when `holder` still holds it."""
    async with db.write() as s:
        await s.execute(
            update(Experiment)
            .where(Experiment.id == experiment_id, Experiment.claimed_by == holder)
            .values(claimed_by=None, claimed_until=None)
        )


async def finish_experiment(db: Database, experiment_id: str) -> None:
    async with db.write() as s:
        await s.execute(
            update(Experiment)
            .where(Experiment.id == experiment_id, Experiment.finished_at.is_(None))
            .values(finished_at=utcnow())
        )


async def get_experiment(db: Database, experiment_id: str) -> ExperimentRow | None:
    async with db.read() as s:
        found = await s.get(Experiment, experiment_id)
        return None if found is None else _row(found)


async def ids_starting_with(db: Database, prefix: str, *, limit: int = 5) -> list[str]:
    """Experiment ids that start with `prefix` (a shortened id), at most `limit`."""
    return await column_starting_with(db, Experiment.id, prefix, limit=limit)


async def column_starting_with(
    db: Database, column: InstrumentedAttribute[str], prefix: str, *, limit: int
) -> list[str]:
    """The values of `column` (an id) that start with `prefix`, `%` and `_` in it taken as
    they are, in order, at most `limit`."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    async with db.read() as s:
        found = await s.scalars(
            select(column)
            .where(column.like(f"{escaped}%", escape="\\"))
            .order_by(column)
            .limit(limit)
        )
        return list(found)


async def list_experiments(db: Database, *, limit: int) -> list[ExperimentRow]:
    """The newest experiments first."""
    async with db.read() as s:
        found = await s.scalars(
            select(Experiment)
            .order_by(Experiment.created_at.desc(), Experiment.id.desc())
            .limit(limit)
        )
        return [_row(e) for e in found]


async def latest_aa_pair(db: Database, dataset_hash: str) -> tuple[str, str] | None:
    """The newest finished A/A pair (`exp aa`) run on this dataset, as its two ids."""
    async with db.read() as s:
        found = await s.scalar(
            select(Experiment)
            .where(
                Experiment.kind == "aa",
                Experiment.dataset_hash == dataset_hash,
                Experiment.finished_at.is_not(None),
                Experiment.pair_id.is_not(None),
            )
            .order_by(Experiment.created_at.desc(), Experiment.id.desc())
            .limit(1)
        )
        if found is None or found.pair_id is None:
            return None
        first, second = sorted([found.id, found.pair_id])
        return first, second


async def latest_unfinished(db: Database, name: str, *, kind: str) -> ExperimentRow | None:
    """The newest unfinished experiment of this name and kind ("run", "aa"): what `--resume`
    with no id continues."""
    async with db.read() as s:
        found = await s.scalar(
            select(Experiment)
            .where(
                Experiment.name == name,
                Experiment.kind == kind,
                Experiment.finished_at.is_(None),
            )
            .order_by(Experiment.created_at.desc(), Experiment.id.desc())
            .limit(1)
        )
        return None if found is None else _row(found)


async def trials_of(db: Database, experiment_id: str, *, grades: bool = True) -> list[TrialRow]:
    """Every saved case-trial of the experiment, in case and trial order, with its grades."""
    async with db.read() as s:
        rows = list(
            await s.scalars(
                select(ExperimentTrial)
                .where(ExperimentTrial.experiment_id == experiment_id)
                .order_by(ExperimentTrial.case_id, ExperimentTrial.trial)
            )
        )
        by_trial: dict[int, list[GradeRow]] = {}
        if grades and rows:
            found = await s.scalars(
                select(ExperimentGrade)
                .join(ExperimentTrial, ExperimentGrade.trial_pk == ExperimentTrial.pk)
                .where(ExperimentTrial.experiment_id == experiment_id)
                .order_by(ExperimentGrade.pk)
            )
            for g in found:
                by_trial.setdefault(g.trial_pk, []).append(GradeRow.of(g))
    return [
        TrialRow(
            case_id=t.case_id,
            trial=t.trial,
            status=t.status,
            error_kind=t.error_kind,
            error=t.error,
            output=t.output,
            passed=t.passed,
            attempts=t.attempts,
            latency_ms=t.latency_ms,
            cost_usd=t.cost_usd,
            started_at=t.started_at,
            finished_at=t.finished_at,
            grades=tuple(by_trial.get(t.pk, ())),
            seq_passed_at=t.seq_passed_at,
            seq_log=t.seq_log,
        )
        for t in rows
    ]


HUGE_COST = 1e300
"""Costs at or above this are summed in Python: below it, no experiment's sum can overflow a
double (it would take 10^8 case-trials), which on PostgreSQL is an error, not infinity."""


async def tally(db: Database, experiment_ids: list[str]) -> dict[str, Tally]:
    """Each experiment's counts, in one query: what `exp list` and `exp status` show."""
    t = ExperimentTrial
    huge = t.cost_usd >= HUGE_COST
    query = (
        select(
            t.experiment_id,
            func.count(),
            func.sum(case((t.error_kind == "infra", 1), else_=0)),
            func.sum(case((t.error_kind == "agent", 1), else_=0)),
            func.count(t.passed),
            func.sum(case((t.passed.is_(True), 1), else_=0)),
            func.coalesce(func.sum(case((huge, None), else_=t.cost_usd)), 0.0),
            func.count(t.cost_usd),
            func.min(t.started_at),
            func.max(t.finished_at),
            func.count(t.seq_passed_at),
            func.sum(case((huge, 1), else_=0)),
        )
        .where(t.experiment_id.in_(experiment_ids))
        .group_by(t.experiment_id)
    )
    async with db.read() as s:
        rows = (await s.execute(query)).all()
        costs = {row[0]: float(row[6] or 0.0) for row in rows}
        with_huge = [row[0] for row in rows if row[11]]
        if with_huge:
            found_huge = await s.execute(
                select(t.experiment_id, t.cost_usd).where(t.experiment_id.in_(with_huge), huge)
            )
            for experiment_id, cost in found_huge:
                if cost is not None:
                    costs[experiment_id] += cost
    found = {
        row[0]: Tally(
            done=row[1],
            infra_errors=int(row[2] or 0),
            agent_errors=int(row[3] or 0),
            graded=row[4],
            passed=int(row[5] or 0),
            cost_usd=costs[row[0]] if math.isfinite(costs[row[0]]) else None,
            priced=row[7],
            first_started_at=row[8],
            last_finished_at=row[9],
            seq_passed=row[10],
        )
        for row in rows
    }
    empty = Tally(0, 0, 0, 0, 0, 0.0, 0, None, None)
    return {experiment_id: found.get(experiment_id, empty) for experiment_id in experiment_ids}


@dataclass(frozen=True, slots=True)
class DatasetItemRow:
    id: str
    input: str
    expected_output: str | None
    metadata: dict[str, Any]


async def neens_dataset_items(db: Database, ref: str) -> tuple[str, list[DatasetItemRow]] | None:
    """The version `ref` names and its items in order: a `dsv_…` id itself, or a `ds_…`
    dataset's golden version (its newest when none is golden). None when the store has no such
    dataset, or the dataset has no version."""
    async with db.read() as s:
        if ref.startswith("dsv_"):
            version_id = await s.scalar(select(DatasetVersion.id).where(DatasetVersion.id == ref))
        else:
            golden = (
                select(GoldenMark.version_id)
                .where(GoldenMark.dataset_id == ref)
                .order_by(GoldenMark.id.desc())
                .limit(1)
            )
            version_id = await s.scalar(golden)
            if version_id is None:
                version_id = await s.scalar(
                    select(DatasetVersion.id)
                    .where(DatasetVersion.dataset_id == ref)
                    .order_by(DatasetVersion.number.desc())
                    .limit(1)
                )
        if version_id is None:
            return None
        items = await s.scalars(
            select(DatasetItem)
            .where(DatasetItem.version_id == version_id)
            .order_by(DatasetItem.position)
        )
        return version_id, [
            DatasetItemRow(i.id, i.input, i.expected_output, i.item_metadata) for i in items
        ]
