"""Pre-prod runs and their frozen items: create (with the snapshot), read, cancel, capture.

A run copies everything that defines it when it is created — the dataset version's items, the
connection's model and provider, the judge set, the baseline and the gate — and never re-reads
them, so a run means the same thing after the dataset or the connection is edited.

A `running` run always has a live job working on it (in push mode its push job, which also
scores the answers, then a scoring job only for answers it captured and did not judge; in runner
mode the scoring job), except a runner-mode run waiting for traces; keeping it so is
`neens.store.run_liveness`.

A little over 500 lines: the run detail's `waitingFor` reads the same job rows the create and
the item error enqueue, and keeping the two sides together keeps their job keys in one place.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import func, insert, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.run_lifecycle import TERMINAL, ItemStatus, RunStatus, refuse_imported
from neens.errors import Conflict, NotFound, Unprocessable
from neens.store.db import Database
from neens.store.ids import new_id
from neens.store.jobs import LIVE, MAX_ATTEMPTS, JobKind, enqueue
from neens.store.judges import resolve_run_judges
from neens.store.models import (
    DatasetItem,
    DatasetVersion,
    GoldenMark,
    Job,
    PreprodItem,
    PreprodRun,
    TraceSession,
)
from neens.store.run_lifecycle import move, open_run
from neens.store.session_reads import untagged_traces_hint
from neens.store.tenancy import CONNECTION, DATASET, RUN, in_project, owned
from neens.store.types import storable_text, utcnow

RECONCILE_EVERY_S = 30.0
"""How often each worker looks for runs left without a job (and once when it starts)."""
RunJob = Literal["push", "scoring"]
WaitingOn = Literal["worker", "retry", "traces"]
RUN_JOBS: dict[RunJob, JobKind] = {"push": JobKind.PREPROD_PUSH, "scoring": JobKind.PREPROD_SCORE}
"""The jobs that work on a run, by the name the run detail uses for them."""


def job_key(job: RunJob, run_id: str) -> str:
    """The dedupe key of a run's `push` or `scoring` job: one of each per run."""
    return f"{'push' if job == 'push' else 'score'}:{run_id}"


@dataclass(frozen=True, slots=True)
class NewRun:
    name: str
    dataset_id: str
    dataset_version_id: str | None
    version_label: str
    runner_mode: str
    agent_connection_id: str | None
    judge_ids: list[str] | None
    """None: the project's Primary Score."""
    baseline: dict[str, Any] | None
    gate: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Waiting:
    """What an unfinished run is waiting for, when no worker is working on it right now."""

    on: WaitingOn
    """`worker` (a job no worker holds), `retry` (a job failed and waits to be retried) or
    `traces` (a runner-mode run waiting for your runner)."""
    job: RunJob | None
    """The job waited on: `push` or `scoring`; None for traces, or when the run has no job."""
    since: datetime | None
    """Since when (queued, lease expired, or run started); for `retry`, when it is due."""
    message: str


@dataclass(frozen=True, slots=True)
class RunInfo:
    id: str
    name: str
    dataset_id: str
    dataset_version_id: str
    version_label: str
    runner_mode: str
    agent_connection_id: str | None
    model: str | None
    model_provider: str | None
    judge_ids: list[str]
    baseline: dict[str, Any] | None
    gate: dict[str, Any]
    status: RunStatus
    error: str | None
    item_count: int
    counts: dict[str, int]
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    waiting: Waiting | None = None
    imported: dict[str, Any] | None = None
    """An imported run's source and what its format cannot express; None on a driven run."""


@dataclass(frozen=True, slots=True)
class RunItem:
    item_id: str
    position: int
    input: str
    expected_output: str | None
    status: ItemStatus
    session_id: str | None
    error: str | None
    score: float | None
    passed: bool | None
    baseline_passed: bool | None
    output: str | None = None
    """An imported item's recorded answer; None on a driven run (its session holds it)."""
    trials: list[dict[str, Any]] | None = None
    """An imported item's result per repeat; None on a driven run."""


