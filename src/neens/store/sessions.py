"""Sessions (one per trace) and their spans: writing decoded batches, reading them back.

A session row is a cache of `domain.sessions.summarize_session` over the trace's stored spans. It
is re-derived in the same transaction that adds spans, so spans of one trace arriving in several
requests (or in parallel) merge into one session whose roll-up covers all of them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.conventions import span_view
from neens.domain.pricing import PriceBook
from neens.domain.sessions import SessionSummary, summarize_session
from neens.errors import NotFound
from neens.ingest.records import SpanRecord
from neens.store.db import Database
from neens.store.db import upsert_insert as _insert
from neens.store.models import Span, TraceSession
from neens.store.pricing import price_book
from neens.store.types import utcnow


@dataclass(frozen=True, slots=True)
class StoredSession:
    trace_id: str
    source: str
    summary: SessionSummary
    created_at: datetime
    updated_at: datetime
    spans: list[SpanRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SessionFilter:
    agent_name: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    eval_run_id: str | None = None


def _record(row: Any, trace_id: str) -> SpanRecord:
    """A stored span (ORM object or row) back as the record it was decoded into."""
    return SpanRecord(
        trace_id=trace_id,
        span_id=row.span_id,
        parent_span_id=row.parent_span_id,
        name=row.name,
        kind=row.kind,
        start_time=row.start_time,
        end_time=row.end_time,
        status_code=row.status_code,
        status_message=row.status_message,
        attributes=row.attributes,
        resource_attributes=row.resource_attributes,
        events=row.events,
        scope_name=row.scope_name,
        input=row.input,
        output=row.output,
        agent_name=row.agent_name,
    )


def _span_values(session_pk: int, record: SpanRecord) -> dict[str, Any]:
    return {
        "session_pk": session_pk,
        "span_id": record.span_id,
        "parent_span_id": record.parent_span_id,
        "name": record.name,
        "kind": record.kind,
        "start_time": record.start_time,
        "end_time": record.end_time,
        "status_code": record.status_code,
        "status_message": record.status_message,
        "attributes": record.attributes,
        "resource_attributes": record.resource_attributes,
        "events": record.events,
        "scope_name": record.scope_name,
        "input": record.input,
        "output": record.output,
        "agent_name": record.agent_name,
        "model": span_view(record).model,
    }


def _summary_values(summary: SessionSummary) -> dict[str, Any]:
    return {
        "agent_name": summary.agent_name,
        "input": summary.input,
        "output": summary.output,
        "models": list(summary.models),
        "input_tokens": summary.input_tokens,
        "output_tokens": summary.output_tokens,
        "latency_ms": summary.latency_ms,
        "step_count": summary.step_count,
        "span_count": summary.span_count,
        "cost_usd": summary.cost_usd,
        "cost_status": summary.cost_status,
        "unpriced": list(summary.unpriced_models),
        "status": summary.status,
        "started_at": summary.started_at,
        "ended_at": summary.ended_at,
        "eval_run_id": summary.eval_run_id,
        "dataset_item_id": summary.dataset_item_id,
        "version_label": summary.version_label,
        "updated_at": utcnow(),
    }


async def _resummarize(
    s: AsyncSession, sessions: dict[int, str], books: dict[int, PriceBook]
) -> dict[int, SessionSummary]:
    """Recompute session rows (pk → trace id) from all their stored spans, in three statements."""
    by_session: dict[int, list[SpanRecord]] = defaultdict(list)
    rows = await s.execute(select(Span.__table__).where(Span.session_pk.in_(list(sessions))))
    for row in rows:
        by_session[row.session_pk].append(_record(row, sessions[row.session_pk]))
    summaries = {pk: summarize_session(by_session[pk], books[pk]) for pk in sorted(sessions)}
    table = cast(Table, TraceSession.__table__)
    columns = list(_summary_values(next(iter(summaries.values()))))
    await s.execute(
        update(table)
        .where(table.c.pk == bindparam("session_pk"))
        .values({name: bindparam(name) for name in columns}),
        [{"session_pk": pk, **_summary_values(summary)} for pk, summary in summaries.items()],
    )
    return summaries


@dataclass(frozen=True, slots=True)
class SpanBatch:
    """Spans from one request: whose they are and how they arrived."""

    project_id: str
    spans: list[SpanRecord]
    source: str


async def write_spans(
    db: Database, project_id: str, spans: list[SpanRecord], *, source: str
) -> dict[str, SessionSummary]:
    """Store one request's spans; see `write_span_batches`."""
    return (await write_span_batches(db, [SpanBatch(project_id, spans, source)]))[0]


