"""The insights feed: what Neens raised (a pre-prod regression, …), newest first, a page at a
time. Twin: `GET /insights`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from neens.api.paging import MAX_CURSOR_CHARS
from neens.api.routers import insights as api
from neens.web.guard import Viewer, current_viewer, db_of
from neens.web.render import query, render

router = APIRouter()

ViewerDep = Annotated[Viewer, Depends(current_viewer)]
PER_PAGE = 50


@router.get("/insights")
async def insight_feed(
    request: Request,
    viewer: ViewerDep,
    run_id: Annotated[str | None, Query(max_length=200)] = None,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR_CHARS)] = None,
) -> Response:
    run_id = run_id or None
    page = await api.list_insights(
        viewer.principal, db_of(request), run_id=run_id, limit=PER_PAGE, cursor=cursor
    )
    return render(
        request,
        "insights/list.html",
        viewer,
        section="insights",
        twin="/insights" + query(run_id=run_id, limit=PER_PAGE, cursor=cursor),
        insights=page.insights,
        next_cursor=page.next_cursor,
        cursor=cursor,
        run_id=run_id,
    )
