"""The evidence a sweep decision is computed from: each arm's captured answers added up per item.

Only verdicts, costs and agent names are read, never a session's texts or span tree, and they
are added up in SQL (one GROUP BY per arm, over covering indexes of pre-prod items and
sessions), so a comparison over 6 arms × 3 runs × 10,000 items reads one row per item and arm
rather than one per answer: about as much as a bare SELECT of its score rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Integer, and_, case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.decision_types import NO_TALLIES, ItemTallies
from neens.store.models import DatasetItem, Judge, PreprodItem, Score, SweepRun, TraceSession

_BASE = 256
"""Each answer adds a code to its item's one sum: 1 (an answer), plus _BASE if scored, plus
_BASE² if it passed, or _BASE³ if it has no verdict; the sum holds the four counts, one per
base-256 digit. An arm has at most `MAX_RUNS` runs and a run answers an item at most once, so no
count reaches _BASE."""
MAX_RUNS = _BASE - 1


def _answer_code() -> Any:
    scored = PreprodItem.status == "scored"
    return case(
        (and_(scored, PreprodItem.passed.is_(True)), 1 + _BASE + _BASE**2),
        (and_(scored, PreprodItem.passed.is_(None)), 1 + _BASE + _BASE**3),
        (scored, 1 + _BASE),
        else_=1,
    )


async def arm_tallies(s: AsyncSession, run_ids: Sequence[str]) -> ItemTallies:
    """One arm's captured answers (those of its launched runs `run_ids`) added up per item, by
    the definitions of `RepeatColumns.tallies`; items it never captured are absent.

    A run captures an item at most once (`preprod_items` is unique on run and item), so an
    item's scored answers come from as many distinct runs, and its cost columns are one per
    run: each holds the one cost of that run's answer, exactly as stored."""
    if not run_ids:
        return NO_TALLIES
    if len(run_ids) > MAX_RUNS:
        raise ValueError(f"an arm has at most {MAX_RUNS} runs, got {len(run_ids)}")
    connection = await s.connection()
    name: Any = func.nullif(TraceSession.agent_name, "")
    if connection.dialect.name == "postgresql":
        name = name.collate("C")  # by code point, as SQLite's BINARY and Python's min and max
    rows = (
        await connection.execute(
            select(
                PreprodItem.item_id,
                func.sum(_answer_code(), type_=Integer),
                func.min(name),
                func.max(name),
                *(
                    func.max(case((PreprodItem.run_id == run_id, TraceSession.cost_usd)))
                    for run_id in run_ids
                ),
            )
            .join(TraceSession, TraceSession.pk == PreprodItem.session_pk)
            .where(PreprodItem.run_id.in_(list(run_ids)))
            .group_by(PreprodItem.item_id)
        )
    ).all()
    if not rows:
        return NO_TALLIES
    item_id, codes, lowest, highest, *costs = zip(*rows, strict=True)
    digits = np.asarray(codes, dtype=np.int64)
    scored = ((digits // _BASE) % _BASE).tolist()
    return ItemTallies(
        item_id=item_id,
        cases=(digits % _BASE).tolist(),
        scored=scored,
        passed=((digits // _BASE**2) % _BASE).tolist(),
        unjudged=(digits // _BASE**3).tolist(),
        scored_runs=scored,
        lowest_agent=lowest,
        highest_agent=highest,
        costs=costs,
    )


async def frozen_item_ids(s: AsyncSession, version_id: str) -> Sequence[str]:
    """The dataset version's items, in order."""
    return list(
        await s.scalars(
            select(DatasetItem.id)
            .where(DatasetItem.version_id == version_id)
            .order_by(DatasetItem.position)
        )
    )


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
