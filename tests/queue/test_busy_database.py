"""A worker outlives a database that is busy for a while: its claim loop ended on the first
`database is locked`, and jobs were never worked again until the server restarted."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any

import pytest

from neens.queue.worker import JobContext, Worker
from neens.store import db as db_module
from neens.store import jobs
from neens.store.db import Database


@pytest.mark.parametrize("dialect", ["sqlite"])
async def test_a_worker_waits_out_a_locked_database_and_then_works_its_jobs(
    database_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(db_module, "SQLITE_BUSY_TIMEOUT_MS", 100)
    db = Database(database_url)
    holder = sqlite3.connect(database_url.split(":///", 1)[1], isolation_level=None)
    try:
        async with db.write() as s:
            await jobs.enqueue(s, "test.done", {}, dedupe_key="one")
        holder.execute("BEGIN EXCLUSIVE")
        stop = asyncio.Event()
        done: list[str] = []

        async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
            done.append("done")
            stop.set()

        worker = Worker(db, {"test.done": handler}, poll_interval_s=0.05)
        with caplog.at_level(logging.WARNING, logger="neens.worker"):
            running = asyncio.create_task(worker.run(stop))
            await asyncio.sleep(1.0)  # several claims meet the lock
            assert not running.done() and done == []
            holder.execute("ROLLBACK")
            await asyncio.wait_for(running, timeout=20)
        assert done == ["done"]
        messages = [r.getMessage() for r in caplog.records]
        assert len(messages) == 2, messages  # once a streak, and the recovery
        assert "could not claim a job (database is locked)" in messages[0]
        assert messages[1] == "claiming jobs works again"
    finally:
        holder.close()
        await db.dispose()
