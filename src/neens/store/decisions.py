"""The evidence a sweep decision is computed from: one row per captured answer of each child run.

Only ids, verdicts, costs and agent names are read, never a session's texts or span tree, so a
comparison over 6 arms × 3 runs × 10,000 items reads about as much as a bare SELECT of its
score rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.store.models import DatasetItem, PreprodItem, SweepRun, TraceSession

AnswerRow = tuple[str, str, bool, bool | None, float | None, str | None]
"""(item_id, run_id, scored, passed, cost_usd, agent_name): one captured answer."""


async def sweep_answers(s: AsyncSession, sweep_id: str) -> dict[str, list[AnswerRow]]:
    """Arm id -> every answer its launched runs captured (items never captured are absent)."""
    rows = await s.execute(
        select(
            SweepRun.arm_id,
            PreprodItem.item_id,
            PreprodItem.run_id,
            PreprodItem.status == "scored",
            PreprodItem.passed,
            TraceSession.cost_usd,
            TraceSession.agent_name,
        )
        .join(PreprodItem, PreprodItem.run_id == SweepRun.run_id)
        .join(TraceSession, TraceSession.pk == PreprodItem.session_pk)
        .where(SweepRun.sweep_id == sweep_id)
    )
    by_arm: dict[str, list[Any]] = defaultdict(list)
    for arm_id, *answer in rows.all():
        by_arm[arm_id].append(answer)
    return dict(by_arm)


async def frozen_item_ids(s: AsyncSession, version_id: str) -> Sequence[str]:
    """The dataset version's items, in order."""
    return list(
        await s.scalars(
            select(DatasetItem.id)
            .where(DatasetItem.version_id == version_id)
            .order_by(DatasetItem.position)
        )
    )
