"""`neens worker`: the job loop as its own process, for servers sharing a PostgreSQL database.

Any number of these may run on any machines; they claim jobs from the same table (see
`store.jobs`). Run API servers with `NEENS_WORKERS_IN_PROCESS=false` when they do the work.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from neens.engine.destinations import without_url_secrets
from neens.engine.handlers import open_worker
from neens.secrets import load_secret_box
from neens.settings import Settings
from neens.store import migrate
from neens.store.db import Database
from neens.store.secrets import reencrypt

log = logging.getLogger("neens.worker")


class _PerCallIsDebug(logging.Filter):
    """httpx logs every request at INFO; a worker makes one per agent or judge call, thousands a
    run, so here they are DEBUG: shown with `--log-level debug`, not at the default `info`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


_PER_CALL_IS_DEBUG = _PerCallIsDebug()


class _UrlsWithoutSecrets(logging.Filter):
    """httpx and httpx2 (the `openai` client's) log each request's URL whole, userinfo and query
    string included, where an agent connection or a judge endpoint may keep its credentials;
    the worker's log shows it without them (`destinations.shown_url`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                without_url_secrets(str(arg)) if "://" in str(arg) else arg for arg in record.args
            )
        if isinstance(record.msg, str) and "://" in record.msg:
            record.msg = without_url_secrets(record.msg)
        return True


_URLS_WITHOUT_SECRETS = _UrlsWithoutSecrets()


def shape_http_logs() -> None:
    """Install the filters above on the HTTP clients' loggers (once, however often called)."""
    logging.getLogger("httpx").addFilter(_PER_CALL_IS_DEBUG)
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).addFilter(_URLS_WITHOUT_SECRETS)


async def run_worker(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Work until SIGINT/SIGTERM (or `stop`), then release the jobs in hand to other workers."""
    url = settings.resolved_database_url()
    if settings.migrate_on_start:
        await migrate.upgrade(url)
    else:
        await migrate.require_current(url)
    shape_http_logs()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    db = Database(url)
    try:
        db.secrets = load_secret_box(settings)
        await reencrypt(db, rotate=False)
        async with open_worker(db, settings) as worker:
            log.info("worker %s started", worker.name)
            await worker.run(stop)
            log.info("worker %s stopped", worker.name)
    finally:
        await db.dispose()
