"""Storing incoming spans with group commit, then linking tagged traces to pre-prod runs.

Concurrent ingest requests are written together: whichever requests are waiting when the writer
is free go into one transaction. Each request still gets its answer only after its spans are
committed (the acknowledgement stays durable), but a database that takes one writer at a time
pays for one transaction per batch instead of one per request. If a batch fails, its requests
are retried one by one, so a request that cannot be stored fails alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Final

from neens.domain.conventions import safe_label
from neens.engine.linking import link_traces
from neens.engine.production import enqueue_production_scoring
from neens.ingest.records import SpanRecord
from neens.store.db import Database
from neens.store.sessions import SpanBatch, WriteResult, write_span_batches

log = logging.getLogger("neens.ingest")

MAX_GROUP = 64
"""Requests committed together at most."""

_Waiter = tuple[SpanBatch, "asyncio.Future[WriteResult]"]


class SpanWriter:
    """The group-commit writer; `start()` it in the server's lifespan, `stop()` on shutdown."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._queue: asyncio.Queue[_Waiter] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="neens-span-writer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def write(self, project_id: str, spans: list[SpanRecord], source: str) -> WriteResult:
        batch = SpanBatch(project_id, spans, source)
        if self._task is None:
            return (await write_span_batches(self.db, [batch]))[0]
        future: asyncio.Future[WriteResult] = asyncio.get_running_loop().create_future()
        await self._queue.put((batch, future))
        return await future

    async def _run(self) -> None:
        while True:
            group = [await self._queue.get()]
            while len(group) < MAX_GROUP and not self._queue.empty():
                group.append(self._queue.get_nowait())
            try:
                await self._commit(group)
            except asyncio.CancelledError:
                for _, future in group:
                    if not future.done():
                        future.cancel()
                raise

    async def _commit(self, group: list[_Waiter]) -> None:
        try:
            results = await write_span_batches(self.db, [batch for batch, _ in group])
        except Exception as exc:
            if len(group) == 1:
                _settle(group[0][1], exc)
                return
            log.warning("a group of %d ingest requests failed; retrying one by one", len(group))
            for waiter in group:
                await self._commit([waiter])
            return
        for (_, future), result in zip(group, results, strict=True):
            if not future.done():
                future.set_result(result)


def _settle(future: asyncio.Future[WriteResult], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


@dataclass(frozen=True, slots=True)
class Ingested:
    """What storing one request's spans did."""

    queued: bool
    """Jobs were queued: the caller wakes the workers."""
    flagged: list[str]
    """The dubious values found on the request's spans (stored, but flagged)."""


async def ingest_spans(
    writer: SpanWriter, project_id: str, spans: list[SpanRecord], source: str
) -> Ingested:
    """Store spans, link traces tagged for a pre-prod run, and queue production scoring for
    the others."""
    result = await writer.write(project_id, spans, source)
    summaries = result.summaries
    tagged = {trace for trace, summary in summaries.items() if summary.eval_run_id}
    queued = await enqueue_production_scoring(writer.db, project_id, spans, tagged)
    if tagged:
        queued |= await link_traces(writer.db, project_id, {t: summaries[t] for t in tagged})
    flagged = result.flagged + [
        f"session {safe_label(trace_id)}: {flag.message}"
        for trace_id, summary in summaries.items()
        for flag in summary.warnings
        if flag.code in _SESSION_FLAGS
    ]
    return Ingested(queued, flagged)


_SESSION_FLAGS: Final = frozenset({"token_sum_overflow", "parent_cycle", "cost_overflow"})
"""Flags that belong to a whole session rather than to one span's values, reported with the
session's id to every request that touches it."""
