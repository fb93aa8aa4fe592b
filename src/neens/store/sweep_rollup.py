"""A sweep rolled up from its child runs, and the ways a sweep ends early (cancel, budget, void).

Everything is recomputed from the child runs as persisted (`domain.sweeps.roll_up`), under the
sweep's row lock; a roll-up that runs twice changes nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.run_lifecycle import TERMINAL as RUN_TERMINAL
from neens.domain.sweeps import (
    SWEEP_TERMINAL,
    ArmRows,
    ChildRun,
    Conditions,
    Slot,
    SweepRollup,
    SweepStatus,
    arm_shares,
    roll_up,
)
from neens.store.db import Database
from neens.store.models import ModelSweep, PreprodRun, SweepArm, SweepRun
from neens.store.run_evidence import pack_finished_runs
from neens.store.run_lifecycle import move
from neens.store.runs import status_counts
from neens.store.sweep_greens import Worked, greens, keep_greens
from neens.store.sweeps import arms_of, launch, sweep_spend
from neens.store.tenancy import SWEEP, owned
from neens.store.types import storable_text, utcnow


@dataclass(frozen=True, slots=True)
class SweepState:
    """A sweep's row and its arms' rows with their child runs, as they are now."""

    sweep: ModelSweep
    arms: list[SweepArm]
    rows: list[ArmRows]
    worked: list[Worked]
    """Child run verdicts this load worked out, to be stored (`keep_greens`, `store_greens`)."""

    def roll_up(self) -> SweepRollup:
        sweep = self.sweep
        return roll_up(
            pinned_conditions(sweep),
            self.rows,
            item_count=sweep.item_count,
            stored_status=_status(sweep.status),
            stored_reason=sweep.reason,
            stored_void_reason=sweep.void_reason,
            stored_diverged=list(sweep.diverged_arms),
        )


def pinned_conditions(sweep: ModelSweep) -> Conditions:
    return Conditions.of(
        dataset_version_id=sweep.dataset_version_id,
        judge_ids=[str(j) for j in sweep.judge_ids],
        pass_k=sweep.pass_k,
        version_label=sweep.version_label,
        gate=dict(sweep.gate),
    )


def _status(text: str) -> SweepStatus:
    statuses: dict[str, SweepStatus] = {
        "pending": "pending",
        "running": "running",
        "completed": "completed",
        "completed_with_failures": "completed_with_failures",
        "failed": "failed",
        "cancelled": "cancelled",
        "void": "void",
    }
    return statuses[text]


async def load_state(s: AsyncSession, sweep: ModelSweep, *, progress: bool = True) -> SweepState:
    """Everything the roll-up reads, from the child runs as persisted; without `progress`, the
    items done are not counted (None), which spares a scan of every item."""
    arms = await arms_of(s, sweep.id)
    slots = list(
        await s.scalars(
            select(SweepRun).where(SweepRun.sweep_id == sweep.id).order_by(SweepRun.attempt)
        )
    )
    run_ids = [slot.run_id for slot in slots if slot.run_id is not None]
    runs = {
        run.id: run
        for run in await s.scalars(
            select(PreprodRun)
            .where(PreprodRun.id.in_(run_ids))
            # Verdicts stored earlier in this transaction are read, not the loaded copies.
            .execution_options(populate_existing=True)
        )
    }
    counts = await status_counts(s, list(runs)) if progress else {}
    green, worked = await greens(s, sweep, arms, slots, runs)
    rows = []
    for arm in arms:
        arm_slots = []
        for slot in (slot for slot in slots if slot.arm_id == arm.id):
            run = runs.get(slot.run_id) if slot.run_id is not None else None
            child = None
            if run is not None:
                done = counts.get(run.id)
                child = ChildRun(
                    run_id=run.id,
                    status=run.status,
                    dataset_version_id=run.dataset_version_id,
                    judge_ids=tuple(str(j) for j in run.judge_ids),
                    version_label=run.version_label,
                    gate=dict(run.gate),
                    item_count=run.item_count,
                    items_done=None
                    if done is None
                    else done.get("scored", 0) + done.get("error", 0),
                    green=green.get(run.id),
                    error=run.error,
                )
            arm_slots.append(Slot(slot.attempt, slot.run_id, child))
        rows.append(
            ArmRows(
                arm.id,
                arm.label,
                "failed"
                if arm.status == "failed"
                else "cancelled"
                if arm.status == "cancelled"
                else "pending",
                arm.error,
                arm_slots,
            )
        )
    return SweepState(sweep, arms, rows, worked)


async def roll_up_sweep(db: Database, sweep_id: str) -> SweepRollup | None:
    """Recompute the sweep from its child runs, persist what changed, and launch each arm's
    next run when its previous one finished. None when the sweep no longer exists."""
    worked: list[Worked] = []
    finished: list[str] = []
    version_id = ""
    async with db.read() as s:
        # The runs' verdicts first, outside the write, stored at its start: a write on SQLite
        # holds the one write lock every answer of every arm waits on.
        known = await s.get(ModelSweep, sweep_id)
        if known is not None:
            known_state = await load_state(s, known)
            worked = known_state.worked
            version_id = known.dataset_version_id
            finished = [
                slot.run_id
                for arm in known_state.rows
                for slot in arm.slots
                if slot.run_id is not None
                and slot.run is not None
                and slot.run.status in RUN_TERMINAL
            ]
    rolled = await _roll_up(db, sweep_id, worked)
    # The finished runs' answers packed for sweep decisions, after the write, so the next
    # run's launch does not wait for it.
    await pack_finished_runs(db, version_id, finished)
    return rolled


async def _roll_up(db: Database, sweep_id: str, worked: list[Worked]) -> SweepRollup | None:
    async with db.write() as s:
        sweep = await s.scalar(
            select(ModelSweep).where(ModelSweep.id == sweep_id).with_for_update()
        )
        if sweep is None:
            return None
        await keep_greens(s, worked)
        state = await load_state(s, sweep)
        await keep_greens(s, state.worked)
        rolled = state.roll_up()
        if not rolled.terminal and sweep.budget_usd is not None:
            spent, _ = await sweep_spend(s, sweep.id)
            if spent > sweep.budget_usd:
                await _cancel(s, sweep, budget_reason(sweep.budget_usd, spent))
                return (await load_state(s, sweep)).roll_up()
        await _persist(s, state, rolled)
        if not rolled.terminal:
            await _rebalance(s, state, rolled)
            for arm_row, arm in zip(state.arms, rolled.arms, strict=True):
                attempt = arm.next_attempt()
                if attempt is not None:
                    await launch(s, sweep, arm_row, attempt)
        return rolled


async def _persist(s: AsyncSession, state: SweepState, rolled: SweepRollup) -> None:
    sweep = state.sweep
    for arm_row, arm in zip(state.arms, rolled.arms, strict=True):
        arm_row.status = arm.status
        arm_row.error = None if arm.error is None else storable_text(arm.error)
    if sweep.status in SWEEP_TERMINAL:
        return  # terminal is final: a void, cancelled or finished sweep never changes status
    sweep.status = rolled.status
    if rolled.status == "void":
        sweep.void_reason = storable_text(rolled.void_reason or "")
        sweep.diverged_arms = list(rolled.diverged_arms)
        await _cancel_runs(s, state)
    elif rolled.reason is not None:
        sweep.reason = storable_text(rolled.reason)
    if rolled.terminal:
        sweep.completed_at = utcnow()


async def _rebalance(s: AsyncSession, state: SweepState, rolled: SweepRollup) -> None:
    """Hand the calls of arms that are done (all k runs finished, failed or cancelled) to the
    arms still going, so a dead or fast arm does not leave part of the sweep's concurrency idle.

    The arms' `concurrency` always adds up to what the sweep may have in flight: a done arm
    holds 0, the others `arm_shares` of the total, in position order. A running child run
    takes its arm's new share (`push_concurrency`; its push job reads it within a second) and
    the arm's next runs are launched with it."""
    total = sum(arm.concurrency for arm in state.arms)
    going = [row for row, arm in zip(state.arms, rolled.arms, strict=True) if not arm.terminal]
    shares = dict(zip((row.id for row in going), arm_shares(total, len(going)), strict=True))
    changed = []
    for row in state.arms:
        share = shares.get(row.id, 0)
        if row.concurrency != share:
            row.concurrency = share
            if share:
                changed.append(row)
    if not changed:
        return
    for row in changed:
        run_ids = [
            slot.run_id
            for arm in state.rows
            if arm.id == row.id
            for slot in arm.slots
            if slot.run_id is not None
        ]
        await s.execute(
            update(PreprodRun)
            .where(PreprodRun.id.in_(run_ids), PreprodRun.status.not_in(list(RUN_TERMINAL)))
            .values(push_concurrency=row.concurrency)
        )