async def write_span_batches(
    db: Database, batches: list[SpanBatch]
) -> list[dict[str, SessionSummary]]:
    """Store the spans of several requests in one transaction and re-derive their sessions.

    A span already stored is kept as first received. The session upsert takes each session row's
    lock (PostgreSQL's ON CONFLICT DO UPDATE), so writers adding spans to one trace take turns
    and the later one re-reads what the earlier one wrote; rows are upserted in sorted order, so
    two writers touching the same traces cannot deadlock. Statements are per batch, not per
    trace: one upsert, one span insert, one read and one update, whatever the number of traces.
    Returns, per batch, the summaries of the sessions it touched.
    """
    keys = sorted({(b.project_id, r.trace_id) for b in batches for r in b.spans})
    if not keys:
        return [{} for _ in batches]
    source_of: dict[tuple[str, str], str] = {}
    for b in batches:
        for r in b.spans:
            source_of.setdefault((b.project_id, r.trace_id), b.source)
    async with db.write() as s:
        books = {p: await price_book(s, p, db) for p in {p for p, _ in keys}}
        now = utcnow()
        upserted = await s.execute(
            _insert(s, TraceSession)
            .values(
                [
                    {
                        "project_id": project_id,
                        "trace_id": trace_id,
                        "source": source_of[(project_id, trace_id)],
                        "cost_status": "no_llm_calls",
                        "status": "ok",
                        "models": [],
                        "unpriced": [],
                        "created_at": now,
                        "updated_at": now,
                    }
                    for project_id, trace_id in keys
                ]
            )
            .on_conflict_do_update(
                index_elements=["project_id", "trace_id"], set_={"updated_at": now}
            )
            .returning(TraceSession.pk, TraceSession.project_id, TraceSession.trace_id)
        )
        pk_of = {(project_id, trace_id): pk for pk, project_id, trace_id in upserted.all()}
        await s.execute(
            _insert(s, Span.__table__).on_conflict_do_nothing(
                index_elements=["session_pk", "span_id"]
            ),
            [_span_values(pk_of[(b.project_id, r.trace_id)], r) for b in batches for r in b.spans],
        )
        sessions = {pk: trace_id for (_, trace_id), pk in pk_of.items()}
        summaries = await _resummarize(
            s, sessions, {pk: books[project_id] for (project_id, _), pk in pk_of.items()}
        )
    return [
        {r.trace_id: summaries[pk_of[(b.project_id, r.trace_id)]] for r in b.spans} for b in batches
    ]


async def reprice_model(db: Database, project_id: str, model: str) -> int:
    """Re-derive every session with a span reporting `model` (any case, as overrides match);
    returns how many."""
    async with db.write() as s:
        book = await price_book(s, project_id)
        rows = await s.execute(
            select(TraceSession.pk, TraceSession.trace_id)
            .where(
                TraceSession.project_id == project_id,
                TraceSession.pk.in_(
                    select(Span.session_pk).where(func.lower(Span.model) == model.lower())
                ),
            )
            .with_for_update()
        )
        sessions = dict(rows.all())
        if sessions:
            await _resummarize(s, sessions, dict.fromkeys(sessions, book))
    return len(sessions)


def _summary_from_row(row: TraceSession) -> SessionSummary:
    return SessionSummary(
        agent_name=row.agent_name,
        input=row.input,
        output=row.output,
        models=tuple(row.models),
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        latency_ms=row.latency_ms,
        step_count=row.step_count,
        span_count=row.span_count,
        cost_usd=row.cost_usd,
        cost_status=row.cost_status,  # type: ignore[arg-type]
        unpriced_models=tuple(row.unpriced),
        status=row.status,  # type: ignore[arg-type]
        started_at=row.started_at,
        ended_at=row.ended_at,
        eval_run_id=row.eval_run_id,
        dataset_item_id=row.dataset_item_id,
        version_label=row.version_label,
    )


def _stored(row: TraceSession, spans: list[SpanRecord] | None = None) -> StoredSession:
    return StoredSession(
        row.trace_id,
        row.source,
        _summary_from_row(row),
        row.created_at,
        row.updated_at,
        spans or [],
    )


async def list_sessions(
    db: Database, project_id: str, filt: SessionFilter, *, limit: int, before: int | None
) -> tuple[list[StoredSession], int | None]:
    """Newest first. Returns the page and the cursor for the next page (None on the last)."""
    query = select(TraceSession).where(TraceSession.project_id == project_id)
    if filt.agent_name is not None:
        query = query.where(TraceSession.agent_name == filt.agent_name)
    if filt.start is not None:
        query = query.where(TraceSession.started_at >= filt.start)
    if filt.end is not None:
        query = query.where(TraceSession.started_at < filt.end)
    if filt.eval_run_id is not None:
        query = query.where(TraceSession.eval_run_id == filt.eval_run_id)
    if before is not None:
        query = query.where(TraceSession.pk < before)
    query = query.order_by(TraceSession.pk.desc()).limit(limit + 1)
    async with db.read() as s:
        rows = list(await s.scalars(query))
    page = rows[:limit]
    cursor = page[-1].pk if len(rows) > limit else None
    return [_stored(r) for r in page], cursor


async def get_session(db: Database, project_id: str, trace_id: str) -> StoredSession:
    async with db.read() as s:
        row = await s.scalar(
            select(TraceSession).where(
                TraceSession.project_id == project_id, TraceSession.trace_id == trace_id
            )
        )
        if row is None:
            raise NotFound(f"no session {trace_id!r} in this project", field="session_id")
        spans = await s.scalars(
            select(Span).where(Span.session_pk == row.pk).order_by(Span.start_time, Span.pk)
        )
        return _stored(row, [_record(span, trace_id) for span in spans])
