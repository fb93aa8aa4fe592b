"""`/insights`: what a team should know, such as a pre-prod regression."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime

from fastapi import APIRouter, Query

from neens.api.deps import AnyKey, DbDep
from neens.api.paging import cursor_query, decode_cursor, next_cursor
from neens.api.schemas.insights import InsightList, InsightOut
from neens.views.insights import insight_list

router = APIRouter(prefix="/insights", tags=["insights"])

_INSIGHTS = "insights"
"""The tag of this list's cursors."""


@router.get("", operation_id="insights-list")
async def list_insights(
    principal: AnyKey,
    db: DbDep,
    run_id: str | None = Query(default=None, description="Only insights about this run."),
    limit: int = Query(default=50, ge=1, le=500, description="Insights per page."),
    cursor: str | None = cursor_query(),
) -> InsightList:
    """Newest first, one page at a time: pass `nextCursor` back as `cursor` (with the same
    `run_id`) for the next page."""
    after = decode_cursor(_INSIGHTS, cursor, (datetime, str), db.secrets)
    infos, end = await insight_list(
        db,
        principal.project_id,
        run_id=run_id,
        limit=limit,
        after=(after[0], after[1]) if after else None,
    )
    return InsightList(
        insights=[InsightOut(**asdict(i)) for i in infos],
        next_cursor=next_cursor(_INSIGHTS, end, db.secrets),
    )