async def _golden_version(s: AsyncSession, dataset_id: str) -> str | None:
    return await s.scalar(
        select(GoldenMark.version_id)
        .where(GoldenMark.dataset_id == dataset_id)
        .order_by(GoldenMark.id.desc())
        .limit(1)
    )


async def create_run(db: Database, project_id: str, new: NewRun) -> str:
    """Validate references, freeze the item set and the connection's model; return the run id."""
    async with db.write() as s:
        return await create_run_in(s, project_id, new)


async def create_run_in(
    s: AsyncSession, project_id: str, new: NewRun, *, push_concurrency: int | None = None
) -> str:
    """`create_run` inside the caller's transaction (a sweep launches its child runs so);
    `push_concurrency` bounds the run's calls in flight instead of the server's setting."""
    dataset_id, version_id = await _replayed_version(s, project_id, new)
    model, provider = await _connection_model(s, project_id, new.agent_connection_id)
    await _check_baseline_run(s, project_id, new.baseline, version_id)
    judge_ids = await resolve_run_judges(s, project_id, new.judge_ids)
    run_id = new_id("ppr_")
    item_count = await s.scalar(select(func.count()).where(DatasetItem.version_id == version_id))
    open_run(
        s,
        PreprodRun(
            id=run_id,
            project_id=project_id,
            name=new.name,
            dataset_id=dataset_id,
            dataset_version_id=version_id,
            version_label=new.version_label,
            runner_mode=new.runner_mode,
            agent_connection_id=new.agent_connection_id,
            model=model,
            model_provider=provider,
            judge_ids=judge_ids,
            baseline=new.baseline,
            gate=new.gate,
            item_count=item_count or 0,
            created_at=utcnow(),
            push_concurrency=push_concurrency,
        ),
    )
    await s.flush()
    await _freeze_items(s, run_id, version_id)
    if new.runner_mode == "push":
        await enqueue(s, RUN_JOBS["push"], {"run_id": run_id}, dedupe_key=job_key("push", run_id))
    return run_id


async def _replayed_version(s: AsyncSession, project_id: str, new: NewRun) -> tuple[str, str]:
    """(dataset id, version id) the run replays: the pinned version, else the golden one."""
    return await resolve_replayed_version(s, project_id, new.dataset_id, new.dataset_version_id)


async def resolve_replayed_version(
    s: AsyncSession, project_id: str, dataset_id: str, version_id: str | None
) -> tuple[str, str]:
    """(dataset id, version id): `version_id` checked to be the dataset's, else the dataset's
    golden version."""
    dataset = await owned(s, DATASET, project_id, dataset_id)
    if version_id is None:
        version_id = await _golden_version(s, dataset.id)
        if version_id is None:
            raise Unprocessable(
                f"dataset {dataset.id} has no golden version: mark one golden "
                f"(POST /datasets/{dataset.id}/versions/<id>/golden) or pin "
                "dataset_version_id",
                field="dataset_id",
            )
        return dataset.id, version_id
    exists = await s.scalar(
        select(DatasetVersion.id).where(
            DatasetVersion.id == version_id, DatasetVersion.dataset_id == dataset.id
        )
    )
    if exists is None:
        raise NotFound(
            f"no version {version_id!r} in dataset {dataset.id}",
            field="dataset_version_id",
        )
    return dataset.id, version_id


async def _connection_model(
    s: AsyncSession, project_id: str, connection_id: str | None
) -> tuple[str | None, str | None]:
    """(model, provider) of the agent connection, frozen into the run; (None, None) without one."""
    if connection_id is None:
        return None, None
    connection = await owned(s, CONNECTION, project_id, connection_id, field="agent_connection_id")
    return connection.model, connection.provider


