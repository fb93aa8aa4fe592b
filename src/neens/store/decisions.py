"""What a sweep decision reads besides its runs' answers (`store.run_evidence`): the frozen
items in order, and for the drill-down the items' texts, each arm's answers with their sessions'
outputs, and the judges' notes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.store.models import DatasetItem, Judge, PreprodItem, Score, SweepRun, TraceSession


async def frozen_item_ids(s: AsyncSession, version_id: str) -> Sequence[str]:
    """The dataset version's items, in order."""
    connection = await s.connection()
    rows = await connection.execute(
        select(DatasetItem.id)
        .where(DatasetItem.version_id == version_id)
        .order_by(DatasetItem.position)
    )
    return rows.scalars().all()


@dataclass(frozen=True, slots=True)
class ItemText:
    input: str
    expected_output: str | None


@dataclass(frozen=True, slots=True)
class Answer:
    """One captured answer of an arm's run to one item, with what its judges said."""

    run_id: str
    status: str
    passed: bool | None
    score: float | None
    session_pk: int
    session_id: str
    output: str | None


async def item_texts(s: AsyncSession, item_ids: Sequence[str]) -> dict[str, ItemText]:
    rows = await s.execute(
        select(DatasetItem.id, DatasetItem.input, DatasetItem.expected_output).where(
            DatasetItem.id.in_(list(item_ids))
        )
    )
    return {item_id: ItemText(text, expected) for item_id, text, expected in rows.all()}


async def arm_answers(
    s: AsyncSession, sweep_id: str, arm_id: str, item_ids: Sequence[str]
) -> dict[str, list[Answer]]:
    """Item id -> the arm's captured answers to it, with the session's output."""
    rows = await s.execute(
        select(
            PreprodItem.item_id,
            PreprodItem.run_id,
            PreprodItem.status,
            PreprodItem.passed,
            PreprodItem.score,
            TraceSession.pk,
            TraceSession.trace_id,
            TraceSession.output,
        )
        .select_from(SweepRun)
        .join(PreprodItem, PreprodItem.run_id == SweepRun.run_id)
        .join(TraceSession, TraceSession.pk == PreprodItem.session_pk)
        .where(
            SweepRun.sweep_id == sweep_id,
            SweepRun.arm_id == arm_id,
            PreprodItem.item_id.in_(list(item_ids)),
        )
        .order_by(SweepRun.attempt)
    )
    found: dict[str, list[Answer]] = defaultdict(list)
    for item_id, run_id, status, passed, score, pk, session_id, output in rows.all():
        found[item_id].append(Answer(run_id, status, passed, score, pk, session_id, output))
    return dict(found)


@dataclass(frozen=True, slots=True)
class JudgeNote:
    session_pk: int
    judge_id: str
    judge_name: str
    judge_type: str
    label: str | None
    passed: bool | None
    reason: str


async def judge_notes(s: AsyncSession, session_pks: Sequence[int]) -> list[JudgeNote]:
    """Every judge's verdict on these sessions: labels (classifiers) and reasons."""
    if not session_pks:
        return []
    rows = await s.execute(
        select(
            Score.session_pk,
            Score.judge_id,
            Score.judge_name,
            func.coalesce(Judge.type, ""),
            Score.label,
            Score.passed,
            Score.reason,
        )
        .outerjoin(Judge, Judge.id == Score.judge_id)
        .where(Score.session_pk.in_(list(session_pks)), Score.source == "preprod")
        .order_by(Score.session_pk, Score.judge_name)
    )
    return [JudgeNote(*row) for row in rows.all()]
