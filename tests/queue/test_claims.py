"""Claims from several processes: each job is taken by one worker, however the claims interleave.

Each `Database` here stands for a process of its own (`neens serve` and `neens worker`s on one
database): separate engines and connections, and on SQLite separate in-process write locks, so
only the database itself keeps them apart.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import select

from neens.store import jobs
from neens.store.db import Database
from neens.store.models import Job
from neens.store.types import utcnow


async def _enqueue(db: Database, count: int) -> None:
    async with db.write() as s:
        for n in range(count):
            await jobs.enqueue(s, jobs.JobKind.NOTIFY_DELIVER, {"n": n}, dedupe_key=f"claims:{n}")


async def test_what_a_sqlite_write_block_reads_cannot_change_before_it_commits(
    database_url: str, dialect: str
) -> None:
    """A write block holds SQLite's write lock from its first statement: another process's claim
    waits for it, then sees the job as this block left it. (Python's sqlite3 module begins a
    transaction only at the first INSERT or UPDATE, so without `BEGIN IMMEDIATE` the other claim
    ran between this block's read and its write, and both took the job.)"""
    if dialect != "sqlite":
        pytest.skip("PostgreSQL's claim locks the row it reads (FOR UPDATE SKIP LOCKED)")
    here, elsewhere = Database(database_url), Database(database_url)
    try:
        await _enqueue(here, 1)
        async with here.write() as s:
            job = await s.scalar(select(Job))
            assert job is not None and job.status == "queued"
            other = asyncio.create_task(jobs.claim(elsewhere, "elsewhere", lease_s=5.0))
            await asyncio.sleep(0.5)
            assert not other.done(), "the other process read while this block held the lock"
            job.status, job.worker, job.attempts = "running", "here", 1
            job.lease_until = utcnow() + timedelta(seconds=5)
        assert await asyncio.wait_for(other, timeout=15) is None
        async with here.read() as s:
            row = (await s.execute(select(Job.worker, Job.attempts))).one()
        assert tuple(row) == ("here", 1)
    finally:
        await here.dispose()
        await elsewhere.dispose()


async def test_workers_in_two_processes_never_claim_the_same_job(database_url: str) -> None:
    handles = [Database(database_url), Database(database_url)]
    try:
        await _enqueue(handles[0], 60)
        claimed: list[tuple[str, int]] = []

        async def claimer(db: Database, name: str) -> None:
            while (job := await jobs.claim(db, name, lease_s=60.0)) is not None:
                claimed.append((name, job.pk))

        await asyncio.wait_for(
            asyncio.gather(
                *(claimer(db, f"p{p}:w{w}") for p, db in enumerate(handles) for w in range(6))
            ),
            timeout=60,
        )
        taken = Counter(pk for _, pk in claimed)
        assert len(taken) == 60 and set(taken.values()) == {1}, taken
        assert {name.split(":")[0] for name, _ in claimed} == {"p0", "p1"}
        async with handles[0].read() as s:
            rows = (await s.execute(select(Job.pk, Job.worker, Job.attempts))).all()
        assert {(pk, worker) for pk, worker, _ in rows} == {(pk, n) for n, pk in claimed}
        assert {attempts for _, _, attempts in rows} == {1}
    finally:
        for db in handles:
            await db.dispose()