async def _check_baseline_run(
    s: AsyncSession, project_id: str, baseline: dict[str, Any] | None, version_id: str
) -> None:
    """A baseline run must exist in the project and have replayed the same dataset version."""
    if baseline is None or baseline.get("kind") != "preprod_run":
        return
    prior = await owned(s, RUN, project_id, baseline["value"], field="baseline.value")
    if prior.dataset_version_id != version_id:
        raise Unprocessable(
            f"baseline run {prior.id} replayed dataset version {prior.dataset_version_id}, "
            f"this run replays {version_id}: a baseline must use the same golden version",
            field="baseline.value",
        )


async def _freeze_items(s: AsyncSession, run_id: str, version_id: str) -> None:
    """Copy the version's items into the run, all pending, so later edits do not change it."""
    await s.execute(
        insert(PreprodItem).from_select(
            ["run_id", "item_id", "position", "input", "expected_output", "status"],
            select(
                literal(run_id),
                DatasetItem.id,
                DatasetItem.position,
                DatasetItem.input,
                DatasetItem.expected_output,
                literal("pending"),
            ).where(DatasetItem.version_id == version_id),
        )
    )


def _run_query(project_id: str) -> Any:
    return in_project(PreprodRun, project_id)


async def status_counts(s: AsyncSession, run_ids: list[str]) -> dict[str, dict[str, int]]:
    rows = await s.execute(
        select(PreprodItem.run_id, PreprodItem.status, func.count())
        .where(PreprodItem.run_id.in_(run_ids))
        .group_by(PreprodItem.run_id, PreprodItem.status)
    )
    counts: dict[str, dict[str, int]] = {
        r: {"pending": 0, "captured": 0, "scored": 0, "error": 0} for r in run_ids
    }
    for run_id, status, count in rows.all():
        counts[run_id][status] = count
    return counts


def _info(row: PreprodRun, counts: dict[str, int], jobs: dict[str, Job]) -> RunInfo:
    return RunInfo(
        row.id,
        row.name,
        row.dataset_id,
        row.dataset_version_id,
        row.version_label,
        row.runner_mode,
        row.agent_connection_id,
        row.model,
        row.model_provider,
        list(row.judge_ids),
        row.baseline,
        dict(row.gate),
        row.status,
        row.error,
        row.item_count,
        counts,
        row.created_at,
        row.started_at,
        row.completed_at,
        _waiting(row, counts, jobs, utcnow()),
        row.imported,
    )


async def jobs_of(s: AsyncSession, run_ids: list[str]) -> dict[str, Job]:
    """The runs' push and scoring jobs, by dedupe key."""
    keys = [job_key(job, run_id) for run_id in run_ids for job in RUN_JOBS]
    if not keys:
        return {}
    rows = await s.scalars(select(Job).where(Job.dedupe_key.in_(keys)))
    return {job.dedupe_key: job for job in rows if job.dedupe_key is not None}


def live_jobs(jobs: dict[str, Job], run_id: str) -> list[tuple[RunJob, Job]]:
    """The run's jobs still queued or running (from `jobs_of`), the later step first."""
    names: tuple[RunJob, ...] = ("scoring", "push")
    return [
        (name, job)
        for name in names
        if (job := jobs.get(job_key(name, run_id))) is not None and job.status in LIVE
    ]


