"""Which function does each kind of job, what a job that fails for good leaves behind, and the
one place a worker is assembled (for `neens serve` and `neens worker` alike)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx

from neens.engine.agent_client import AgentClient
from neens.engine.destinations import guarded_client
from neens.engine.notify import deliver
from neens.engine.production import score_production_session
from neens.engine.push import run_push
from neens.engine.run_finished import run_finished
from neens.engine.scoring import score_run
from neens.engine.sweeps import roll_up_parent_sweep
from neens.queue.worker import GiveUp, Handler, JobContext, Sweep, Worker
from neens.settings import Settings
from neens.store.db import Database
from neens.store.jobs import JobKind, prune
from neens.store.run_liveness import fail_run, gave_up_reason, reconcile_runs
from neens.store.runs import RECONCILE_EVERY_S, RunJob
from neens.store.types import utcnow

log = logging.getLogger(__name__)

FINISH_HOOKS = (roll_up_parent_sweep,)
"""Registered with `run_finished.on_run_finished` on import: a sweep rolls up as its runs end."""

HANDLERS: dict[str, Handler] = {
    JobKind.PREPROD_PUSH: run_push,
    JobKind.PREPROD_SCORE: score_run,
    JobKind.NOTIFY_DELIVER: deliver,
    JobKind.PRODUCTION_SCORE: score_production_session,
    JobKind.RUN_FINISHED: run_finished,
}


def _fails_its_run(job: RunJob) -> GiveUp:
    async def give_up(ctx: JobContext, payload: dict[str, Any], error: str) -> None:
        await fail_run(ctx.db, str(payload["run_id"]), gave_up_reason(job, error))

    return give_up


GIVE_UP: dict[str, GiveUp] = {
    JobKind.PREPROD_PUSH: _fails_its_run("push"),
    JobKind.PREPROD_SCORE: _fails_its_run("scoring"),
}
"""Job kinds that own a run: when one fails for good, its run ends `failed` with the reason."""


PRUNE_EVERY_S = 3600.0
"""How often a worker deletes finished jobs past their retention (`jobs.prune`)."""


def _periodic(settings: Settings) -> Sweep:
    """A worker's periodic work: runs left without a live job get one (every sweep), and
    finished jobs past `jobs_retention_days` are deleted (about once an hour)."""
    last_prune = -math.inf

    async def sweep(ctx: JobContext) -> None:
        nonlocal last_prune
        if await reconcile_runs(ctx.db):
            ctx.notify()
        if time.monotonic() - last_prune >= PRUNE_EVERY_S:
            last_prune = time.monotonic()
            cutoff = utcnow() - timedelta(days=settings.jobs_retention_days)
            while (deleted := await prune(ctx.db, finished_before=cutoff)) > 0:
                log.info("deleted %d finished jobs older than %s", deleted, cutoff.isoformat())

    return sweep


@asynccontextmanager
async def open_worker(db: Database, settings: Settings) -> AsyncIterator[Worker]:
    """The worker `neens serve` runs in process and `neens worker` runs alone: the same job
    kinds, lease, sweep and outbound clients (guarded destinations, one pool each)."""
    async with (
        guarded_client(
            allow_private=settings.allow_private_destinations,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
            timeout=httpx.Timeout(settings.push_timeout_s),
        ) as http,
        AgentClient(allow_private=settings.allow_private_destinations) as agents,
    ):
        yield make_worker(db, settings, http, agents)


def make_worker(
    db: Database, settings: Settings, http: httpx.AsyncClient, agents: AgentClient
) -> Worker:
    """A worker with every job kind, its lease and its sweep for runs left without a job."""
    return Worker(
        db,
        HANDLERS,
        settings=settings,
        http=http,
        agents=agents,
        concurrency=settings.worker_concurrency,
        lease_s=settings.worker_lease_s,
        on_give_up=GIVE_UP,
        sweep=_periodic(settings),
        sweep_every_s=RECONCILE_EVERY_S,
    )
