"""Pre-prod runs and their frozen items: create (with the snapshot), read, cancel, capture.

A run copies everything that defines it when it is created — the dataset version's items, the
connection's model and provider, the judge set, the baseline and the gate — and never re-reads
them, so a run means the same thing after the dataset or the connection is edited.

A `running` run always has a live job working on it (its push job while items are pending in
push mode, then its scoring job), except a runner-mode run waiting for traces. A job that fails
for good fails its run (`fail_run`), and `reconcile_runs`, swept by every worker, re-queues or
fails any run found without one, so no run stays `running` for ever.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import func, insert, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from neens.errors import Conflict, NotFound, Unprocessable
from neens.queue.jobs import LIVE, MAX_ATTEMPTS, enqueue, requeue
from neens.store.db import Database
from neens.store.ids import new_id
from neens.store.judges import resolve_run_judges
from neens.store.models import (
    AgentConnection,
    Dataset,
    DatasetItem,
    DatasetVersion,
    GoldenMark,
    Job,
    PreprodItem,
    PreprodRun,
    TraceSession,
)
from neens.store.sessions import untagged_traces_hint
from neens.store.types import storable_text, utcnow

log = logging.getLogger("neens.runs")

TERMINAL = ("completed", "completed_with_regressions", "failed", "cancelled")
RECONCILE_EVERY_S = 30.0
"""How often each worker looks for runs left without a job (and once when it starts)."""
RunJob = Literal["push", "scoring"]
WaitingOn = Literal["worker", "retry", "traces"]
RUN_JOBS: dict[RunJob, str] = {"push": "preprod.push", "scoring": "preprod.score"}
"""The jobs that work on a run, by the name the run detail uses for them."""


def refusal(exc: Exception) -> str:
    """What the database said when it refused a write, in one storable line: the driver's own
    message (`orig`), not SQLAlchemy's wrapping of it."""
    cause = getattr(exc, "orig", None) or exc
    text = str(cause).strip() or type(cause).__name__
    return storable_text(text.splitlines()[0][:300])


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
    status: str
    error: str | None
    item_count: int
    counts: dict[str, int]
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    waiting: Waiting | None = None


@dataclass(frozen=True, slots=True)
class RunItem:
    item_id: str
    position: int
    input: str
    expected_output: str | None
    status: str
    session_id: str | None
    error: str | None
    score: float | None
    passed: bool | None
    baseline_passed: bool | None


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
        dataset = await s.scalar(
            select(Dataset).where(Dataset.id == new.dataset_id, Dataset.project_id == project_id)
        )
        if dataset is None:
            raise NotFound(f"no dataset {new.dataset_id!r} in this project", field="dataset_id")
        version_id = new.dataset_version_id
        if version_id is None:
            version_id = await _golden_version(s, dataset.id)
            if version_id is None:
                raise Unprocessable(
                    f"dataset {dataset.id} has no golden version: mark one golden "
                    f"(POST /datasets/{dataset.id}/versions/<id>/golden) or pin "
                    "dataset_version_id",
                    field="dataset_id",
                )
        else:
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

        model: str | None = None
        provider: str | None = None
        if new.agent_connection_id is not None:
            connection = await s.scalar(
                select(AgentConnection).where(
                    AgentConnection.id == new.agent_connection_id,
                    AgentConnection.project_id == project_id,
                )
            )
            if connection is None:
                raise NotFound(
                    f"no agent connection {new.agent_connection_id!r} in this project",
                    field="agent_connection_id",
                )
            model, provider = connection.model, connection.provider

        if new.baseline is not None and new.baseline.get("kind") == "preprod_run":
            prior = await s.scalar(
                select(PreprodRun).where(
                    PreprodRun.id == new.baseline["value"], PreprodRun.project_id == project_id
                )
            )
            if prior is None:
                raise NotFound(
                    f"no pre-prod run {new.baseline['value']!r} in this project",
                    field="baseline.value",
                )
            if prior.dataset_version_id != version_id:
                raise Unprocessable(
                    f"baseline run {prior.id} replayed dataset version {prior.dataset_version_id}, "
                    f"this run replays {version_id}: a baseline must use the same golden version",
                    field="baseline.value",
                )

        judge_ids = await resolve_run_judges(s, project_id, new.judge_ids)
        run_id = new_id("ppr_")
        now = utcnow()
        pushing = new.runner_mode == "push"
        item_count = await s.scalar(
            select(func.count()).where(DatasetItem.version_id == version_id)
        )
        s.add(
            PreprodRun(
                id=run_id,
                project_id=project_id,
                name=new.name,
                dataset_id=dataset.id,
                dataset_version_id=version_id,
                version_label=new.version_label,
                runner_mode=new.runner_mode,
                agent_connection_id=new.agent_connection_id,
                model=model,
                model_provider=provider,
                judge_ids=judge_ids,
                baseline=new.baseline,
                gate=new.gate,
                status="running" if pushing else "awaiting_traces",
                item_count=item_count or 0,
                created_at=now,
                started_at=now if pushing else None,
            )
        )
        await s.flush()
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
        if pushing:
            await enqueue(
                s, RUN_JOBS["push"], {"run_id": run_id}, dedupe_key=job_key("push", run_id)
            )
    return run_id


