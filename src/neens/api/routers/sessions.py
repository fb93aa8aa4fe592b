"""Sessions: `POST /sessions` (the native session JSON) and reading sessions with span trees."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, cast

from fastapi import APIRouter, Query
from pydantic import AwareDatetime, BeforeValidator

from neens.api.deps import AnyKey, DbDep, SpanWriterDep, WorkerDep
from neens.api.paging import cursor_query, decode_cursor, next_cursor
from neens.api.schemas.sessions import (
    IngestResult,
    NativeSessionIn,
    SessionDetail,
    SessionList,
    SessionOut,
    SpanOut,
    WarningOut,
)
from neens.domain.conventions import Flag, span_view
from neens.domain.pricing import PriceBook, span_cost
from neens.domain.span_tree import (
    NESTED_LEVELS,
    SpanNode,
    parent_cycle_members,
    span_tree,
    walk,
)
from neens.domain.spans import SpanRecord
from neens.engine.ingest import ingest_spans
from neens.errors import Unprocessable
from neens.ingest.native import decode_native
from neens.store import pricing
from neens.store.session_reads import (
    SessionFilter,
    SessionKey,
    StoredSession,
    by_start,
    get_session,
    list_sessions,
)

router = APIRouter(prefix="/sessions", tags=["sessions"])


def session_out(stored: StoredSession) -> SessionOut:
    s = stored.summary
    return SessionOut(
        id=stored.trace_id,
        source=stored.source,
        agent_name=s.agent_name,
        input=s.input,
        output=s.output,
        models=list(s.models),
        input_tokens=s.input_tokens,
        output_tokens=s.output_tokens,
        latency_ms=s.latency_ms,
        step_count=s.step_count,
        span_count=s.span_count,
        cost_usd=s.cost_usd,
        cost_status=s.cost_status,
        unpriced_models=list(s.unpriced_models),
        status=s.status,
        started_at=s.started_at,
        ended_at=s.ended_at,
        eval_run_id=s.eval_run_id,
        dataset_item_id=s.dataset_item_id,
        version_label=s.version_label,
        warnings=[_warning(flag) for flag in s.warnings],
        created_at=stored.created_at,
        updated_at=stored.updated_at,
    )


def _warning(flag: Flag) -> WarningOut:
    return WarningOut(code=flag.code, message=flag.message)


def _span_out(node: SpanNode, book: PriceBook, on_cycle: bool) -> SpanOut:
    """One span without its children (the caller places them)."""
    r = node.record
    view = span_view(r)
    cost = span_cost(view, book) if view.kind == "llm" else None
    duration = (
        (r.end_time - r.start_time).total_seconds() * 1000 if r.start_time and r.end_time else None
    )
    flags = list(view.flags)
    if on_cycle:
        flags.append(
            Flag(
                "parent_cycle", "this span is its own ancestor through parent ids; shown as a root"
            )
        )
    if cost is not None and cost.overflow and cost.unpriced_reason is not None:
        flags.append(Flag("cost_overflow", cost.unpriced_reason))
    return SpanOut(
        span_id=r.span_id,
        parent_span_id=r.parent_span_id,
        name=r.name,
        kind=view.kind,
        start_time=r.start_time,
        end_time=r.end_time,
        duration_ms=duration,
        status=r.status_code,
        status_message=r.status_message,
        input=view.input,
        output=view.output,
        model=view.model,
        input_tokens=view.input_tokens,
        output_tokens=view.output_tokens,
        cost_usd=cost.usd if cost else None,
        unpriced_reason=cost.unpriced_reason if cost else None,
        attributes=r.attributes,
        resource_attributes=r.resource_attributes,
        events=r.events,
        warnings=[_warning(flag) for flag in flags],
        children=[],
    )


def span_tree_out(records: list[SpanRecord], book: PriceBook) -> list[SpanOut]:
    """The span tree as the API shows it, built without recursion and nested at most
    `NESTED_LEVELS` deep (see there): a span deeper than that joins its ancestor's
    descendants at the last nested level."""
    on_cycle = parent_cycle_members(records)
    roots: list[SpanOut] = []
    holder: dict[int, SpanOut] = {}
    """id(node) → the SpanOut whose `children` receive that node's children."""
    for node, parent, depth in walk(span_tree(records)):
        out = _span_out(node, book, node.record.span_id in on_cycle)
        if parent is None:
            roots.append(out)
        else:
            holder[id(parent)].children.append(out)
        holder[id(node)] = out if depth < NESTED_LEVELS else holder[id(parent)]
    return roots


