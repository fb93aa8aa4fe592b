"""Storing incoming spans with group commit, then linking tagged traces to pre-prod runs.

Concurrent ingest requests are written together: whichever requests are waiting when a writer
is free go into one transaction (one writer on SQLite, `POSTGRES_WRITERS` on PostgreSQL). Each
request still gets its answer only after its spans are committed (the acknowledgement stays
durable), but a database that takes one writer at a time pays for one transaction per batch
instead of one per request. If a batch fails, its requests are retried one by one, so a request
that cannot be stored fails alone. And if a request fails because the database refuses one of
its values (a `DataError`: a number out of range, text too long), its traces are written one by
one, so the trace holding that value is refused (reported with the request's rejections, and
logged) and the other traces of the request are stored. Known causes are refused or flagged
before they reach the database; this is the net under them. Errors that are not about the data
(a lost connection, a full disk) still fail the request, so the client retries instead of being
told its spans were refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Final

from sqlalchemy.exc import DataError
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.spans import Rejection, SpanLogEvent, SpanRecord
from neens.domain.storable import safe_label
from neens.engine.linking import link_traces
from neens.engine.production import enqueue_production_scoring
from neens.store.db import Database
from neens.store.rescoring import rescore_changed_outputs
from neens.store.sessions import SpanBatch, WriteResult, write_log_events, write_span_batches

log = logging.getLogger("neens.ingest")

MAX_GROUP = 64
"""Requests committed together at most."""
POSTGRES_WRITERS = 2
"""Groups in flight at once on PostgreSQL: while one waits for its commit (a round trip and a
WAL flush), the next is summarized and sent, so the server's core is not left idle. Writers
touching one trace take turns on its session row, in a fixed order, as writers in separate
server processes do. SQLite takes one writer at a time, so there it is one group."""

_Waiter = tuple[SpanBatch, "asyncio.Future[WriteResult]"]


class SpanWriter:
    """The group-commit writers; `start()` them in the server's lifespan, `stop()` on shutdown."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.writers = POSTGRES_WRITERS if db.dialect == "postgresql" else 1
        self._queue: asyncio.Queue[_Waiter] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._run(), name=f"neens-span-writer-{n}")
            for n in range(self.writers)
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def write(self, project_id: str, spans: list[SpanRecord], source: str) -> WriteResult:
        batch = SpanBatch(project_id, spans, source)
        if not self._tasks:
            return await _write_alone(self.db, batch)
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
                batch, future = group[0]
                try:
                    result = await _write_alone(self.db, batch, exc)
                except Exception as again:
                    _settle(future, again)
                    return
                if not future.done():
                    future.set_result(result)
                return
            log.warning("a group of %d ingest requests failed; retrying one by one", len(group))
            for waiter in group:
                await self._commit([waiter])
            return
        for (_, future), result in zip(group, results, strict=True):
            if not future.done():
                future.set_result(result)


_REFUSED_VALUES: Final = (DataError, OverflowError)
"""The database (PostgreSQL's data exceptions) or its driver (SQLite's "int too large")
refusing a value: a fault of the data, not of the database."""


async def _write_alone(
    db: Database, batch: SpanBatch, failed: Exception | None = None
) -> WriteResult:
    """Write one request; when the database refuses one of its values, trace by trace.

    `failed` is the error of an attempt already made with the whole batch, if any.
    """
    if failed is None:
        try:
            return (await write_span_batches(db, [batch]))[0]
        except _REFUSED_VALUES as exc:
            failed = exc
    if not isinstance(failed, _REFUSED_VALUES):
        raise failed
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in batch.spans:
        by_trace[span.trace_id].append(span)
    result = WriteResult({})
    for trace_id, spans in by_trace.items():
        try:
            [one] = await write_span_batches(db, [SpanBatch(batch.project_id, spans, batch.source)])
        except _REFUSED_VALUES as exc:
            error_id = secrets.token_hex(6)
            log.error(
                "trace %s of project %s refused by the database (error id %s)",
                safe_label(trace_id),
                batch.project_id,
                error_id,
                exc_info=exc,
            )
            reason = (
                f"could not be stored: the database refused a value in trace "
                f"{safe_label(trace_id)} (error id {error_id}); its other spans were refused too"
            )
            result.rejected.extend(Rejection(f"span {safe_label(s.name)} {reason}") for s in spans)
            continue
        result.summaries.update(one.summaries)
        result.flagged.extend(one.flagged)
    return result


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
    rejected: list[Rejection] = field(default_factory=list)
    """Spans the database refused (with the rest of their trace); the rest were stored."""


async def ingest_spans(
    writer: SpanWriter, project_id: str, spans: list[SpanRecord], source: str
) -> Ingested:
    """Store spans, link traces tagged for a pre-prod run, and queue production scoring for
    the others."""
    result = await writer.write(project_id, spans, source)
    summaries = result.summaries
    if result.rejected:
        spans = [span for span in spans if span.trace_id in summaries]
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
    return Ingested(queued, flagged, result.rejected)


async def ingest_log_events(db: Database, project_id: str, events: list[SpanLogEvent]) -> bool:
    """Attach content events to their spans; when they change the output a pre-prod run scored,
    score it again or flag it (`store.rescoring`). True when a scoring job was queued."""
    queued = False

    async def outputs_changed(s: AsyncSession, session_pks: list[int]) -> dict[int, str]:
        nonlocal queued
        rescored = await rescore_changed_outputs(s, session_pks)
        queued |= rescored.queued
        return rescored.late

    await write_log_events(db, project_id, events, outputs_changed)
    return queued


_SESSION_FLAGS: Final = frozenset({"token_sum_overflow", "parent_cycle", "cost_overflow"})
"""Flags that belong to a whole session rather than to one span's values, reported with the
session's id to every request that touches it."""
