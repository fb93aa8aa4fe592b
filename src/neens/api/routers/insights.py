"""`/insights`: what a team should know, such as a pre-prod regression."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Query

from neens.api.deps import AnyKey, DbDep
from neens.api.schemas.insights import InsightList, InsightOut
from neens.store import insights as store

router = APIRouter(prefix="/insights", tags=["insights"])


@router.get("", operation_id="insights-list")
async def list_insights(
    principal: AnyKey,
    db: DbDep,
    run_id: str | None = Query(default=None, description="Only insights about this run."),
    limit: int = Query(default=50, ge=1, le=500, description="Insights to return."),
) -> InsightList:
    infos = await store.list_insights(db, principal.project_id, run_id=run_id, limit=limit)
    return InsightList(insights=[InsightOut(**asdict(i)) for i in infos])
