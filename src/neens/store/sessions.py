"""Sessions (one per trace) and their spans: writing decoded batches (reading them back is
`store.session_reads`).

A session row is a cache of `domain.sessions.summarize_session` over the trace's stored spans. It
is re-derived in the same transaction that adds spans, so spans of one trace arriving in several
requests (or in parallel) merge into one session whose roll-up covers all of them.

The module is a little over 500 lines on purpose: spans and content events (`/v1/logs`) are
written under the same trace locks, taken in the same order, and re-derive the same summary;
kept together, that order is written once.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, cast

from sqlalchemy import (
    Connection,
    Table,
    and_,
    bindparam,
    func,
    insert,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.conventions import Flag, SpanView, span_view
from neens.domain.pricing import PriceBook
from neens.domain.sessions import SessionSummary, summarize_session
from neens.domain.spans import Rejection, SpanLogEvent, SpanRecord
from neens.domain.storable import safe_label
from neens.store.db import Database, dialect_insert
from neens.store.models import LogEvent, Span, TraceSession
from neens.store.pricing import price_book, remembered_price_book
from neens.store.session_rows import SUMMARY_COLUMNS, insert_new_sessions, session_row
from neens.store.span_rows import insert_spans, span_row
from neens.store.tenancy import owned_by
from neens.store.types import utcnow


def record_from_row(row: Any, trace_id: str, log_events: list[Any] | None = None) -> SpanRecord:
    """A stored span (ORM object or row) back as the record it was decoded into, with the
    content events received for it on /v1/logs after its own events."""
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
        events=[*row.events, *log_events] if log_events else row.events,
        scope_name=row.scope_name,
        input=row.input,
        output=row.output,
        agent_name=row.agent_name,
    )


def _summary_values(summary: SessionSummary, records: Sequence[SpanRecord]) -> dict[str, Any]:
    """The session row's values; `records` are the spans it was summarized from."""
    input_text, input_span_id, input_key = _text_or_reference(
        summary.input, summary.input_span_id, records
    )
    output_text, output_span_id, output_key = _text_or_reference(
        summary.output, summary.output_span_id, records
    )
    return {
        "agent_name": summary.agent_name,
        "input": input_text,
        "input_span_id": input_span_id,
        "input_key": input_key,
        "output": output_text,
        "output_span_id": output_span_id,
        "output_key": output_key,
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
        "warnings": [{"code": flag.code, "message": flag.message} for flag in summary.warnings],
        "updated_at": utcnow(),
    }


_REFERENCE_KEY: Final = re.compile(r"[A-Za-z0-9_.:@/-]{1,100}")
"""Attribute keys a session may refer to: every convention's keys, and none that would need
escaping in a SQLite JSON path."""


def _text_or_reference(
    text: str | None, span_id: str | None, records: Sequence[SpanRecord]
) -> tuple[str | None, str | None, str | None]:
    """(text, span id, key): the text itself, or, when it is verbatim the string value of an
    attribute of span `span_id` (the very object the conventions read), a reference to it.

    The span's attributes are stored exactly as in the record, so `TraceSession.input` reads
    back the same text either way (tests/store/test_session_text_refs.py)."""
    if text is None or span_id is None:
        return text, None, None
    for record in records:
        if record.span_id == span_id:
            for key, value in record.attributes.items():
                if value is text and _REFERENCE_KEY.fullmatch(key):
                    return None, span_id, key
            break
    return text, None, None


def _resummarize(
    conn: Connection, sessions: dict[int, str], books: dict[int, PriceBook]
) -> dict[int, SessionSummary]:
    """Recompute session rows (pk → trace id) from all their stored spans, in two statements."""
    by_session: dict[int, list[SpanRecord]] = defaultdict(list)
    log_events = log_events_by_span(conn, list(sessions))
    late = _late_runs(conn, list(sessions)) if log_events else {}
    rows = conn.execute(select(_SPANS).where(_SPANS.c.session_pk.in_(list(sessions))))
    for row in rows:
        extra = log_events.get((row.session_pk, row.span_id))
        by_session[row.session_pk].append(record_from_row(row, sessions[row.session_pk], extra))
    summaries = {pk: summarize_session(by_session[pk], books[pk]) for pk in sorted(sessions)}
    for pk, run_ids in late.items():
        summary = summaries[pk]
        summaries[pk] = replace(summary, warnings=(*summary.warnings, _content_after_run(run_ids)))
    conn.execute(
        _UPDATE_SUMMARY,
        [
            {"session_pk": pk, **_summary_values(summary, by_session[pk])}
            for pk, summary in summaries.items()
        ],
    )
    return summaries


