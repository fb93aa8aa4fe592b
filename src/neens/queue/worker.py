"""The worker loop: claims jobs from the table and runs their handlers, a few at a time.

It runs inside `neens serve` by default and as `neens worker` processes at scale; both are this
same loop against the same table. An in-process `notify()` wakes it at once after an enqueue;
otherwise it polls, so jobs enqueued by other processes are picked up too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from neens.queue import jobs
from neens.store.db import Database

log = logging.getLogger("neens.worker")


@dataclass
class JobContext:
    """What a handler gets besides its payload."""

    db: Database
    services: dict[str, Any] = field(default_factory=dict)
    """Shared clients and settings, set by whoever starts the worker."""
    notify: Callable[[], None] = lambda: None
    """Wake the worker: call after enqueueing follow-up jobs."""


Handler = Callable[[JobContext, dict[str, Any]], Awaitable[None]]


class Worker:
    def __init__(
        self,
        db: Database,
        handlers: dict[str, Handler],
        *,
        services: dict[str, Any] | None = None,
        concurrency: int = 4,
        poll_interval_s: float = 0.5,
        lease_s: float = 60.0,
        name: str | None = None,
    ) -> None:
        self.db = db
        self.handlers = handlers
        self.concurrency = concurrency
        self.poll_interval_s = poll_interval_s
        self.lease_s = lease_s
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.context = JobContext(db, services or {}, self.notify)
        self._wake = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()

    def notify(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set, then wait for the jobs in hand to finish."""
        slots = asyncio.Semaphore(self.concurrency)
        try:
            while not stop.is_set():
                await slots.acquire()
                job = await jobs.claim(self.db, self.name, lease_s=self.lease_s)
                if job is None:
                    slots.release()
                    self._wake.clear()
                    await _first(stop.wait(), self._wake.wait(), timeout=self.poll_interval_s)
                    continue
                task = asyncio.create_task(self._run_job(job, slots))
                self._running.add(task)
                task.add_done_callback(self._running.discard)
        finally:
            if self._running:
                await asyncio.gather(*self._running, return_exceptions=True)

    async def _run_job(self, job: jobs.ClaimedJob, slots: asyncio.Semaphore) -> None:
        beat = asyncio.create_task(self._heartbeat(job.pk))
        try:
            handler = self.handlers.get(job.kind)
            if handler is None:
                await jobs.fail(
                    self.db, job.pk, self.name, f"no handler for {job.kind!r}", jobs.MAX_ATTEMPTS
                )
                return
            try:
                await handler(self.context, job.payload)
            except Exception:
                log.exception("job %s (%s) failed", job.pk, job.kind)
                await jobs.fail(self.db, job.pk, self.name, traceback.format_exc(), job.attempts)
            else:
                await jobs.complete(self.db, job.pk, self.name)
        finally:
            beat.cancel()
            slots.release()
            self.notify()

    async def _heartbeat(self, pk: int) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            await jobs.heartbeat(self.db, pk, self.name, lease_s=self.lease_s)


async def _first(*awaitables: Awaitable[Any], timeout: float) -> None:
    """Wait until any of `awaitables` finishes or `timeout` passes; cancel the rest."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
