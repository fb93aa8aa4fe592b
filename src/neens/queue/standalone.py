"""`neens worker`: the job loop as its own process, for servers sharing a PostgreSQL database.

Any number of these may run on any machines; they claim jobs from the same table (see
`queue.jobs`). Run API servers with `NEENS_WORKERS_IN_PROCESS=false` when they do the work.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import httpx

from neens.engine.destinations import guarded_client
from neens.engine.handlers import HANDLERS
from neens.queue.worker import Worker
from neens.secrets import load_secret_box
from neens.settings import Settings
from neens.store import migrate
from neens.store.db import Database
from neens.store.secrets import reencrypt

log = logging.getLogger("neens.worker")


async def run_worker(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Work until SIGINT/SIGTERM (or `stop`), then finish the jobs in hand."""
    url = settings.resolved_database_url()
    if settings.migrate_on_start:
        await migrate.upgrade(url)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    db = Database(url)
    try:
        db.secrets = load_secret_box(settings)
        await reencrypt(db, rotate=False)
        async with guarded_client(
            allow_private=settings.allow_private_destinations,
            timeout=httpx.Timeout(settings.push_timeout_s),
        ) as http:
            worker = Worker(
                db,
                HANDLERS,
                services={"http": http, "settings": settings},
                concurrency=settings.worker_concurrency,
            )
            log.info("worker %s started", worker.name)
            await worker.run(stop)
    finally:
        await db.dispose()
