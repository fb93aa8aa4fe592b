"""Finished jobs are deleted once past their retention, and nothing else ever is."""

from __future__ import annotations

from datetime import timedelta

import httpx
from sqlalchemy import insert, select

from neens.engine.agent_client import AgentClient
from neens.engine.handlers import make_worker
from neens.settings import Settings
from neens.store import jobs
from neens.store.db import Database
from neens.store.models import Job
from neens.store.types import utcnow


async def _add(db: Database, key: str, status: str, finished_days_ago: float | None) -> None:
    now = utcnow()
    finished = None if finished_days_ago is None else now - timedelta(days=finished_days_ago)
    async with db.write() as s:
        await s.execute(
            insert(Job).values(
                kind="test.kind",
                payload={},
                dedupe_key=key,
                status=status,
                attempts=0,
                run_after=now - timedelta(days=30),
                created_at=now - timedelta(days=30),
                finished_at=finished,
            )
        )


async def _keys(db: Database) -> set[str]:
    async with db.read() as s:
        return {str(k) for k in await s.scalars(select(Job.dedupe_key))}


async def _seed(db: Database) -> None:
    await _add(db, "done-old", "done", 8)
    await _add(db, "failed-old", "failed", 9)
    await _add(db, "done-new", "done", 1)
    await _add(db, "failed-new", "failed", 0.1)
    await _add(db, "queued-old", "queued", None)  # waiting a month: still work to do
    await _add(db, "running-old", "running", None)


async def test_only_finished_jobs_past_the_cutoff_are_deleted(db: Database) -> None:
    await _seed(db)
    deleted = await jobs.prune(db, finished_before=utcnow() - timedelta(days=7))
    assert deleted == 2
    assert await _keys(db) == {"done-new", "failed-new", "queued-old", "running-old"}
    assert await jobs.prune(db, finished_before=utcnow() - timedelta(days=7)) == 0


async def test_a_limit_deletes_the_oldest_first(db: Database) -> None:
    for n in range(5):
        await _add(db, f"done-{n}", "done", 10 + n)
    assert await jobs.prune(db, finished_before=utcnow(), limit=2) == 2
    assert await _keys(db) == {"done-2", "done-3", "done-4"}, "the first rows added go first"


async def test_a_workers_periodic_sweep_prunes_by_the_retention_setting(
    db: Database, database_url: str
) -> None:
    await _seed(db)
    settings = Settings(database_url=database_url, jobs_retention_days=2)
    async with httpx.AsyncClient() as http, AgentClient(allow_private=True) as agents:
        worker = make_worker(db, settings, http, agents)
        assert worker.sweep is not None
        await worker.sweep(worker.context)
        assert await _keys(db) == {"done-new", "failed-new", "queued-old", "running-old"}
        await _add(db, "done-3-days", "done", 3)
        await worker.sweep(worker.context)  # within the hour: no second prune yet
    assert "done-3-days" in await _keys(db)
