"""The jobs table: enqueue inside the caller's transaction, claim with a lease, finish or retry.

State machine of a job row::

    queued ──claim──▶ running ──complete──▶ done
       ▲                 │
       └──fail (retry)───┤──fail (attempts used up)──▶ failed
       └──lease expired──┘   (a worker died: the next claim takes the job again)

Why each rule:
- Enqueue happens in the same transaction as the state change that calls for the job, so a
  committed state change always has its job and a rolled-back one never does.
- `dedupe_key` is unique, so work that must be dispatched once (scoring a run) is, even when two
  requests race to dispatch it.
- A claim sets `lease_until`; the worker renews it while the job runs (heartbeat). A job whose
  lease ran out belongs to a dead worker and is claimable again, so nothing is lost when a
  server stops mid-job. Handlers are written to be re-run safely: they re-derive what is left
  to do from table state.
- On PostgreSQL, `FOR UPDATE SKIP LOCKED` lets any number of workers on any machines claim
  without blocking each other; SQLite serialises writers already.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from neens.store.db import Database, upsert_insert
from neens.store.models import Job
from neens.store.types import utcnow

MAX_ATTEMPTS = 5
"""A job that failed this many times stays failed, with its last error recorded."""


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    pk: int
    kind: str
    payload: dict[str, Any]
    attempts: int


async def enqueue(
    s: AsyncSession,
    kind: str,
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


async def claim(db: Database, worker: str, *, lease_s: float) -> ClaimedJob | None:
    """Take the oldest runnable job: queued and due, or running with an expired lease."""
    now = utcnow()
    async with db.write() as s:
        job = await s.scalar(
            select(Job)
            .where(
                or_(
                    (Job.status == "queued") & (Job.run_after <= now),
                    (Job.status == "running") & (Job.lease_until < now),
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


async def heartbeat(db: Database, pk: int, worker: str, *, lease_s: float) -> None:
    async with db.write() as s:
        await s.execute(
            update(Job)
            .where(Job.pk == pk, Job.worker == worker, Job.status == "running")
            .values(lease_until=utcnow() + timedelta(seconds=lease_s))
        )


async def complete(db: Database, pk: int, worker: str) -> None:
    async with db.write() as s:
        await s.execute(
            update(Job)
            .where(Job.pk == pk, Job.worker == worker)
            .values(status="done", finished_at=utcnow(), lease_until=None)
        )


async def fail(db: Database, pk: int, worker: str, error: str, attempts: int) -> None:
    """Record the error; retry later with exponential backoff until MAX_ATTEMPTS."""
    values: dict[str, Any] = {"last_error": error[:10_000], "lease_until": None}
    if attempts >= MAX_ATTEMPTS:
        values.update(status="failed", finished_at=utcnow())
    else:
        values.update(status="queued", run_after=utcnow() + timedelta(seconds=2**attempts))
    async with db.write() as s:
        await s.execute(update(Job).where(Job.pk == pk, Job.worker == worker).values(**values))


async def pending_count(db: Database) -> int:
    """Jobs not finished yet (queued or running)."""
    async with db.read() as s:
        rows = await s.scalars(select(Job.pk).where(Job.status.in_(("queued", "running"))))
        return len(list(rows))
