"""A sweep's per-answer evidence as rows: what an exported evidence bundle holds, one row per
captured answer, read by exactly the rules the comparison adds them up by (`run_evidence`; an arm's
launched runs, answers joined to their captured session), so the bundle's rows add up to the
numbers of the decision served beside them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.store.models import DatasetItem, PreprodItem, TraceSession


@dataclass(frozen=True, slots=True)
class AnswerRow:
    """One captured answer of one run to one item."""

    item_id: str
    run_id: str
    session_id: str
    status: str
    passed: bool | None
    score: float | None
    cost_usd: float | None
    """None when the session is unpriced: unknown, never 0."""
    agent_name: str | None
    """None when the session reported none (an empty name reads as none)."""
    latency_ms: float | None
    output: str | None


@dataclass(frozen=True, slots=True)
class CaseRow:
    item_id: str
    position: int
    input: str
    expected_output: str | None
    metadata: dict[str, Any]


def _answers_query(run_ids: Sequence[str]) -> Any:
    return (
        select(
            PreprodItem.item_id,
            PreprodItem.run_id,
            TraceSession.trace_id,
            PreprodItem.status,
            PreprodItem.passed,
            PreprodItem.score,
            TraceSession.cost_usd,
            func.nullif(TraceSession.agent_name, ""),
            TraceSession.latency_ms,
            TraceSession.output,
        )
        .join(TraceSession, TraceSession.pk == PreprodItem.session_pk)
        .where(PreprodItem.run_id.in_(list(run_ids)))
        .order_by(PreprodItem.position, PreprodItem.run_id)
    )


async def answer_rows(s: AsyncSession, run_ids: Sequence[str]) -> list[AnswerRow]:
    """Every answer the runs captured, ordered by item position in the run, then run id."""
    if not run_ids:
        return []
    rows = await s.execute(_answers_query(run_ids))
    return [AnswerRow(*row) for row in rows.all()]


BATCH = 500
"""Rows read from a cursor at a time by the `stream_…` readers."""


async def stream_answer_rows(
    s: AsyncSession, run_ids: Sequence[str]
) -> AsyncIterator[list[AnswerRow]]:
    """`answer_rows`, `BATCH` rows at a time from a cursor, so a sweep of large answers is never
    held in memory whole."""
    if not run_ids:
        return
    result = await s.stream(_answers_query(run_ids))
    async for rows in result.partitions(BATCH):
        yield [AnswerRow(*row) for row in rows]


def _cases_query(version_id: str) -> Any:
    return (
        select(
            DatasetItem.id,
            DatasetItem.position,
            DatasetItem.input,
            DatasetItem.expected_output,
            DatasetItem.item_metadata,
        )
        .where(DatasetItem.version_id == version_id)
        .order_by(DatasetItem.position)
    )


async def stream_case_rows(s: AsyncSession, version_id: str) -> AsyncIterator[list[CaseRow]]:
    """`case_rows`, `BATCH` rows at a time from a cursor."""
    result = await s.stream(_cases_query(version_id))
    async for rows in result.partitions(BATCH):
        yield [CaseRow(*row) for row in rows]


async def case_rows(s: AsyncSession, version_id: str) -> list[CaseRow]:
    """The frozen items of the dataset version, in order."""
    rows = await s.execute(_cases_query(version_id))
    return [CaseRow(*row) for row in rows.all()]
