"""Reading sessions back: the list with its filters and cursor, one session with its spans, and
the hint a runner-mode run shows when traces arrive without its correlation attributes.

The rows are written by `store.sessions`, whose row-to-record mapping this shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from neens.domain.conventions import EVAL_RUN_ID_KEY, Flag
from neens.domain.sessions import SessionSummary
from neens.domain.spans import SpanRecord
from neens.store.db import Database
from neens.store.models import Span, TraceSession
from neens.store.sessions import log_events_by_span, record_from_row
from neens.store.tenancy import SESSION, in_project, owned, owned_by


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


def _summary_from_row(
    row: TraceSession, texts: tuple[str | None, str | None] | None = None
) -> SessionSummary:
    """The row's summary; `texts`, when given, stands for its input and output (previews)."""
    text_in, text_out = texts if texts is not None else (row.input, row.output)
    return SessionSummary(
        agent_name=row.agent_name,
        input=text_in,
        output=text_out,
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
        warnings=tuple(Flag(w["code"], w["message"]) for w in row.warnings or ()),
    )


def _stored(
    row: TraceSession,
    spans: list[SpanRecord] | None = None,
    texts: tuple[str | None, str | None] | None = None,
) -> StoredSession:
    return StoredSession(
        row.trace_id,
        row.source,
        _summary_from_row(row, texts),
        row.created_at,
        row.updated_at,
        spans or [],
    )


SessionKey = tuple[int] | tuple[datetime, int]
"""Where a page of sessions ends: its last session's row key, or, when the list is filtered by
time, its start and row key (the list's order either way)."""


def by_start(filt: SessionFilter) -> bool:
    """Whether the list is in start-time order: when filtered by time, so that a time window
    is read from the start-time index wherever it lies, instead of scanning every newer row."""
    return filt.start is not None or filt.end is not None


async def list_sessions(
    db: Database,
    project_id: str,
    filt: SessionFilter,
    *,
    limit: int,
    after: SessionKey | None,
    preview_chars: int | None = None,
) -> tuple[list[StoredSession], SessionKey | None]:
    """Newest first: by row key (first received), or by start when filtered by time (then
    `after` and the key returned are (started_at, pk)). Returns the page and the key of its
    last session when more follow (None on the last page).

    With `preview_chars`, each input and output is cut to that many characters by the
    database (a prompt can be megabytes, and a list page shows a line of it)."""
    query = in_project(TraceSession, project_id)
    if filt.agent_name is not None:
        query = query.where(TraceSession.agent_name == filt.agent_name)
    if filt.start is not None:
        query = query.where(TraceSession.started_at >= filt.start)
    if filt.end is not None:
        query = query.where(TraceSession.started_at < filt.end)
    if filt.eval_run_id is not None:
        query = query.where(TraceSession.eval_run_id == filt.eval_run_id)
    if by_start(filt):
        if after is not None:
            started, pk = after[0], after[-1]
            query = query.where(
                (TraceSession.started_at < started)
                | ((TraceSession.started_at == started) & (TraceSession.pk < pk))
            )
        query = query.order_by(TraceSession.started_at.desc(), TraceSession.pk.desc())
    else:
        if after is not None:
            query = query.where(TraceSession.pk < after[-1])
        query = query.order_by(TraceSession.pk.desc())
    texts: list[tuple[str | None, str | None]] | None = None
    async with db.read() as s:
        if preview_chars is None:
            rows = list(await s.scalars(query.limit(limit + 1)))
        else:
            cut = query.options(defer(TraceSession.input), defer(TraceSession.output)).add_columns(
                func.substr(TraceSession.input, 1, preview_chars),
                func.substr(TraceSession.output, 1, preview_chars),
            )
            found = (await s.execute(cut.limit(limit + 1))).all()
            rows = [row for row, _, _ in found]
            texts = [(text_in, text_out) for _, text_in, text_out in found]
    page = rows[:limit]
    end: SessionKey | None = None
    if len(rows) > limit:
        last = page[-1]
        if not by_start(filt):
            end = (last.pk,)
        elif last.started_at is not None:  # always: a time filter matches no null start
            end = (last.started_at, last.pk)
    if texts is None:
        return [_stored(r) for r in page], end
    return [_stored(r, texts=t) for r, t in zip(page, texts, strict=False)], end


async def get_session(db: Database, project_id: str, trace_id: str) -> StoredSession:
    async with db.read() as s:
        row = await owned(s, SESSION, project_id, trace_id)
        spans = await s.scalars(
            select(Span).where(Span.session_pk == row.pk).order_by(Span.start_time, Span.pk)
        )
        conn = await s.connection()
        log_events = await conn.run_sync(log_events_by_span, [row.pk])
        return _stored(
            row,
            [
                record_from_row(span, trace_id, log_events.get((row.pk, span.span_id)))
                for span in spans
            ],
        )


_HINT_SAMPLE = 100
"""Sessions looked at for a waiting run's hint: enough to say "many", cheap to read."""


async def untagged_traces_hint(s: AsyncSession, project_id: str, since: datetime) -> str | None:
    """Why a runner-mode run may still be waiting, from the traces that arrived since `since`
    without a run id (`EVAL_RUN_ID_KEY`); None when none did.

    A misspelled correlation key (flagged `correlation_key_misspelled`) is named; otherwise
    the traces carry no correlation attributes at all, which is what an exporter that does
    not apply `OTEL_RESOURCE_ATTRIBUTES` sends.
    """
    rows = await s.scalars(
        select(TraceSession.warnings)
        .where(
            owned_by(TraceSession, project_id),
            TraceSession.created_at >= since,
            TraceSession.eval_run_id.is_(None),
        )
        .order_by(TraceSession.pk.desc())
        .limit(_HINT_SAMPLE + 1)
    )
    sessions = list(rows)
    if not sessions:
        return None
    many = "more than 100" if len(sessions) > _HINT_SAMPLE else str(len(sessions))
    misspelled = [
        warning["message"]
        for warnings in sessions
        for warning in warnings or ()
        if warning.get("code") == "correlation_key_misspelled"
    ]
    if misspelled:
        return (
            f"{len(misspelled)} trace(s) received since the run was created have a misspelled "
            f"correlation key ({misspelled[0]})"
        )
    return (
        f"{many} trace(s) received since the run was created carry no {EVAL_RUN_ID_KEY}; if "
        "they come from your runner, its exporter does not apply OTEL_RESOURCE_ATTRIBUTES (in "
        "JavaScript, register the environment resource detector: see docs/preprod.md)"
    )
