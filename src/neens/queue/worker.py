"""The worker loop: claims jobs from the table and runs their handlers, a few at a time.

It runs inside `neens serve` by default and as `neens worker` processes at scale; both are this
same loop against the same table. An in-process `notify()` wakes it at once after an enqueue;
otherwise it polls, so jobs enqueued by other processes are picked up too.

Beside the jobs, two background tasks: one renews the leases of every job in hand (several times
per lease, so a live worker never loses a job and a dead one's jobs are free within a lease), and
an optional sweep runs at start and every `sweep_every_s` (it finds runs left without a job).

Stopping (SIGTERM, or the server shutting down) abandons the jobs in hand rather than finishing
them: their handlers are cancelled (an agent call in flight is dropped), each job is released
back to the queue, and another worker resumes it from table state. A push job stores the answers
it already received before it lets go, so those items are not called again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import httpx

from neens.settings import Settings
from neens.store import jobs
from neens.store.busy import busy_database_reason
from neens.store.db import Database

log = logging.getLogger("neens.worker")

DEFAULT_LEASE_S = 5.0
"""How long a claimed job stays a worker's without renewal (`NEENS_WORKER_LEASE_S`)."""
RENEWALS_PER_LEASE = 5
"""Lease renewals per lease: a renewal may be late four times in a row before the job is lost."""


class AgentPoster(Protocol):
    """The outbound client for agent calls (`neens.engine.agent_client.AgentClient`)."""

    async def post_json(
        self, url: str, body: bytes, headers: dict[str, str], *, max_bytes: int
    ) -> tuple[int, bytes]: ...


class JobContext:
    """What a handler gets besides its payload: the database, the server's settings, the
    outbound clients (guarded destinations, shared pools: `agents` for agent calls, `http` for
    judges and sinks) and a way to wake the worker."""

    def __init__(
        self,
        db: Database,
        *,
        settings: Settings | None = None,
        http: httpx.AsyncClient | None = None,
        agents: AgentPoster | None = None,
        notify: Callable[[], None] = lambda: None,
    ) -> None:
        self.db = db
        self._settings = settings
        self._http = http
        self._agents = agents
        self.notify = notify
        """Wake the worker: call after enqueueing follow-up jobs."""

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            raise RuntimeError(_BARE_WORKER.format(what="settings"))
        return self._settings

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            raise RuntimeError(_BARE_WORKER.format(what="an outbound HTTP client"))
        return self._http

    @property
    def agents(self) -> AgentPoster:
        if self._agents is None:
            raise RuntimeError(_BARE_WORKER.format(what="a client for agent calls"))
        return self._agents


_BARE_WORKER = (
    "this worker was started without {what}: build it with neens.engine.handlers.open_worker"
)


Handler = Callable[[JobContext, dict[str, Any]], Awaitable[None]]
GiveUp = Callable[[JobContext, dict[str, Any], str], Awaitable[None]]
"""Called once a job has failed for good, with its payload and the last error's summary: what
the job owned (a run) must not wait for it any longer."""
Sweep = Callable[[JobContext], Awaitable[None]]