def _run_query(project_id: str) -> Any:
    return select(PreprodRun).where(PreprodRun.project_id == project_id)


async def _counts(s: AsyncSession, run_ids: list[str]) -> dict[str, dict[str, int]]:
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
    )


async def _jobs(s: AsyncSession, run_ids: list[str]) -> dict[str, Job]:
    """The runs' push and scoring jobs, by dedupe key."""
    keys = [job_key(job, run_id) for run_id in run_ids for job in RUN_JOBS]
    if not keys:
        return {}
    rows = await s.scalars(select(Job).where(Job.dedupe_key.in_(keys)))
    return {job.dedupe_key: job for job in rows if job.dedupe_key is not None}


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
    names: tuple[RunJob, ...] = ("scoring", "push")
    live = [
        (name, job)
        for name in names
        if (job := jobs.get(job_key(name, row.id))) is not None and job.status in LIVE
    ]
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
            f"({_last_line(job.last_error)}); it is retried in {_ago(job.run_after, now)}",
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


def _last_line(error: str | None) -> str:
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no error recorded"


async def get_run(db: Database, project_id: str, run_id: str) -> RunInfo:
    async with db.read() as s:
        row = await s.scalar(_run_query(project_id).where(PreprodRun.id == run_id))
        if row is None:
            raise NotFound(f"no pre-prod run {run_id!r} in this project", field="run_id")
        info = _info(row, (await _counts(s, [row.id]))[row.id], await _jobs(s, [row.id]))
        waiting = info.waiting
        if waiting is not None and waiting.on == "traces":
            hint = await untagged_traces_hint(s, project_id, row.created_at)
            if hint is not None:
                waiting = dataclasses.replace(waiting, message=f"{waiting.message}; {hint}")
                info = dataclasses.replace(info, waiting=waiting)
        return info


async def list_runs(
    db: Database, project_id: str, *, limit: int, dataset_id: str | None = None
) -> list[RunInfo]:
    query = _run_query(project_id).order_by(PreprodRun.created_at.desc(), PreprodRun.id)
    if dataset_id is not None:
        query = query.where(PreprodRun.dataset_id == dataset_id)
    async with db.read() as s:
        rows = list(await s.scalars(query.limit(limit)))
        ids = [r.id for r in rows]
        counts = await _counts(s, ids)
        jobs = await _jobs(s, [r.id for r in rows if r.status not in TERMINAL])
        return [_info(r, counts[r.id], jobs) for r in rows]


async def list_items(db: Database, project_id: str, run_id: str) -> list[RunItem]:
    async with db.read() as s:
        exists = await s.scalar(_run_query(project_id).where(PreprodRun.id == run_id))
        if exists is None:
            raise NotFound(f"no pre-prod run {run_id!r} in this project", field="run_id")
        rows = await s.execute(
            select(PreprodItem, TraceSession.trace_id)
            .outerjoin(TraceSession, TraceSession.pk == PreprodItem.session_pk)
            .where(PreprodItem.run_id == run_id)
            .order_by(PreprodItem.position)
        )
        return [
            RunItem(
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
            )
            for i, trace_id in rows.all()
        ]


async def cancel_run(db: Database, project_id: str, run_id: str) -> None:
    """Cancel an unfinished run. Cancelled is terminal: no trace links to it afterwards."""
    async with db.write() as s:
        row = await s.scalar(
            _run_query(project_id).where(PreprodRun.id == run_id).with_for_update()
        )
        if row is None:
            raise NotFound(f"no pre-prod run {run_id!r} in this project", field="run_id")
        if row.status in TERMINAL:
            raise Conflict(f"run {run_id} is already {row.status}", field="run_id")
        row.status = "cancelled"
        row.completed_at = utcnow()


