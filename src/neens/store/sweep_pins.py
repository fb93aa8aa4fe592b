"""What an unfinished sweep has pinned: the connections its arms call and the judges its runs
are scored by. Each arm creates its k runs one after another, from the connection and the
judges as they are at that moment; a change in between would have scored or called later runs
differently from earlier ones (another model, another Primary Score) under one set of
conditions. Such a change is refused, naming the sweeps, until they finish or are cancelled."""

from __future__ import annotations

from typing import Final

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.errors import Conflict
from neens.store.models import Judge, ModelSweep, SweepArm
from neens.store.tenancy import in_project, owned_by

UNFINISHED: Final = ("pending", "running")

CONNECTION_CONDITIONS: Final = frozenset(
    {"url", "model", "provider", "request_format", "answer_path"}
)
"""The fields of a connection that decide what an arm calls and records; its name does not, and
its headers (credentials, which may need rotating mid-sweep) may change."""


async def sweeps_calling(s: AsyncSession, project_id: str, connection_id: str) -> list[str]:
    """Ids of the project's unfinished sweeps with an arm on `connection_id`."""
    rows = await s.scalars(
        select(ModelSweep.id)
        .join(SweepArm, SweepArm.sweep_id == ModelSweep.id)
        .where(
            owned_by(ModelSweep, project_id),
            ModelSweep.status.in_(UNFINISHED),
            SweepArm.agent_connection_id == connection_id,
        )
        .order_by(ModelSweep.id)
        .distinct()
    )
    return list(rows)


async def sweeps_scoring_with(s: AsyncSession, project_id: str, judge_id: str) -> list[str]:
    """Ids of the project's unfinished sweeps whose judges include `judge_id`, directly or as a
    component of a composite they use (at any depth)."""
    sweeps = (
        await s.execute(
            select(ModelSweep.id, ModelSweep.judge_ids).where(
                owned_by(ModelSweep, project_id), ModelSweep.status.in_(UNFINISHED)
            )
        )
    ).all()
    if not sweeps:
        return []
    composites = {
        row.id: [part["judgeId"] for part in row.config.get("components", [])]
        for row in await s.scalars(in_project(Judge, project_id).where(Judge.type == "composite"))
    }
    found = []
    for sweep_id, judge_ids in sweeps:
        seen: set[str] = set()
        frontier = list(judge_ids or [])
        while frontier:
            current = frontier.pop()
            if current in seen:
                continue
            seen.add(current)
            frontier.extend(composites.get(current, []))
        if judge_id in seen:
            found.append(sweep_id)
    return sorted(found)


def refuse_while_pinned(what: str, sweep_ids: list[str], field: str) -> None:
    """409 naming the sweeps that pinned `what`, when there are any."""
    if not sweep_ids:
        return
    more = len(sweep_ids) - 5
    shown = ", ".join(sweep_ids[:5]) + (f" and {more} more" if more > 0 else "")
    plural = "s" if len(sweep_ids) > 1 else ""
    raise Conflict(
        f"{what} is part of the conditions of the unfinished sweep{plural} {shown}: changing "
        "it now would call or score that sweep's later runs differently from its earlier ones; "
        "wait until it finishes or cancel it (neens sweep cancel ID)",
        field=field,
    )