_SESSIONS = cast(Table, TraceSession.__table__)
_SPANS = cast(Table, Span.__table__)
_LOG_EVENTS = cast(Table, LogEvent.__table__)


def log_events_by_span(
    conn: Connection, session_pks: list[int]
) -> dict[tuple[int, str], list[Any]]:
    """(session pk, span id) → the log events received for that span, in arrival order."""
    rows = conn.execute(
        select(_SESSIONS.c.pk, _LOG_EVENTS.c.span_id, _LOG_EVENTS.c.event)
        .join(
            _LOG_EVENTS,
            and_(
                _LOG_EVENTS.c.project_id == _SESSIONS.c.project_id,
                _LOG_EVENTS.c.trace_id == _SESSIONS.c.trace_id,
            ),
        )
        .where(_SESSIONS.c.pk.in_(session_pks))
        .order_by(_LOG_EVENTS.c.pk)
    )
    result: dict[tuple[int, str], list[Any]] = defaultdict(list)
    for pk, span_id, event in rows:
        result[(pk, span_id)].append(event)
    return result


def _late_runs(conn: Connection, session_pks: list[int]) -> dict[int, list[str]]:
    """Session pk → the pre-prod runs that had finished scoring it when content events arrived
    and changed its output (`LogEvent.late_for_run_id`)."""
    rows = conn.execute(
        select(_SESSIONS.c.pk, _LOG_EVENTS.c.late_for_run_id)
        .join(
            _LOG_EVENTS,
            and_(
                _LOG_EVENTS.c.project_id == _SESSIONS.c.project_id,
                _LOG_EVENTS.c.trace_id == _SESSIONS.c.trace_id,
            ),
        )
        .where(_SESSIONS.c.pk.in_(session_pks), _LOG_EVENTS.c.late_for_run_id.is_not(None))
        .distinct()
        .order_by(_SESSIONS.c.pk, _LOG_EVENTS.c.late_for_run_id)
    )
    result: dict[int, list[str]] = defaultdict(list)
    for pk, run_id in rows:
        result[pk].append(run_id)
    return result


def _content_after_run(run_ids: list[str]) -> Flag:
    runs = ", ".join(run_ids)
    return Flag(
        "content_after_run",
        f"content events arrived after pre-prod run {runs} had finished and changed this "
        "session's output; the run's verdict on it was computed without them and is kept",
    )


def _lock_traces(conn: Connection, keys: list[tuple[str, str]], *, shared: bool) -> None:
    """On PostgreSQL, a transaction lock per (project, trace): span writers share it, a log
    writer takes it alone, so whichever commits second sees the other's rows (a span writer
    finds the log events, a log writer finds the session) and no event is left unapplied.
    SQLite writers already take turns."""
    if conn.dialect.name != "postgresql" or not keys:
        return
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    conn.execute(
        text(
            f"SELECT {function}(h) FROM (SELECT DISTINCT hashtextextended(k, 0) AS h "
            "FROM unnest(CAST(:keys AS text[])) AS k ORDER BY h) AS locks"
        ),
        {"keys": [f"{project_id}\x1f{trace_id}" for project_id, trace_id in keys]},
    )


_ANY_LOG_EVENT = (
    select(_LOG_EVENTS.c.pk).where(_LOG_EVENTS.c.project_id == bindparam("project_id")).limit(1)
)


