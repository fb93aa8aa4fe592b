"""Sessions: the list, newest first a page at a time (the API's keyset cursors), filtered by
agent or run; and one session with its span tree. Twins: `GET /sessions`, `GET /sessions/{id}`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, NamedTuple

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from neens.api.paging import MAX_CURSOR_CHARS
from neens.api.routers import sessions as api
from neens.api.schemas.sessions import SpanOut
from neens.web.guard import Viewer, current_viewer, db_of
from neens.web.render import query, render, segment

router = APIRouter()

ViewerDep = Annotated[Viewer, Depends(current_viewer)]
PER_PAGE = 50
PREVIEW_CHARS = 2_000
"""The most of a session's input or output the list shows (behind its expander), read as that
many characters from the database: a prompt can be megabytes. The session's page has more."""


class SpanRow(NamedTuple):
    span: SpanOut
    depth: int


def span_rows(roots: list[SpanOut]) -> Iterator[SpanRow]:
    """The tree in display order, depth first, each span with its depth (for its indent)."""
    stack = [SpanRow(root, 0) for root in reversed(roots)]
    while stack:
        row = stack.pop()
        yield row
        stack.extend(SpanRow(child, row.depth + 1) for child in reversed(row.span.children))


@router.get("/sessions")
async def session_list(
    request: Request,
    viewer: ViewerDep,
    agent_name: str | None = Query(default=None, max_length=500),
    eval_run_id: str | None = Query(default=None, max_length=200),
    cursor: str | None = Query(default=None, max_length=MAX_CURSOR_CHARS),
) -> Response:
    agent_name = agent_name or None
    eval_run_id = eval_run_id or None
    page = await api.sessions_page(
        viewer.principal,
        db_of(request),
        agent_name=agent_name,
        start=None,
        end=None,
        eval_run_id=eval_run_id,
        limit=PER_PAGE,
        cursor=cursor,
        preview_chars=PREVIEW_CHARS + 1,  # one more: a text that long goes on
    )
    filters = {"agent_name": agent_name, "eval_run_id": eval_run_id}
    return render(
        request,
        "sessions/list.html",
        viewer,
        section="sessions",
        twin="/sessions" + query(**filters, limit=PER_PAGE, cursor=cursor),
        sessions=page.sessions,
        preview_chars=PREVIEW_CHARS,
        next_cursor=page.next_cursor,
        cursor=cursor,
        filters=filters,
    )


@router.get("/sessions/{session_id:path}")
async def session_page(request: Request, session_id: str, viewer: ViewerDep) -> Response:
    detail = await api.get_one_session(session_id, viewer.principal, db_of(request))
    return render(
        request,
        "sessions/detail.html",
        viewer,
        section="sessions",
        twin=f"/sessions/{segment(session_id)}",
        session=detail,
        rows=list(span_rows(detail.spans)),
    )
