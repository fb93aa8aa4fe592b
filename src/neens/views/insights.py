"""The insights feed: what Neens raised for a project, newest first."""

from __future__ import annotations

from neens.store import insights as store
from neens.store.db import Database


async def insight_list(
    db: Database,
    project_id: str,
    *,
    run_id: str | None,
    limit: int,
    after: store.InsightKey | None,
) -> tuple[list[store.InsightInfo], store.InsightKey | None]:
    """A page of insights after `after`, and where it ends (None on the last page)."""
    return await store.list_insights(db, project_id, run_id=run_id, limit=limit, after=after)
