"""The jobs table: enqueue inside the caller's transaction, claim with a lease, finish or retry.

State machine of a job row::

    queued ──claim──▶ running ──complete──▶ done
       ▲                 │
       ├──fail (retry)───┤──fail (attempts used up)──▶ failed
       ├──release────────┤   (the worker stopped: SIGTERM; the attempt does not count)
       └──lease expired──┘   (the worker died: the next claim by another worker takes it)
    done / failed ──requeue──▶ queued   (a run left without a live job, see store.run_liveness)
    done / failed ──prune──▶ deleted    (finished longer ago than NEENS_JOBS_RETENTION_DAYS)

Why each rule:
- Enqueue happens in the same transaction as the state change that calls for the job, so a
  committed state change always has its job and a rolled-back one never does.
- `dedupe_key` is unique, so work that must be dispatched once (scoring a run) is, even when two
  requests race to dispatch it. Re-dispatching it means `requeue`, which reuses the row.
- A claim sets a short `lease_until` (seconds, `NEENS_WORKER_LEASE_S`); the worker renews the
  leases of every job it holds several times per lease, in one statement. A job whose lease ran
  out belongs to a worker that stopped renewing (it died, or its machine did), so another worker
  may claim it: a crashed worker's work resumes within seconds. A worker never re-claims its own
  expired job, and a worker that finds a job no longer its own on renewal abandons it, so one job
  is not worked twice at once. Handlers are written to be re-run safely: they re-derive what is
  left to do from table state.
- A stopping worker releases the jobs in hand instead of finishing them, so a stop is quick and
  the job is at once claimable by another worker.
- On PostgreSQL, `FOR UPDATE SKIP LOCKED` lets any number of workers on any machines claim
  without blocking each other; SQLite serialises writers already. Lease times come from the
  workers' clocks, which must agree to well within a lease (NTP does).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from neens.store.db import Database, upsert_insert
from neens.store.models import Job
from neens.store.types import utcnow


class JobKind(StrEnum):
    """Every kind of job Neens queues; the value is what the jobs table stores."""

    PREPROD_PUSH = "preprod.push"
    """Call the agent for each pending item of a push-mode run."""
    PREPROD_SCORE = "preprod.score"
    """Judge a run's captured items, then finish the run."""
    NOTIFY_DELIVER = "notify.deliver"
    """Send one insight to one notification sink."""
    PRODUCTION_SCORE = "production.score"
    """Score one production session with the judges that score production."""
    RUN_FINISHED = "run.finished"
    """A run reached a terminal status: run what waits for finished runs."""


MAX_ATTEMPTS = 5
"""A job that failed this many times stays failed, with its last error recorded."""


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    pk: int
    kind: str
    payload: dict[str, Any]
    attempts: int


LIVE = ("queued", "running")
"""Job statuses that a worker will still act on."""


async def enqueue(
    s: AsyncSession,
    kind: JobKind,
    payload: dict[str, Any],
    *,
    dedupe_key: str | None = None,
    delay_s: float = 0.0,
) -> None:
    """Add a job in the caller's transaction. With `dedupe_key`, a second enqueue is a no-op."""
    statement = upsert_insert(s, Job).values(
        kind=kind,
        payload=payload,
        dedupe_key=dedupe_key,
        status="queued",
        attempts=0,
        run_after=utcnow() + timedelta(seconds=delay_s),
        created_at=utcnow(),
    )
    if dedupe_key is not None:
        statement = statement.on_conflict_do_nothing(index_elements=["dedupe_key"])
    await s.execute(statement)


async def requeue(
    s: AsyncSession, kind: JobKind, payload: dict[str, Any], *, dedupe_key: str
) -> None:
    """Queue the job of `dedupe_key` again with fresh attempts, reusing its finished row, or add
    it when there is none. A job still queued or running is left as it is."""
    result = await s.execute(
        update(Job)
        .where(Job.dedupe_key == dedupe_key, Job.status.in_(("done", "failed")))
        .values(
            status="queued",
            attempts=0,
            run_after=utcnow(),
            lease_until=None,
            worker=None,
            finished_at=None,
        )
    )
    if getattr(result, "rowcount", 0) == 0:
        await enqueue(s, kind, payload, dedupe_key=dedupe_key)