class Worker:
    def __init__(
        self,
        db: Database,
        handlers: Mapping[str, Handler],
        *,
        settings: Settings | None = None,
        http: httpx.AsyncClient | None = None,
        agents: AgentPoster | None = None,
        concurrency: int = 4,
        poll_interval_s: float = 0.5,
        lease_s: float = DEFAULT_LEASE_S,
        on_give_up: Mapping[str, GiveUp] | None = None,
        sweep: Sweep | None = None,
        sweep_every_s: float = 30.0,
        stop_timeout_s: float = 5.0,
        name: str | None = None,
    ) -> None:
        self.db = db
        self.handlers = handlers
        self.concurrency = concurrency
        self.poll_interval_s = poll_interval_s
        self.lease_s = lease_s
        self.on_give_up = on_give_up or {}
        self.sweep = sweep
        self.sweep_every_s = sweep_every_s
        self.stop_timeout_s = stop_timeout_s
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.context = JobContext(
            db, settings=settings, http=http, agents=agents, notify=self.notify
        )
        self._wake = asyncio.Event()
        self._running: dict[int, asyncio.Task[None]] = {}
        self._leased: dict[int, asyncio.Task[None]] = {}
        """Jobs whose handler runs: their leases are renewed."""
        self._claim_failing = False

    def notify(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set, then release the jobs in hand (within `stop_timeout_s`)."""
        helpers = [asyncio.create_task(self._renew_leases(), name="neens-worker-leases")]
        if self.sweep is not None:
            helpers.append(asyncio.create_task(self._sweeps(stop), name="neens-worker-sweep"))
        try:
            while not stop.is_set():
                self._wake.clear()
                job = None
                if len(self._running) < self.concurrency:
                    job = await self._claim()
                if job is None:
                    await _first(stop.wait(), self._wake.wait(), timeout=self.poll_interval_s)
                    continue
                task = asyncio.create_task(self._run_job(job), name=f"neens-job-{job.pk}")
                self._running[job.pk] = self._leased[job.pk] = task
        finally:
            for task in self._leased.values():  # a job past its handler is finishing: let it
                task.cancel()
            running = list(self._running.values())
            if running:
                await asyncio.wait(running, timeout=self.stop_timeout_s)
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _claim(self) -> jobs.ClaimedJob | None:
        """The next job, or None; a database that is busy or out of reach (a lock held past the
        busy timeout, PostgreSQL restarting) is waited out at the poll interval, logged once a
        streak, instead of ending the worker: it had stopped working jobs for good."""
        try:
            job = await jobs.claim(self.db, self.name, lease_s=self.lease_s)
        except Exception as exc:
            if not self._claim_failing:
                reason = busy_database_reason(exc)
                log.log(
                    logging.WARNING if reason is not None else logging.ERROR,
                    "could not claim a job (%s); trying again every %g s, not logged again "
                    "until a claim succeeds",
                    reason or f"{type(exc).__name__}: {exc}",
                    self.poll_interval_s,
                    exc_info=reason is None,
                )
            self._claim_failing = True
            return None
        if self._claim_failing:
            log.warning("claiming jobs works again")
            self._claim_failing = False
        return job

    async def _run_job(self, job: jobs.ClaimedJob) -> None:
        try:
            handler = self.handlers.get(job.kind)
            if handler is None:
                await jobs.fail(
                    self.db, job.pk, self.name, f"no handler for {job.kind!r}", jobs.MAX_ATTEMPTS
                )
                return
            try:
                await handler(self.context, job.payload)
            except asyncio.CancelledError:
                self._leased.pop(job.pk, None)
                await jobs.release(self.db, job.pk, self.name)
                raise
            except Exception as exc:
                self._leased.pop(job.pk, None)
                log.exception("job %s (%s) failed", job.pk, job.kind)
                if await jobs.fail(
                    self.db, job.pk, self.name, traceback.format_exc(), job.attempts
                ):
                    await self._gave_up(job, exc)
            else:
                self._leased.pop(job.pk, None)
                await jobs.complete(self.db, job.pk, self.name)
        finally:
            self._leased.pop(job.pk, None)
            self._running.pop(job.pk, None)
            self.notify()

    async def _gave_up(self, job: jobs.ClaimedJob, exc: Exception) -> None:
        hook = self.on_give_up.get(job.kind)
        if hook is None:
            return
        summary = (str(exc).strip() or type(exc).__name__).splitlines()[0][:500]
        error = f"{type(exc).__name__}: {summary}" if str(exc).strip() else summary
        try:
            await hook(self.context, job.payload, error)
        except Exception:  # the sweep settles what this left undone
            log.exception("job %s (%s): could not record that it failed for good", job.pk, job.kind)

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / RENEWALS_PER_LEASE)
            leased = dict(self._leased)
            if not leased:
                continue
            try:
                held = await jobs.renew(self.db, leased, self.name, lease_s=self.lease_s)
            except Exception:
                log.exception("could not renew the leases of jobs %s", sorted(leased))
                continue
            for pk, task in leased.items():
                if pk not in held and self._leased.get(pk) is task:
                    log.warning("job %s was taken over by another worker; abandoning it", pk)
                    task.cancel()

    async def _sweeps(self, stop: asyncio.Event) -> None:
        assert self.sweep is not None
        while not stop.is_set():
            try:
                await self.sweep(self.context)
            except Exception:
                log.exception(
                    "the periodic sweep failed; it runs again in %g s", self.sweep_every_s
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.sweep_every_s)


async def _first(*awaitables: Awaitable[Any], timeout: float) -> None:
    """Wait until any of `awaitables` finishes or `timeout` passes; cancel the rest."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