def _waiting(
    row: PreprodRun, counts: dict[str, int], jobs: dict[str, Job], now: datetime
) -> Waiting | None:
    """Why an unfinished run is not moving right now, in words a person can act on."""
    if row.status in TERMINAL:
        return None
    pending = counts.get("pending", 0)
    if row.runner_mode != "push" and pending:
        return Waiting(
            "traces",
            None,
            row.started_at or row.created_at,
            f"waiting for your runner: {pending} item{'s' if pending != 1 else ''} "
            "still without a trace (report an item your agent cannot run as an item error)",
        )
    live = live_jobs(jobs, row.id)
    if not live:
        return Waiting(
            "worker",
            None,
            None,
            "no job is working on this run; a worker queues it again, or fails the run with "
            f"the reason, within {RECONCILE_EVERY_S:g} s",
        )
    name, job = live[0]
    if job.status == "running":
        if job.lease_until is None or job.lease_until >= now:
            return None
        return Waiting(
            "worker",
            name,
            job.lease_until,
            f"the worker holding the {name} job stopped renewing it {_ago(now, job.lease_until)} "
            "ago (it stopped or crashed); another worker takes the job over",
        )
    if job.run_after > now:
        return Waiting(
            "retry",
            name,
            job.run_after,
            f"the {name} job failed on attempt {job.attempts} of {MAX_ATTEMPTS} "
            f"({last_line(job.last_error)}); it is retried in {_ago(job.run_after, now)}",
        )
    return Waiting(
        "worker",
        name,
        job.run_after,
        f"the {name} job is queued and no worker has claimed it for {_ago(now, job.run_after)}: "
        "every worker is busy, or none is running (see Workers in the server guide)",
    )


def _ago(later: datetime, earlier: datetime) -> str:
    return f"{max(0.0, (later - earlier).total_seconds()):.0f} s"


def last_line(error: str | None) -> str:
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no error recorded"


async def get_run(db: Database, project_id: str, run_id: str) -> RunInfo:
    async with db.read() as s:
        row = await owned(s, RUN, project_id, run_id)
        info = _info(row, (await status_counts(s, [row.id]))[row.id], await jobs_of(s, [row.id]))
        waiting = info.waiting
        if waiting is not None and waiting.on == "traces":
            hint = await untagged_traces_hint(s, project_id, row.created_at)
            if hint is not None:
                waiting = dataclasses.replace(waiting, message=f"{waiting.message}; {hint}")
                info = dataclasses.replace(info, waiting=waiting)
        return info


RunKey = tuple[datetime, str]
"""Where a page of runs ends: its last run's `created_at` and id (the list's order)."""


async def list_runs(
    db: Database,
    project_id: str,
    *,
    limit: int,
    dataset_id: str | None = None,
    after: RunKey | None = None,
) -> tuple[list[RunInfo], RunKey | None]:
    """Newest first, from after `after`; returns the page and where it ends (None on the
    last page)."""
    query = _run_query(project_id).order_by(PreprodRun.created_at.desc(), PreprodRun.id.desc())
    if dataset_id is not None:
        query = query.where(PreprodRun.dataset_id == dataset_id)
    if after is not None:
        created, run_id = after
        query = query.where(
            (PreprodRun.created_at < created)
            | ((PreprodRun.created_at == created) & (PreprodRun.id < run_id))
        )
    async with db.read() as s:
        rows = list(await s.scalars(query.limit(limit + 1)))
        page = rows[:limit]
        ids = [r.id for r in page]
        counts = await status_counts(s, ids)
        jobs = await jobs_of(s, [r.id for r in page if r.status not in TERMINAL])
        infos = [_info(r, counts[r.id], jobs) for r in page]
    end = (page[-1].created_at, page[-1].id) if len(rows) > limit else None
    return infos, end


def _run_item(i: PreprodItem, trace_id: str | None) -> RunItem:
    return RunItem(
        i.item_id,
        i.position,
        i.input,
        i.expected_output,
        i.status,
        trace_id,
        i.error,
        i.score,
        i.passed,
        i.baseline_passed,
        i.output,
        i.trials,
    )


async def list_items(db: Database, project_id: str, run_id: str) -> list[RunItem]:
    """Every item of the run, in frozen order."""
    items, _ = await list_items_page(db, project_id, run_id, limit=None, after=None)
    return items


