"""Leases: short, renewed while a handler runs, taken over only from a worker that stopped
renewing, and released when a worker stops."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import select

from neens.queue.worker import JobContext, Worker
from neens.store import jobs
from neens.store.db import Database
from neens.store.models import Job


async def _enqueue(db: Database, kind: str = "test.wait") -> int:
    async with db.write() as s:
        await jobs.enqueue(s, kind, {}, dedupe_key=kind)
    async with db.read() as s:
        pk = await s.scalar(select(Job.pk).where(Job.dedupe_key == kind))
    assert pk is not None
    return pk


async def _job(db: Database, pk: int) -> Job:
    async with db.read() as s:
        job = await s.get(Job, pk)
    assert job is not None
    return job


async def test_an_expired_lease_is_taken_over_by_another_worker_never_by_its_own(
    db: Database,
) -> None:
    await _enqueue(db)
    assert await jobs.claim(db, "a", lease_s=-1.0) is not None
    assert await jobs.claim(db, "a", lease_s=5.0) is None  # its own job is still running
    taken = await jobs.claim(db, "b", lease_s=5.0)
    assert taken is not None and taken.attempts == 2
    assert await jobs.renew(db, [taken.pk], "a", lease_s=5.0) == set()
    assert await jobs.renew(db, [taken.pk], "b", lease_s=5.0) == {taken.pk}


async def test_a_running_handler_keeps_its_job_past_the_lease_and_completes_it_once(
    db: Database,
) -> None:
    pk = await _enqueue(db)
    stop = asyncio.Event()
    calls = 0

    async def slow(ctx: JobContext, payload: dict[str, Any]) -> None:
        nonlocal calls
        calls += 1
        for _ in range(25):  # 2.5 leases
            await asyncio.sleep(0.1)
            assert await jobs.claim(ctx.db, "other", lease_s=1.0) is None
        stop.set()

    worker = Worker(db, {"test.wait": slow}, lease_s=1.0, poll_interval_s=0.05)
    await asyncio.wait_for(worker.run(stop), timeout=20)
    job = await _job(db, pk)
    assert (calls, job.status, job.attempts) == (1, "done", 1)


async def test_a_worker_whose_job_was_taken_over_abandons_it(db: Database) -> None:
    pk = await _enqueue(db)
    stop = asyncio.Event()
    started = asyncio.Event()
    outcome: list[str] = []

    async def wait(ctx: JobContext, payload: dict[str, Any]) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
            outcome.append("finished")
        except asyncio.CancelledError:
            outcome.append("abandoned")
            stop.set()
            raise

    worker = Worker(db, {"test.wait": wait}, lease_s=1.0, poll_interval_s=0.05)
    running = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(started.wait(), timeout=10)
    async with db.write() as s:  # as if its lease had run out and another worker claimed it
        job = await s.get(Job, pk)
        assert job is not None
        job.worker = "other"
    await asyncio.wait_for(running, timeout=10)
    job = await _job(db, pk)
    assert outcome == ["abandoned"]
    assert (job.status, job.worker) == ("running", "other")  # left to its new owner


async def test_a_stopping_worker_releases_its_job_for_any_worker_at_once(db: Database) -> None:
    pk = await _enqueue(db)
    stop = asyncio.Event()
    started = asyncio.Event()

    async def wait(ctx: JobContext, payload: dict[str, Any]) -> None:
        started.set()
        await asyncio.sleep(30)

    worker = Worker(db, {"test.wait": wait}, lease_s=60.0, poll_interval_s=0.05)
    running = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(started.wait(), timeout=10)
    stop.set()
    await asyncio.wait_for(running, timeout=5)
    job = await _job(db, pk)
    assert (job.status, job.attempts, job.worker, job.lease_until) == ("queued", 0, None, None)
    again = await jobs.claim(db, "next", lease_s=5.0)
    assert again is not None and again.pk == pk and again.attempts == 1


async def test_the_sweep_runs_when_the_worker_starts(db: Database) -> None:
    stop = asyncio.Event()
    swept: list[float] = []

    async def sweep(ctx: JobContext) -> None:
        swept.append(asyncio.get_running_loop().time())
        if len(swept) == 2:
            stop.set()

    worker = Worker(db, {}, sweep=sweep, sweep_every_s=0.2, poll_interval_s=0.05)
    await asyncio.wait_for(worker.run(stop), timeout=10)
    assert len(swept) == 2
    assert swept[1] - swept[0] >= 0.2
