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
from neens.domain.conventions import Flag
from neens.engine.ingest import ingest_spans
from neens.errors import NotFound, Unprocessable
from neens.ingest.native import decode_native
from neens.store.session_reads import SessionFilter, SessionKey, StoredSession, by_start
from neens.views.sessions import SessionDetail as SessionDetailView
from neens.views.sessions import SpanView, session_detail, session_list

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


def span_out(view: SpanView) -> SpanOut:
    """A span and its children as the API shows them; iterative, as the tree is deep."""
    root = _one_span_out(view)
    stack = [(view, root)]
    while stack:
        node, out = stack.pop()
        for child in node.children:
            child_out = _one_span_out(child)
            out.children.append(child_out)
            stack.append((child, child_out))
    return root


def _one_span_out(v: SpanView) -> SpanOut:
    return SpanOut(
        span_id=v.span_id,
        parent_span_id=v.parent_span_id,
        name=v.name,
        kind=v.kind,
        start_time=v.start_time,
        end_time=v.end_time,
        duration_ms=v.duration_ms,
        status=v.status,
        status_message=v.status_message,
        input=v.input,
        output=v.output,
        model=v.model,
        input_tokens=v.input_tokens,
        output_tokens=v.output_tokens,
        cost_usd=v.cost_usd,
        unpriced_reason=v.unpriced_reason,
        attributes=v.attributes,
        resource_attributes=v.resource_attributes,
        events=v.events,
        warnings=[_warning(flag) for flag in v.warnings],
        children=[],
    )


def session_detail_out(detail: SessionDetailView) -> SessionDetail:
    return SessionDetail(
        **session_out(detail.session).model_dump(), spans=[span_out(s) for s in detail.spans]
    )


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
    return await sessions_page(
        principal,
        db,
        agent_name=agent_name,
        start=start,
        end=end,
        eval_run_id=eval_run_id,
        limit=limit,
        cursor=cursor,
    )


async def sessions_page(
    principal: AnyKey,
    db: DbDep,
    *,
    agent_name: str | None,
    start: datetime | None,
    end: datetime | None,
    eval_run_id: str | None,
    limit: int,
    cursor: str | None,
    preview_chars: int | None = None,
) -> SessionList:
    """`GET /sessions`; with `preview_chars` (the sessions page), inputs and outputs are cut to
    that many characters."""
    start, end = _utc(start, "start"), _utc(end, "end")
    if start is not None and end is not None and end <= start:
        raise Unprocessable("end must be after start", field="end")
    filt = SessionFilter(agent_name=agent_name, start=start, end=end, eval_run_id=eval_run_id)
    kind, shape = (_SESSIONS_BY_START, (datetime, int)) if by_start(filt) else (_SESSIONS, (int,))
    after = decode_cursor(kind, cursor, shape, db.secrets)
    page, last = await session_list(
        db,
        principal.project_id,
        filt,
        limit=limit,
        after=cast("SessionKey | None", after),
        preview_chars=preview_chars,
    )
    return SessionList(
        sessions=[session_out(s) for s in page], next_cursor=next_cursor(kind, last, db.secrets)
    )


@router.get("/{session_id:path}", operation_id="sessions-get")
async def get_one_session(session_id: str, principal: AnyKey, db: DbDep) -> SessionDetail:
    """A session with its span tree; each LLM span carries its own cost or unpriced reason.

    A session id may hold `/` (sent as is or as `%2F`): the id is the rest of the path."""
    if not session_id:
        raise NotFound("no session id in the path: GET /sessions lists them", field="session_id")
    return session_detail_out(await session_detail(db, principal.project_id, session_id))
