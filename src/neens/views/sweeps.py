"""Model sweeps as callers read them: the cost preview, create, the detail and the list.

Every arm's numbers are rolled up from the child runs on each read
(`store.sweep_rollup.load_state`), never from counters; a finished child run's verdict is read as
stored on it, and worked out (then stored) only when it is missing or what it rests on changed
(`store.sweep_greens`). A read that finds the conditions diverged (a child run deleted or
altered after the sweep finished) records the sweep `void` before answering, so it stays void.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from neens.domain.sweep_cost import (
    ArmEstimate,
    SweepCaps,
    SweepEstimate,
    TokenHistory,
    check_caps,
    estimate_arm,
    estimate_sweep,
)
from neens.domain.sweeps import SWEEP_TERMINAL, SweepRollup
from neens.errors import Unprocessable
from neens.settings import Settings
from neens.store import sweep_rollup as rollups
from neens.store import sweeps as store
from neens.store.db import Database
from neens.store.models import ModelSweep
from neens.store.pricing import price_book
from neens.store.sweep_greens import Worked, store_greens


@dataclass(frozen=True, slots=True)
class SweepPreview:
    dataset_id: str
    dataset_version_id: str
    item_count: int
    pass_k: int
    arms: list[ArmEstimate]
    estimate: SweepEstimate
    budget_usd: float | None


@dataclass(frozen=True, slots=True)
class SweepView:
    """A sweep and its roll-up, as the detail and the list show it."""

    sweep: ModelSweep
    rollup: SweepRollup
    models: dict[str, str | None]
    """Arm id → the model copied from its connection at create."""
    providers: dict[str, str | None]
    """Arm id → the provider copied from its connection at create; None when not recorded."""
    connections: dict[str, str]
    """Arm id → its agent connection."""
    spent_usd: float
    unpriced_calls: int


def caps_of(settings: Settings) -> SweepCaps:
    return SweepCaps(
        max_arms=settings.sweep_max_arms,
        max_pass_k=settings.sweep_max_pass_k,
        max_total_calls=settings.sweep_max_calls,
    )


async def _estimate(
    db: Database, project_id: str, new: store.NewSweep, settings: Settings
) -> tuple[store.SweepPlan, SweepPreview]:
    async with db.read() as s:
        plan = await store.plan_sweep(s, project_id, new)
        violation = check_caps(len(plan.arms), new.pass_k, plan.item_count, caps_of(settings))
        if violation is not None:
            raise Unprocessable(violation.message, field=violation.field, code=violation.rule)
        prompts = await store.prompts_of(s, plan.dataset_version_id)
        book = await price_book(s, project_id, db)
        arms = []
        for arm in plan.arms:
            history = await store.token_history(s, project_id, arm.connection_id)
            arms.append(
                estimate_arm(
                    label=arm.label,
                    connection_id=arm.connection_id,
                    model=arm.model,
                    # A connection's provider says how Neens reaches it (`agent_http`), not
                    # who serves the model: the price is found from the model name.
                    provider=None,
                    calls=plan.item_count * new.pass_k,
                    history=None if history is None else TokenHistory(*history),
                    prompts=prompts,
                    book=book,
                )
            )
    preview = SweepPreview(
        plan.dataset_id,
        plan.dataset_version_id,
        plan.item_count,
        new.pass_k,
        arms,
        estimate_sweep(arms, new.budget_usd),
        new.budget_usd,
    )
    return plan, preview


async def preview_sweep(
    db: Database, project_id: str, new: store.NewSweep, settings: Settings
) -> SweepPreview:
    """What the sweep would call and cost, and whether create would refuse it on budget;
    writes nothing and calls nothing."""
    return (await _estimate(db, project_id, new, settings))[1]


async def create_sweep(
    db: Database, project_id: str, new: store.NewSweep, settings: Settings
) -> str:
    """Check, estimate, refuse over budget, then store the sweep and launch its first runs."""
    _, preview = await _estimate(db, project_id, new, settings)
    if preview.estimate.would_refuse:
        raise Unprocessable(preview.estimate.refusal or "over the budget", field="budgetUsd")
    async with db.write() as s:
        plan = await store.plan_sweep(s, project_id, new)  # again, in the writing transaction
        return await store.create_sweep(
            s, project_id, new, plan, concurrency=settings.push_concurrency
        )


@dataclass(frozen=True, slots=True)
class SweepStanding:
    """A sweep's statuses, verdicts and models, without progress counts or spend: what a
    decision reads (`rollup.arms[...].items_done` is None)."""

    sweep: ModelSweep
    rollup: SweepRollup
    models: dict[str, str | None]
    """Arm id → the model copied from its connection at create."""


async def sweep_detail(db: Database, project_id: str, sweep_id: str) -> SweepView:
    """The sweep as its child runs say it is now. A read that finds it ended before its
    roll-up job recorded that (the last run's `run.finished` job is a moment behind) records it
    first, so `status` and `completedAt` always agree."""
    view = await _view(db, project_id, sweep_id)
    if await _recorded(db, sweep_id, view.sweep, view.rollup):
        view = await _view(db, project_id, sweep_id)
    return view


async def sweep_standing(db: Database, project_id: str, sweep_id: str) -> SweepStanding:
    """As `sweep_detail`, without counting every item for progress or summing the spend."""
    standing = await _standing(db, project_id, sweep_id)
    if await _recorded(db, sweep_id, standing.sweep, standing.rollup):
        standing = await _standing(db, project_id, sweep_id)
    return standing


async def _recorded(db: Database, sweep_id: str, sweep: ModelSweep, rollup: SweepRollup) -> bool:
    """Record a void or an end the roll-up found and the sweep row does not say yet; True when
    it did (the caller reads the sweep again)."""
    if rollup.status == "void" and sweep.status != "void":
        await rollups.persist_void(db, sweep_id)
        return True
    if rollup.terminal and sweep.status not in SWEEP_TERMINAL:
        await rollups.roll_up_sweep(db, sweep_id)
        return True
    return False


async def _view(db: Database, project_id: str, sweep_id: str) -> SweepView:
    worked: list[Worked] = []
    async with db.read() as s:
        sweep = await store.get_sweep_row(s, project_id, sweep_id)
        view = await _view_of(s, sweep, worked)
    await store_greens(db, worked)
    return view


async def _standing(db: Database, project_id: str, sweep_id: str) -> SweepStanding:
    async with db.read() as s:
        sweep = await store.get_sweep_row(s, project_id, sweep_id)
        state = await rollups.load_state(s, sweep, progress=False)
    await store_greens(db, state.worked)
    return SweepStanding(sweep, state.roll_up(), {arm.id: arm.model for arm in state.arms})


async def _view_of(s: Any, sweep: ModelSweep, worked: list[Worked]) -> SweepView:
    """The sweep's view; the child run verdicts it worked out are added to `worked`, for the
    caller to store once its read is over."""
    state = await rollups.load_state(s, sweep)
    worked.extend(state.worked)
    spent, unpriced = await store.sweep_spend(s, sweep.id)
    return SweepView(
        sweep,
        state.roll_up(),
        {arm.id: arm.model for arm in state.arms},
        {arm.id: arm.model_provider for arm in state.arms},
        {arm.id: arm.agent_connection_id for arm in state.arms},
        spent,
        unpriced,
    )


async def list_sweeps(
    db: Database, project_id: str, *, limit: int, after: tuple[datetime, str] | None
) -> tuple[list[SweepView], tuple[datetime, str] | None]:
    """Newest first; each sweep rolled up from its child runs."""
    worked: list[Worked] = []
    async with db.read() as s:
        rows, end = await store.list_sweep_rows(s, project_id, limit=limit, after=after)
        views = [await _view_of(s, row, worked) for row in rows]
    await store_greens(db, worked)
    return views, end


async def cancel_sweep(db: Database, project_id: str, sweep_id: str) -> SweepView:
    await rollups.cancel_sweep(db, project_id, sweep_id, "cancelled by request")
    return await sweep_detail(db, project_id, sweep_id)