async def list_items_page(
    db: Database, project_id: str, run_id: str, *, limit: int | None, after: int | None
) -> tuple[list[RunItem], int | None]:
    """Up to `limit` items (all without one) in frozen order after position `after`; returns
    them and the last one's position when more follow (None on the last page)."""
    query = (
        select(PreprodItem, TraceSession.trace_id)
        .outerjoin(TraceSession, TraceSession.pk == PreprodItem.session_pk)
        .where(PreprodItem.run_id == run_id)
        .order_by(PreprodItem.position)
    )
    if after is not None:
        query = query.where(PreprodItem.position > after)
    if limit is not None:
        query = query.limit(limit + 1)
    async with db.read() as s:
        await owned(s, RUN, project_id, run_id)
        rows = (await s.execute(query)).all()
    page = rows if limit is None else rows[:limit]
    end = page[-1][0].position if limit is not None and len(rows) > limit else None
    return [_run_item(i, trace_id) for i, trace_id in page], end


async def cancel_run(db: Database, project_id: str, run_id: str) -> None:
    """Cancel an unfinished run. Cancelled is terminal: no trace links to it afterwards."""
    async with db.write() as s:
        row = await owned(s, RUN, project_id, run_id, for_update=True)
        refuse_imported(row.id, row.runner_mode, _tool(row), "cancelled")
        if row.status in TERMINAL:
            raise Conflict(f"run {run_id} is already {row.status}", field="run_id")
        await move(s, row, "cancelled")


def _tool(row: PreprodRun) -> str | None:
    tool = (row.imported or {}).get("tool")
    return tool if isinstance(tool, str) else None


async def mark_item_error(s: AsyncSession, run_id: str, item_id: str, error: str) -> None:
    await s.execute(
        update(PreprodItem)
        .where(PreprodItem.run_id == run_id, PreprodItem.item_id == item_id)
        .values(status="error", error=storable_text(error))
    )


async def dispatch_scoring_once(s: AsyncSession, run_id: str) -> bool:
    """Stamp the run's scoring dispatch and enqueue the job, unless it was done already.

    The conditional UPDATE is the guard: of two transactions capturing the last items at the
    same moment, only one sees the stamp unset.
    """
    result = await s.execute(
        update(PreprodRun)
        .where(PreprodRun.id == run_id, PreprodRun.scoring_dispatched_at.is_(None))
        .values(scoring_dispatched_at=utcnow())
    )
    if getattr(result, "rowcount", 0) != 1:
        return False
    await enqueue(s, RUN_JOBS["scoring"], {"run_id": run_id}, dedupe_key=job_key("scoring", run_id))
    return True


async def report_item_error(
    db: Database, project_id: str, run_id: str, item_id: str, reason: str
) -> bool:
    """Record that a runner-mode item could not be run (the agent command failed), so the run
    can finish with the failure counted instead of waiting for a trace that will never come.

    Returns True when this was the last pending item and scoring was dispatched.
    """
    async with db.write() as s:
        run = await owned(s, RUN, project_id, run_id, for_update=True)
        refuse_imported(run.id, run.runner_mode, _tool(run), "given an item error")
        if run.runner_mode != "runner":
            raise Conflict(
                f"run {run_id} is in push mode: Neens records its items' failures itself",
                field="run_id",
            )
        if run.status in TERMINAL:
            raise Conflict(f"run {run_id} is already {run.status}", field="run_id")
        item = await s.scalar(
            select(PreprodItem).where(PreprodItem.run_id == run_id, PreprodItem.item_id == item_id)
        )
        if item is None:
            raise NotFound(f"run {run_id} has no item {item_id!r}", field="item_id")
        if item.status != "pending":
            raise Conflict(
                f"item {item_id} is already {item.status}; only a pending item can be reported",
                field="item_id",
            )
        item.status = "error"
        item.error = reason
        if run.status == "awaiting_traces":
            await move(s, run, "running")
        await s.flush()
        remaining = await s.scalar(
            select(func.count()).where(
                PreprodItem.run_id == run_id, PreprodItem.status == "pending"
            )
        )
        if remaining:
            return False
        return await dispatch_scoring_once(s, run_id)
