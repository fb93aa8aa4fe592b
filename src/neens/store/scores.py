"""Judge scores: storing verdicts, and the score catalogue, filterable by source, run and
session."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.judges import Verdict, passes
from neens.store.db import Database
from neens.store.models import Score, TraceSession
from neens.store.tenancy import owned_by
from neens.store.types import storable_text


@dataclass(frozen=True, slots=True)
class ScoreInfo:
    judge_id: str
    judge_name: str
    session_id: str
    source: str
    run_id: str | None
    item_id: str | None
    score: float | None
    label: str | None
    passed: bool | None
    reason: str
    unscored_reason: str | None
    prompt: str | None
    raw_reply: str | None
    created_at: datetime


def score_values(
    verdict: Verdict,
    *,
    project_id: str,
    session_pk: int,
    judge_id: str,
    judge_name: str,
    source: str,
    run_id: str | None = None,
    item_id: str | None = None,
) -> dict[str, Any]:
    """The stored form of one judge's verdict, with the prompt and raw reply behind it (a NUL or
    lone surrogate a model put in its reply is kept as its escape: see `storable_text`)."""
    return {
        "project_id": project_id,
        "session_pk": session_pk,
        "judge_id": judge_id,
        "judge_name": judge_name,
        "run_id": run_id,
        "item_id": item_id,
        "source": source,
        "score": verdict.score,
        "label": verdict.label,
        "passed": passes(verdict.score) if verdict.score is not None else None,
        "reason": storable_text(verdict.reason),
        "unscored_reason": verdict.unscored_reason,
        "prompt": None if verdict.prompt is None else storable_text(verdict.prompt),
        "raw_reply": None if verdict.raw_reply is None else storable_text(verdict.raw_reply),
    }


async def insert_scores(s: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Insert verdicts (`score_values`) in one statement, not through the unit of work: a push
    run stores thousands of them as it goes."""
    if rows:
        await s.execute(insert(cast(Table, Score.__table__)), rows)


async def list_scores(
    db: Database,
    project_id: str,
    *,
    source: str | None,
    run_id: str | None,
    session_id: str | None,
    limit: int,
    before: int | None = None,
) -> tuple[list[ScoreInfo], int | None]:
    """Newest first by row key, from below `before`; returns the page and the key it ends at
    when more follow (None on the last page)."""
    query = (
        select(Score, TraceSession.trace_id)
        .join(TraceSession, TraceSession.pk == Score.session_pk)
        .where(owned_by(Score, project_id))
    )
    if source is not None:
        query = query.where(Score.source == source)
    if run_id is not None:
        query = query.where(Score.run_id == run_id)
    if session_id is not None:
        query = query.where(owned_by(TraceSession, project_id), TraceSession.trace_id == session_id)
    if before is not None:
        query = query.where(Score.pk < before)
    async with db.read() as s:
        rows = (await s.execute(query.order_by(Score.pk.desc()).limit(limit + 1))).all()
    page = rows[:limit]
    end = page[-1][0].pk if len(rows) > limit else None
    return [
        ScoreInfo(
            r.judge_id,
            r.judge_name,
            trace_id,
            r.source,
            r.run_id,
            r.item_id,
            r.score,
            r.label,
            r.passed,
            r.reason,
            r.unscored_reason,
            r.prompt,
            r.raw_reply,
            r.created_at,
        )
        for r, trace_id in page
    ], end
