"""`/scores`: every judge verdict, with the prompt and raw reply behind it.

Pre-prod scores carry `source: preprod` and production ones `source: production`; filter by
source so the two are never counted together.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Query
from pydantic import Field

from neens.api.deps import AnyKey, DbDep
from neens.api.paging import cursor_query, decode_cursor, next_cursor
from neens.api.schemas.base import ResponseBody
from neens.store.scores import list_scores

router = APIRouter(prefix="/scores", tags=["scores"])

_SCORES = "scores"
"""The tag of this list's cursors."""


class ScoreOut(ResponseBody):
    judge_id: str = Field(description="The judge.")
    judge_name: str = Field(description="The judge's name (the metric).")
    session_id: str = Field(description="The session scored.")
    source: str = Field(description="`preprod` or `production`.")
    run_id: str | None = Field(description="The pre-prod run, for preprod scores.")
    item_id: str | None = Field(description="The frozen item, for preprod scores.")
    score: float | None = Field(description="0..1; null when the judge could not score.")
    label: str | None = Field(description="A classifier's label, or a pass/fail label.")
    passed: bool | None = Field(description="score ≥ 0.7; null without a score.")
    reason: str = Field(description="The judge's reason.")
    unscored_reason: str | None = Field(description="Why there is no score, e.g. no_output.")
    prompt: str | None = Field(description="The exact prompt an LLM judge was sent.")
    raw_reply: str | None = Field(description="The LLM judge's reply, unparsed.")
    created_at: datetime = Field(description="When the verdict was stored (UTC).")


class ScoreList(ResponseBody):
    scores: list[ScoreOut] = Field(description="Newest first.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` (with the same filters) for the next page; null on the last."
    )


@router.get("", operation_id="scores-list")
async def get_scores(
    principal: AnyKey,
    db: DbDep,
    source: Literal["preprod", "production"] | None = Query(
        default=None, description="Only scores of this source."
    ),
    run_id: str | None = Query(default=None, description="Only this pre-prod run's scores."),
    session_id: str | None = Query(default=None, description="Only this session's scores."),
    limit: int = Query(default=100, ge=1, le=1000, description="Scores per page."),
    cursor: str | None = cursor_query(),
) -> ScoreList:
    """Newest first, one page at a time: pass `nextCursor` back as `cursor` with the same
    filters for the next page."""
    after = decode_cursor(_SCORES, cursor, (int,), db.secrets)
    infos, end = await list_scores(
        db,
        principal.project_id,
        source=source,
        run_id=run_id,
        session_id=session_id,
        limit=limit,
        before=after[0] if after else None,
    )
    return ScoreList(
        scores=[ScoreOut(**asdict(i)) for i in infos],
        next_cursor=next_cursor(_SCORES, None if end is None else (end,), db.secrets),
    )
