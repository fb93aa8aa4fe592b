"""Finding the stored calls a replay names, in the store `neens serve` ingests traces into.

A reference (REF) is read as follows, the first match winning:

- `latest`: the newest session (by start, then arrival) with a replayable call;
- a session's trace id, exactly as ingested;
- either of those with `#N`: the session's call N, counting its replayable calls in start order
  from 0 (`#-1` is the last one, `#-2` the one before); without `#N`, `exp replay` takes the
  last call and `exp ab` / `--session` all of them;
- a span id, exactly as ingested: that one LLM call.

A replayable call is an LLM span whose request messages were recorded (`replay_calls`). The
store may hold several projects; `--project` (a project id or name) limits the search to one.
"""

from __future__ import annotations

from dataclasses import dataclass

from neens_eval.errors import ConfigError
from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.conventions import span_view
from neens.domain.pricing import PriceBook
from neens.exp.replay_calls import RecordedCall, recorded_call
from neens.store.db import Database
from neens.store.models import Project, Span, TraceSession
from neens.store.pricing import price_book
from neens.store.sessions import log_events_by_span, record_from_row

LATEST_SCAN = 200
"""Sessions looked at, newest first, for `latest`: enough to step over sessions that made no
model call (a health check, a tool-only trace)."""


@dataclass(frozen=True, slots=True)
class SessionCalls:
    trace_id: str
    project_id: str
    calls: list[RecordedCall]
    unreplayable: int
    """LLM spans of the session whose request messages were not recorded."""


@dataclass(frozen=True, slots=True)
class Selected:
    """What a REF named: the calls to replay, from one session of one project."""

    ref: str
    session: SessionCalls
    calls: list[RecordedCall]
    prices: PriceBook


async def _project_id(s: AsyncSession, project: str | None) -> str | None:
    if project is None:
        return None
    found = list(
        await s.scalars(
            select(Project.id).where(or_(Project.id == project, Project.name == project))
        )
    )
    if not found:
        raise ConfigError(f"--project {project}: no project with this id or name in this store")
    if len(found) > 1:
        raise ConfigError(
            f"--project {project}: {len(found)} projects have this name; give the project id"
        )
    return found[0]


async def session_calls(s: AsyncSession, row: TraceSession) -> SessionCalls:
    spans = await s.scalars(
        select(Span).where(Span.session_pk == row.pk).order_by(Span.start_time, Span.pk)
    )
    conn = await s.connection()
    events = await conn.run_sync(log_events_by_span, [row.pk])
    calls: list[RecordedCall] = []
    unreplayable = 0
    for span in spans:
        record = record_from_row(span, row.trace_id, events.get((row.pk, span.span_id)))
        view = span_view(record)
        if view.kind != "llm":
            continue
        call = recorded_call(record, view, len(calls))
        if call is None:
            unreplayable += 1
        else:
            calls.append(call)
    return SessionCalls(row.trace_id, row.project_id, calls, unreplayable)


def _in(project_id: str | None) -> list[object]:
    return [] if project_id is None else [TraceSession.project_id == project_id]


async def _latest(s: AsyncSession, project_id: str | None) -> SessionCalls | None:
    rows = await s.scalars(
        select(TraceSession)
        .where(*_in(project_id))  # type: ignore[arg-type]
        .order_by(TraceSession.started_at.desc().nulls_last(), TraceSession.pk.desc())
        .limit(LATEST_SCAN)
    )
    for row in rows:
        found = await session_calls(s, row)
        if found.calls:
            return found
    return None


async def _by_trace(s: AsyncSession, trace_id: str, project_id: str | None) -> SessionCalls | None:
    rows = list(
        await s.scalars(
            select(TraceSession).where(TraceSession.trace_id == trace_id, *_in(project_id))  # type: ignore[arg-type]
        )
    )
    if len(rows) > 1:
        raise ConfigError(
            f"REF {trace_id}: sessions of {len(rows)} projects have this id; name one with "
            "--project"
        )
    return await session_calls(s, rows[0]) if rows else None


async def _by_span(
    s: AsyncSession, span_id: str, project_id: str | None
) -> tuple[SessionCalls, list[RecordedCall]] | None:
    rows = list(
        await s.execute(
            select(TraceSession, Span.span_id)
            .join(Span, Span.session_pk == TraceSession.pk)
            .where(Span.span_id == span_id, *_in(project_id))  # type: ignore[arg-type]
        )
    )
    if not rows:
        return None
    if len(rows) > 1:
        raise ConfigError(
            f"REF {span_id}: {len(rows)} stored spans have this id; name the call as "
            "TRACE_ID#N, or limit the search with --project"
        )
    session = await session_calls(s, rows[0][0])
    calls = [call for call in session.calls if call.span_id == span_id]
    if not calls:
        raise ConfigError(
            f"REF {span_id}: this span is not a model call whose request messages were "
            "recorded, so there is nothing to send again"
        )
    return session, calls


def _index(text: str, ref: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(
            f"REF {ref}: #{text} is not a call number (use #0 for the first call, #-1 for the last)"
        ) from None


async def select_calls(
    db: Database, ref: str, *, project: str | None, whole: bool, limit: int | None = None
) -> Selected:
    """The calls `ref` names (see the module docstring); with `whole` and no `#N`, every call
    of the session, the first `limit` of them when given. ConfigError (exit 2) naming the
    reference when it names nothing replayable."""
    async with db.read() as s:
        project_id = await _project_id(s, project)
        name, hashed, number = ref.partition("#")
        if not name:
            raise ConfigError(f"REF {ref}: name a session (latest, a trace id) or a span id")
        session = (
            await _latest(s, project_id)
            if name == "latest"
            else await _by_trace(s, name, project_id)
        )
        if session is None and not hashed and name != "latest":
            by_span = await _by_span(s, name, project_id)
            if by_span is not None:
                found, calls = by_span
                return Selected(ref, found, calls, await price_book(s, found.project_id))
        if session is None:
            where = "" if project is None else f" of project {project}"
            if name == "latest":
                raise ConfigError(
                    f"REF latest: no session{where} in this store has a model call with its "
                    "request messages recorded"
                )
            raise ConfigError(f"REF {ref}: no session or span with this id{where} in this store")
        if not session.calls:
            raise ConfigError(
                f"REF {ref}: session {session.trace_id} has no model call with its request "
                f"messages recorded ({session.unreplayable} LLM spans without them)"
            )
        if hashed:
            index = _index(number, ref)
            if not -len(session.calls) <= index < len(session.calls):
                raise ConfigError(
                    f"REF {ref}: session {session.trace_id} has {len(session.calls)} replayable "
                    f"calls (#0 to #{len(session.calls) - 1}, or #-1 for the last)"
                )
            calls = [session.calls[index]]
        elif whole:
            calls = session.calls[:limit] if limit is not None else session.calls
        else:
            calls = session.calls[-1:]
        return Selected(ref, session, calls, await price_book(s, session.project_id))
