"""What a job's handler is handed: the worker's settings and its one outbound client, typed."""

from __future__ import annotations

import httpx
import pytest

from neens.engine.handlers import open_worker
from neens.queue.worker import JobContext, Worker
from neens.settings import Settings
from neens.store.db import Database


async def test_the_assembled_worker_hands_jobs_its_settings_and_client(
    db: Database, settings: Settings
) -> None:
    async with open_worker(db, settings) as worker:
        assert worker.context.settings is settings
        assert isinstance(worker.context.http, httpx.AsyncClient)
        assert not worker.context.http.is_closed
    assert worker.context.http.is_closed  # the pool lives as long as the worker


@pytest.mark.parametrize("dialect", ["sqlite"])
async def test_a_bare_worker_says_how_to_get_what_a_job_asked_for(db: Database) -> None:
    context = Worker(db, {}).context
    with pytest.raises(RuntimeError, match="started without settings: build it with .*open_worker"):
        _ = context.settings
    with pytest.raises(RuntimeError, match="started without an outbound HTTP client"):
        _ = JobContext(db).http