def _traces_with_log_events(conn: Connection, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The traces of `keys` with content events stored. Most projects send none at all, which
    one indexed probe per project tells; only then are the traces looked up one by one (a
    statement SQLAlchemy expands anew for every batch)."""
    projects = sorted({project_id for project_id, _ in keys})
    if all(conn.execute(_ANY_LOG_EVENT, {"project_id": p}).first() is None for p in projects):
        return set()
    rows = conn.execute(
        select(_LOG_EVENTS.c.project_id, _LOG_EVENTS.c.trace_id)
        .where(tuple_(_LOG_EVENTS.c.project_id, _LOG_EVENTS.c.trace_id).in_(keys))
        .distinct()
    )
    return {(project_id, trace_id) for project_id, trace_id in rows}


OutputsChanged = Callable[[AsyncSession, list[int]], Awaitable[dict[int, str]]]
"""Called in the transaction that attached content events, with the sessions whose output the
events changed; returns those a finished pre-prod run had already scored (session pk → run
id), whose events are then marked as late for it."""


async def write_log_events(
    db: Database,
    project_id: str,
    events: list[SpanLogEvent],
    outputs_changed: OutputsChanged | None = None,
) -> None:
    """Store GenAI content events from /v1/logs and re-derive the sessions they belong to.

    An event whose span has not arrived is kept all the same: the span's write finds it
    (`_store`) and derives the session with it. When the events change a session's output,
    `outputs_changed` is told in the same transaction, so whatever scored that output can be
    redone (or flagged) with no write in between.
    """
    if not events:
        return
    keys = sorted({(project_id, event.trace_id) for event in events})
    async with db.write() as s:
        book = await price_book(s, project_id, db)
        conn = await s.connection()
        sessions, outputs, inserted = await conn.run_sync(_attach_events, project_id, keys, events)
        if not sessions:
            return
        books = dict.fromkeys(sessions, book)
        summaries = await conn.run_sync(_resummarize, sessions, books)
        changed = [pk for pk, summary in summaries.items() if summary.output != outputs[pk]]
        if not changed or outputs_changed is None:
            return
        late = await outputs_changed(s, changed)
        if late:
            await conn.run_sync(_mark_late, late, sessions, inserted)
            await conn.run_sync(_resummarize, {pk: sessions[pk] for pk in late}, books)


def _attach_events(
    conn: Connection, project_id: str, keys: list[tuple[str, str]], events: list[SpanLogEvent]
) -> tuple[dict[int, str], dict[int, str | None], list[int]]:
    """Insert the events; returns the sessions they belong to (pk → trace id, locked), their
    outputs before the events, and the new events' pks."""
    _lock_traces(conn, keys, shared=False)
    now = utcnow()
    inserted = conn.execute(
        insert(_LOG_EVENTS).returning(_LOG_EVENTS.c.pk),
        [
            {
                "project_id": project_id,
                "trace_id": event.trace_id,
                "span_id": event.span_id,
                "event": event.event,
                "received_at": now,
            }
            for event in events
        ],
    )
    pks = list(inserted.scalars())
    rows = conn.execute(
        select(TraceSession.pk, TraceSession.trace_id, TraceSession.output)
        .where(
            _SESSIONS.c.project_id == project_id,
            _SESSIONS.c.trace_id.in_([trace_id for _, trace_id in keys]),
        )
        .order_by(_SESSIONS.c.pk)
        .with_for_update()
    ).all()
    return {pk: trace_id for pk, trace_id, _ in rows}, {pk: out for pk, _, out in rows}, pks


def _mark_late(
    conn: Connection, late: dict[int, str], sessions: dict[int, str], inserted: list[int]
) -> None:
    for session_pk, run_id in late.items():
        conn.execute(
            update(_LOG_EVENTS)
            .where(_LOG_EVENTS.c.pk.in_(inserted), _LOG_EVENTS.c.trace_id == sessions[session_pk])
            .values(late_for_run_id=run_id)
        )


_UPDATE_SUMMARY = (
    update(_SESSIONS)
    .where(_SESSIONS.c.pk == bindparam("session_pk"))
    .values({name: bindparam(name) for name in SUMMARY_COLUMNS})
)


_touch_statements: dict[str, Any] = {}


def _touch_sessions(dialect: str) -> Any:
    """Upsert existing sessions, taking each row's lock (PostgreSQL's ON CONFLICT DO UPDATE);
    built once per dialect, so SQLAlchemy compiles it once and caches it."""
    if dialect not in _touch_statements:
        touch = dialect_insert(dialect, _SESSIONS)
        _touch_statements[dialect] = touch.on_conflict_do_update(
            index_elements=["project_id", "trace_id"],
            set_={"updated_at": touch.excluded.updated_at},
        ).returning(_SESSIONS.c.pk, _SESSIONS.c.project_id, _SESSIONS.c.trace_id)
    return _touch_statements[dialect]


def _jsonb_exact(value: object) -> bool:
    """Whether PostgreSQL's jsonb gives `value` back exactly as written.

    jsonb sorts object keys and keeps numbers as `numeric`, so a dict can come back reordered
    (which changes structured input rendered as JSON text), a float such as 1e+23 comes back as
    the int 100000000000000000000000 and -0.0 as 0.0. Strings, bools, ints and other floats
    round-trip. SQLite stores the JSON text as written, so everything round-trips there.
    """
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return "e+" not in repr(value) and not (value == 0 and math.copysign(1.0, value) < 0)
    if isinstance(value, list):
        return all(_jsonb_exact(item) for item in value)
    return False


@dataclass(slots=True)
class _Trace:
    """The spans of one (project, trace) in a write, first received first, with their views."""

    source: str
    records: list[SpanRecord] = field(default_factory=list)
    views: list[SpanView] = field(default_factory=list)
    span_ids: set[str] = field(default_factory=set)

    def add(self, record: SpanRecord, view: SpanView) -> None:
        if record.span_id not in self.span_ids:  # the span insert keeps the first one too
            self.span_ids.add(record.span_id)
            self.records.append(record)
            self.views.append(view)


@dataclass(frozen=True, slots=True)
class SpanBatch:
    """Spans from one request: whose they are and how they arrived."""

    project_id: str
    spans: list[SpanRecord]
    source: str


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What one batch's write did: the sessions it touched, and the dubious values it held."""

    summaries: dict[str, SessionSummary]
    """Trace id → the session's summary after the write."""
    flagged: list[str] = field(default_factory=list)
    """One line per flag on a span of this batch (`span 'chat': attribute ... is the text`)."""
    rejected: list[Rejection] = field(default_factory=list)
    """Spans the database refused; filled by the ingest writer when it writes trace by trace."""


async def write_spans(
    db: Database, project_id: str, spans: list[SpanRecord], *, source: str
) -> dict[str, SessionSummary]:
    """Store one request's spans; see `write_span_batches`."""
    return (await write_span_batches(db, [SpanBatch(project_id, spans, source)]))[0].summaries


async def write_span_batches(db: Database, batches: list[SpanBatch]) -> list[WriteResult]:
    """Store the spans of several requests in one transaction and derive their sessions.

    A span already stored is kept as first received. A trace seen for the first time gets its
    session row in the first statement, summary included, and nothing more: the row is new, so
    the spans in hand are all its spans. They are summarized just before the transaction, under
    the same write lock (`Database.run_write`'s `prepare`), so on SQLite a price set meanwhile
    waits for the commit and then re-prices it. (On PostgreSQL the summary in hand is kept only
    when the spans' attributes read back from jsonb exactly, see `_jsonb_exact`; otherwise the
    stored form is re-read, as below, so the summary never depends on which path computed it.)

    A trace already stored is upserted instead, which takes its row lock (PostgreSQL's ON
    CONFLICT DO UPDATE), so writers adding spans to one trace take turns and the later one
    re-reads all the spans the earlier ones wrote and re-derives the summary. Rows are written
    in sorted order, so two writers touching the same traces cannot deadlock. Statements are per
    batch, not per trace: two when every trace is new (sessions, spans), five at most (plus the
    upsert, the read and the update). Returns, per batch, the summaries of the sessions it
    touched and the flags found on its spans.
    """
    traces: dict[tuple[str, str], _Trace] = {}
    span_rows: list[tuple[tuple[str, str], SpanRecord, str | None]] = []
    flagged: list[list[str]] = []
    for b in batches:
        lines: list[str] = []
        flagged.append(lines)
        for r in b.spans:
            key = (b.project_id, r.trace_id)
            trace = traces.get(key)
            if trace is None:
                trace = traces[key] = _Trace(b.source)
            view = span_view(r)
            trace.add(r, view)
            span_rows.append((key, r, view.model))
            if view.flags:
                lines.extend(f"span {safe_label(r.name)}: {f.message}" for f in view.flags)
    if not traces:
        return [WriteResult({}) for _ in batches]
    keys = sorted(traces)
    books: dict[str, PriceBook] = {}
    summaries: dict[tuple[str, str], SessionSummary] = {}

    async def summarize() -> None:
        for project_id in sorted({p for p, _ in keys}):
            book = remembered_price_book(db, project_id)
            if book is None:
                async with db.read() as s:
                    book = await price_book(s, project_id, db)
            books[project_id] = book
        for key in keys:
            trace = traces[key]
            summaries[key] = summarize_session(trace.records, books[key[0]], views=trace.views)

    def store(conn: Connection) -> None:
        summaries.update(_store(conn, keys, traces, span_rows, summaries, books))

    await db.run_write(store, prepare=summarize)
    return [
        WriteResult({r.trace_id: summaries[(b.project_id, r.trace_id)] for r in b.spans}, lines)
        for b, lines in zip(batches, flagged, strict=True)
    ]


def _store(
    conn: Connection,
    keys: list[tuple[str, str]],
    traces: dict[tuple[str, str], _Trace],
    span_rows: list[tuple[tuple[str, str], SpanRecord, str | None]],
    summaries: dict[tuple[str, str], SessionSummary],
    books: dict[str, PriceBook],
) -> dict[tuple[str, str], SessionSummary]:
    """The statements of `write_span_batches`; returns the summaries it had to re-derive."""
    _lock_traces(conn, keys, shared=True)
    now = utcnow()
    dialect = conn.dialect.name
    pk_of = insert_new_sessions(
        conn,
        [
            session_row(
                dialect,
                {
                    **_summary_values(summaries[key], traces[key].records),
                    "project_id": key[0],
                    "trace_id": key[1],
                    "source": traces[key].source,
                    "created_at": now,
                    "updated_at": now,
                },
            )
            for key in keys
        ],
    )
    stale = [key for key in keys if key not in pk_of]
    if dialect == "postgresql":
        stale = sorted(
            {
                *stale,
                *(
                    key
                    for key in pk_of
                    if not all(
                        _jsonb_exact(value)
                        for r in traces[key].records
                        for value in r.attributes.values()
                    )
                ),
            }
        )
    existing = [key for key in stale if key not in pk_of]
    if existing:
        touched = conn.execute(
            _touch_sessions(dialect),
            [
                {
                    "project_id": project_id,
                    "trace_id": trace_id,
                    "source": traces[(project_id, trace_id)].source,
                    "cost_status": "no_llm_calls",
                    "status": "ok",
                    "models": [],
                    "unpriced": [],
                    "warnings": [],
                    "created_at": now,
                    "updated_at": now,
                }
                for project_id, trace_id in existing
            ],
        )
        pk_of.update({(project_id, trace_id): pk for pk, project_id, trace_id in touched})
    insert_spans(conn, [span_row(dialect, pk_of[key], r, model) for key, r, model in span_rows])
    fresh = [key for key in keys if key not in stale]
    if fresh and (with_events := _traces_with_log_events(conn, fresh)):
        stale = sorted({*stale, *with_events})  # content events that came before their spans
    if not stale:
        return {}
    rederived = _resummarize(
        conn,
        {pk_of[key]: key[1] for key in stale},
        {pk_of[key]: books[key[0]] for key in stale},
    )
    return {key: rederived[pk_of[key]] for key in stale}


def sessions_reporting(model: str) -> Any:
    """The pks of sessions with a span reporting `model`, in any case (as overrides match).

    `model IS NOT NULL` lets the partial index on `spans.model` list the spans that report a
    model; the case-folded match then reads only those, not every span."""
    return select(Span.session_pk).where(
        Span.model.is_not(None), func.lower(Span.model) == model.lower()
    )


async def reprice_model(db: Database, project_id: str, model: str) -> int:
    """Re-derive every session with a span reporting `model` (any case, as overrides match);
    returns how many."""
    async with db.write() as s:
        book = await price_book(s, project_id)
        rows = await s.execute(
            select(TraceSession.pk, TraceSession.trace_id)
            .where(
                owned_by(TraceSession, project_id),
                TraceSession.pk.in_(sessions_reporting(model)),
            )
            .with_for_update()
        )
        sessions = dict(rows.all())
        if sessions:
            conn = await s.connection()
            await conn.run_sync(_resummarize, sessions, dict.fromkeys(sessions, book))
    return len(sessions)