def _native_payload(body: NativeSessionIn) -> dict[str, Any]:
    """The validated body as the decoder reads it (only the fields sent), without serialising
    it again: pydantic refuses to serialise values nested past its own depth limit, and the
    decoder must see them to refuse those spans one by one."""
    return {
        "session": {name: getattr(body.session, name) for name in body.session.model_fields_set},
        "spans": [
            {name: getattr(span, name) for name in span.model_fields_set} for span in body.spans
        ],
    }


@router.post("", operation_id="sessions-ingest")
async def ingest_session(
    body: NativeSessionIn, principal: AnyKey, writer: SpanWriterDep, worker: WorkerDep
) -> IngestResult:
    """Store a session in the native JSON format. Sending the same session id again merges the
    new spans into it; a span id already stored is kept as first received."""
    batch = decode_native(_native_payload(body))
    flagged: list[str] = []
    rejections = list(batch.rejections)
    if batch.spans:
        ingested = await ingest_spans(writer, principal.project_id, batch.spans, "native")
        if ingested.queued:
            worker.notify()
        flagged = ingested.flagged
        rejections += ingested.rejected
    return IngestResult(
        session_id=body.session.id,
        accepted_spans=len(batch.spans) + len(batch.rejections) - len(rejections),
        rejected_spans=len(rejections),
        rejections=[r.reason for r in rejections],
        warnings=flagged,
    )


_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _iso_text(value: Any) -> Any:
    """Only ISO 8601 text: pydantic would also read `0.5` as a Unix time, which the documented
    (and published) format is not."""
    if isinstance(value, str) and not _ISO_DATE.match(value):
        raise ValueError("must be an ISO 8601 instant with an offset, e.g. 2026-11-30T08:00:00Z")
    return value


_SESSIONS = "sessions"
_SESSIONS_BY_START = "sessions-by-start"
"""The tags of this list's cursors: in row-key order, and in start order (with a time filter)."""

Instant = Annotated[AwareDatetime, BeforeValidator(_iso_text)]


def _utc(value: datetime | None, field: str) -> datetime | None:
    """An instant filter in UTC; one whose UTC form falls outside years 1–9999 is a 422."""
    if value is None:
        return None
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise Unprocessable(
            f"{field} is out of range once converted to UTC; give an instant between years 1 "
            "and 9999",
            field=field,
        ) from None


@router.get("", operation_id="sessions-list")
async def get_sessions(
    principal: AnyKey,
    db: DbDep,
    agent_name: str | None = Query(default=None, description="Only this agent's sessions."),
    start: Instant | None = Query(
        default=None, description="Sessions that started at or after this instant (ISO 8601)."
    ),
    end: Instant | None = Query(
        default=None, description="Sessions that started before this instant (ISO 8601)."
    ),
    eval_run_id: str | None = Query(default=None, description="Only traces of this run."),
    limit: int = Query(default=50, ge=1, le=500, description="Sessions per page."),
    cursor: str | None = cursor_query(),
) -> SessionList:
    """Newest first, one page at a time: pass `nextCursor` back as `cursor` with the same
    filters for the next page. Sessions are listed in the order Neens first received them, or,
    with `start` or `end`, by when they started."""
    start, end = _utc(start, "start"), _utc(end, "end")
    if start is not None and end is not None and end <= start:
        raise Unprocessable("end must be after start", field="end")
    filt = SessionFilter(agent_name=agent_name, start=start, end=end, eval_run_id=eval_run_id)
    kind, shape = (_SESSIONS_BY_START, (datetime, int)) if by_start(filt) else (_SESSIONS, (int,))
    after = decode_cursor(kind, cursor, shape)
    page, last = await list_sessions(
        db,
        principal.project_id,
        filt,
        limit=limit,
        after=cast("SessionKey | None", after),
    )
    return SessionList(sessions=[session_out(s) for s in page], next_cursor=next_cursor(kind, last))


@router.get("/{session_id}", operation_id="sessions-get")
async def get_one_session(session_id: str, principal: AnyKey, db: DbDep) -> SessionDetail:
    """A session with its span tree; each LLM span carries its own cost or unpriced reason."""
    stored = await get_session(db, principal.project_id, session_id)
    book = PriceBook(await pricing.list_prices(db, principal.project_id))
    return SessionDetail(
        **session_out(stored).model_dump(),
        spans=span_tree_out(stored.spans, book),
    )