async def persist_void(db: Database, sweep_id: str) -> None:
    """Record a void found on read (a child run deleted after the sweep finished, say)."""
    async with db.write() as s:
        sweep = await s.scalar(
            select(ModelSweep).where(ModelSweep.id == sweep_id).with_for_update()
        )
        if sweep is None or sweep.status == "void":
            return
        state = await load_state(s, sweep)
        await keep_greens(s, state.worked)
        rolled = state.roll_up()
        if rolled.status != "void":
            return
        sweep.status = "running"  # let `_persist` write the void over a finished status
        await _persist(s, state, rolled)


async def _cancel_runs(s: AsyncSession, state: SweepState) -> None:
    """Cancel every child run still going (a void or cancelled sweep makes no more calls)."""
    run_ids = [slot.run_id for arm in state.rows for slot in arm.slots if slot.run_id is not None]
    for run in await s.scalars(
        select(PreprodRun)
        .where(PreprodRun.id.in_(run_ids), PreprodRun.status.not_in(list(RUN_TERMINAL)))
        .with_for_update()
    ):
        await move(s, run, "cancelled")


async def cancel_sweep(db: Database, project_id: str, sweep_id: str, reason: str) -> None:
    """Cancel an unfinished sweep and its runs in flight; a finished sweep is left as it is."""
    async with db.write() as s:
        sweep = await owned(s, SWEEP, project_id, sweep_id, for_update=True)
        if sweep.status in SWEEP_TERMINAL:
            return
        await _cancel(s, sweep, reason)