async def mark_item_error(s: AsyncSession, run_id: str, item_id: str, error: str) -> None:
    await s.execute(
        update(PreprodItem)
        .where(PreprodItem.run_id == run_id, PreprodItem.item_id == item_id)
        .values(status="error", error=storable_text(error))
    )


async def fail_run(db: Database, run_id: str, error: str) -> bool:
    """End a `running` run as `failed` with `error`; False when it had ended already."""
    async with db.write() as s:
        result = await s.execute(
            update(PreprodRun)
            .where(PreprodRun.id == run_id, PreprodRun.status == "running")
            .values(status="failed", error=storable_text(error), completed_at=utcnow())
        )
        return getattr(result, "rowcount", 0) == 1


def gave_up_reason(job: RunJob, error: str) -> str:
    return (
        f"Neens could not finish this run: its {job} job failed {MAX_ATTEMPTS} times "
        f"(last error: {error}); the worker's log has the details"
    )


async def reconcile_runs(db: Database) -> list[str]:
    """Give every `running` run without a live job one, or fail it with the reason.

    A run needs its push job while items are pending (push mode), then its scoring job. Such a
    job can be missing only when something went wrong between the steps (a worker died after a
    job failed for good but before it failed the run; a job row was lost). Runner-mode runs with
    pending items wait for traces, not for a job, and are left alone. Returns what was done, one
    line per run, for the log.
    """
    async with db.read() as s:
        running = dict(
            (
                await s.execute(
                    select(PreprodRun.id, PreprodRun.runner_mode).where(
                        PreprodRun.status == "running"
                    )
                )
            ).all()
        )
    done: list[str] = []
    ids = list(running)
    for start in range(0, len(ids), 200):
        chunk = ids[start : start + 200]
        async with db.read() as s:
            counts = await _counts(s, chunk)
            jobs = await _jobs(s, chunk)
        for run_id in chunk:
            if any(
                (job := jobs.get(job_key(name, run_id))) is not None and job.status in LIVE
                for name in RUN_JOBS
            ):
                continue
            if counts[run_id]["pending"] and running[run_id] != "push":
                continue
            action = await _reconcile_run(db, run_id)
            if action is not None:
                log.warning("run %s had no live job: %s", run_id, action)
                done.append(f"{run_id}: {action}")
    return done


async def _reconcile_run(db: Database, run_id: str) -> str | None:
    """`reconcile_runs` for one run, re-checked under the run's row lock."""
    async with db.write() as s:
        run = await s.scalar(select(PreprodRun).where(PreprodRun.id == run_id).with_for_update())
        if run is None or run.status != "running":
            return None
        jobs = await _jobs(s, [run_id])
        by_name = {name: jobs.get(job_key(name, run_id)) for name in RUN_JOBS}
        if any(job is not None and job.status in LIVE for job in by_name.values()):
            return None
        for name, job in by_name.items():
            if job is not None and job.status == "failed":
                run.status = "failed"
                run.error = storable_text(gave_up_reason(name, _last_line(job.last_error)))
                run.completed_at = utcnow()
                return f"failed, its {name} job had failed for good"
        pending = await s.scalar(
            select(func.count()).where(
                PreprodItem.run_id == run_id, PreprodItem.status == "pending"
            )
        )
        if pending:
            if run.runner_mode != "push":
                return None
            await requeue(
                s, RUN_JOBS["push"], {"run_id": run_id}, dedupe_key=job_key("push", run_id)
            )
            return f"push job queued again for {pending} pending items"
        run.scoring_dispatched_at = run.scoring_dispatched_at or utcnow()
        await requeue(
            s, RUN_JOBS["scoring"], {"run_id": run_id}, dedupe_key=job_key("scoring", run_id)
        )
        return "scoring job queued again"


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
        run = await s.scalar(
            _run_query(project_id).where(PreprodRun.id == run_id).with_for_update()
        )
        if run is None:
            raise NotFound(f"no pre-prod run {run_id!r} in this project", field="run_id")
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
            run.status = "running"
            run.started_at = utcnow()
        await s.flush()
        remaining = await s.scalar(
            select(func.count()).where(
                PreprodItem.run_id == run_id, PreprodItem.status == "pending"
            )
        )
        if remaining:
            return False
        return await dispatch_scoring_once(s, run_id)