async def claim(db: Database, worker: str, *, lease_s: float) -> ClaimedJob | None:
    """Take the oldest runnable job: queued and due, or running with a lease another worker
    let expire. The time is read once the write lock is held: a claim that waited for it must
    neither see leases as live that ran out meanwhile nor grant one already partly spent."""
    async with db.write() as s:
        now = utcnow()
        job = await s.scalar(
            select(Job)
            .where(
                or_(
                    (Job.status == "queued") & (Job.run_after <= now),
                    (Job.status == "running") & (Job.lease_until < now) & (Job.worker != worker),
                )
            )
            .order_by(Job.run_after, Job.pk)
            .limit(1)
            .with_for_update(skip_locked=True)
        )
        if job is None:
            return None
        job.status = "running"
        job.worker = worker
        job.attempts += 1
        job.lease_until = now + timedelta(seconds=lease_s)
        return ClaimedJob(job.pk, job.kind, dict(job.payload), job.attempts)


async def renew(db: Database, pks: Collection[int], worker: str, *, lease_s: float) -> set[int]:
    """Extend the leases of the jobs `worker` holds, in one statement; returns the pks still
    held (a job missing from it was taken over by another worker after its lease expired)."""
    if not pks:
        return set()
    async with db.write() as s:
        held = await s.scalars(
            update(Job)
            .where(Job.pk.in_(list(pks)), Job.worker == worker, Job.status == "running")
            .values(lease_until=utcnow() + timedelta(seconds=lease_s))
            .returning(Job.pk)
        )
        return set(held)


async def release(db: Database, pk: int, worker: str) -> None:
    """Give a job back unfinished (the worker is stopping): claimable at once, attempt uncounted."""
    async with db.write() as s:
        await s.execute(
            update(Job)
            .where(Job.pk == pk, Job.worker == worker, Job.status == "running")
            .values(
                status="queued",
                attempts=Job.attempts - 1,
                run_after=utcnow(),
                lease_until=None,
                worker=None,
            )
        )


async def complete(db: Database, pk: int, worker: str) -> None:
    async with db.write() as s:
        await s.execute(
            update(Job)
            .where(Job.pk == pk, Job.worker == worker)
            .values(status="done", finished_at=utcnow(), lease_until=None)
        )


async def fail(db: Database, pk: int, worker: str, error: str, attempts: int) -> bool:
    """Record the error; retry later with exponential backoff until MAX_ATTEMPTS. Returns True
    when the job failed for good (and this worker still held it)."""
    gives_up = attempts >= MAX_ATTEMPTS
    values: dict[str, Any] = {"last_error": error[:10_000], "lease_until": None}
    if gives_up:
        values.update(status="failed", finished_at=utcnow())
    else:
        values.update(status="queued", run_after=utcnow() + timedelta(seconds=2**attempts))
    async with db.write() as s:
        result = await s.execute(
            update(Job).where(Job.pk == pk, Job.worker == worker).values(**values)
        )
    return gives_up and getattr(result, "rowcount", 0) == 1


async def prune(db: Database, *, finished_before: datetime, limit: int = 5_000) -> int:
    """Delete up to `limit` finished jobs (done or failed) that finished before the cutoff, the
    oldest first; the number deleted. A job still queued or running is never touched, and a
    finished job's row is kept long enough (`NEENS_JOBS_RETENTION_DAYS`) that its `dedupe_key`
    still turns away a late duplicate of work just done."""
    async with db.write() as s:
        oldest = (
            select(Job.pk)
            .where(Job.status.in_(("done", "failed")), Job.finished_at < finished_before)
            .order_by(Job.pk)
            .limit(limit)
        )
        result = await s.execute(delete(Job).where(Job.pk.in_(oldest.scalar_subquery())))
        return int(getattr(result, "rowcount", 0) or 0)


async def pending_count(db: Database) -> int:
    """Jobs not finished yet (queued or running)."""
    async with db.read() as s:
        rows = await s.scalars(select(Job.pk).where(Job.status.in_(("queued", "running"))))
        return len(list(rows))