async def cancel_for_budget(db: Database, sweep_id: str) -> bool:
    """Cancel the sweep when its spend has crossed its budget; True when it is (now) over.

    Every running push run of a budgeted sweep asks this a few times a second, so the spend is
    read first; only a sweep over its budget takes the write lock."""
    async with db.read() as s:
        budget = await s.scalar(select(ModelSweep.budget_usd).where(ModelSweep.id == sweep_id))
        if budget is None or (await sweep_spend(s, sweep_id))[0] <= budget:
            return False
    async with db.write() as s:
        sweep = await s.scalar(
            select(ModelSweep).where(ModelSweep.id == sweep_id).with_for_update()
        )
        if sweep is None or sweep.budget_usd is None:
            return False
        spent, _ = await sweep_spend(s, sweep.id)
        if spent <= sweep.budget_usd:
            return False
        if sweep.status not in SWEEP_TERMINAL:
            await _cancel(s, sweep, budget_reason(sweep.budget_usd, spent))
        return True


def budget_reason(budget: float, spent: float) -> str:
    return (
        f"budget reached: ${spent:,.4f} spent of the ${budget:,.2f} budget; no new calls were "
        "made after that (calls already in flight finished and are counted)"
    )


async def _cancel(s: AsyncSession, sweep: ModelSweep, reason: str) -> None:
    state = await load_state(s, sweep)
    await keep_greens(s, state.worked)
    sweep.status = "cancelled"
    sweep.reason = storable_text(reason)
    sweep.completed_at = utcnow()
    for arm in state.arms:
        if arm.status not in ("completed", "failed"):
            arm.status = "cancelled"
    await _cancel_runs(s, state)
