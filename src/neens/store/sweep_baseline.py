"""The baseline a sweep's child run is gated against on cost: the sweep's baseline arm.

A sweep's pinned gate may hold every child run to a cost change against "the baseline"
(`{"cost": {"max_delta_pct": -50}}`: at least 50% cheaper). A child run has no baseline run of
its own, so the baseline is the sweep's baseline arm (position 0, as pinned at create; the
comparison's `baselineArm` override is a way of reading, not part of the gate): its evaluated
runs' captured sessions, pooled, averaged over the priced ones as any baseline cohort is.

The cohort is final only when every run of the baseline arm has finished (or the arm failed or
was cancelled); until then there is none, and the delta rules of the other arms' runs are
`skipped` with that reason, never passed on a partial average. The baseline arm's own runs are
not compared with themselves: their delta rules are `skipped`, saying why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.preprod import CohortStats, cohort_stats
from neens.domain.run_lifecycle import TERMINAL
from neens.store.models import PreprodItem, PreprodRun, SweepArm, SweepRun, TraceSession

__all__ = ["SweepBaseline", "baseline_for_run", "baselines_for_sweep", "needs_baseline"]

_EVALUATED = ("completed", "completed_with_regressions")


@dataclass(frozen=True, slots=True)
class SweepBaseline:
    """The baseline cohort a child run's cost delta is measured against, or why there is none."""

    cohort: CohortStats | None
    missing: str | None
    """Why there is no cohort (the reason a skipped delta rule gives), None when there is one."""


def needs_baseline(gate: Mapping[str, object]) -> bool:
    """Whether a gate declares a cost rule that compares with a baseline."""
    cost = gate.get("cost")
    return isinstance(cost, Mapping) and any(
        key in cost for key in ("max_delta_usd", "max_delta_pct")
    )


async def baselines_for_sweep(
    s: AsyncSession,
    arms: Sequence[SweepArm],
    slots: Sequence[SweepRun],
    runs: Mapping[str, PreprodRun],
) -> dict[str, SweepBaseline]:
    """The baseline of every launched child run of one sweep, by run id; `arms` in position
    order, `slots` all of the sweep's run slots, `runs` the launched runs by id."""
    if not arms:
        return {}
    base_arm = arms[0]
    base_slots = [slot for slot in slots if slot.arm_id == base_arm.id]
    base_runs = [runs.get(slot.run_id) if slot.run_id else None for slot in base_slots]
    own = SweepBaseline(
        None,
        f"this run belongs to the sweep's baseline arm {base_arm.label!r}: "
        "the other arms' costs are compared against it",
    )
    shared = await _arm_cohort(s, base_arm, base_runs)
    return {
        slot.run_id: own if slot.arm_id == base_arm.id else shared
        for slot in slots
        if slot.run_id is not None
    }


async def baseline_for_run(s: AsyncSession, run_id: str) -> SweepBaseline | None:
    """The sweep baseline of one run, or None when the run is not a sweep's child run."""
    sweep_id = await s.scalar(select(SweepRun.sweep_id).where(SweepRun.run_id == run_id))
    if sweep_id is None:
        return None
    arms = list(
        await s.scalars(
            select(SweepArm).where(SweepArm.sweep_id == sweep_id).order_by(SweepArm.position)
        )
    )
    slots = list(await s.scalars(select(SweepRun).where(SweepRun.sweep_id == sweep_id)))
    base_ids = [
        slot.run_id for slot in slots if slot.arm_id == arms[0].id and slot.run_id is not None
    ]
    runs = {
        run.id: run
        for run in await s.scalars(select(PreprodRun).where(PreprodRun.id.in_([*base_ids, run_id])))
    }
    return (await baselines_for_sweep(s, arms, slots, runs)).get(run_id)


async def _arm_cohort(
    s: AsyncSession, arm: SweepArm, runs: Sequence[PreprodRun | None]
) -> SweepBaseline:
    """The pooled cohort of the baseline arm's evaluated runs, once all of them have finished."""
    stopped = arm.status in ("failed", "cancelled")
    if not stopped and any(run is None or run.status not in TERMINAL for run in runs):
        return SweepBaseline(None, f"the sweep's baseline arm {arm.label!r} has not finished")
    evaluated = [run.id for run in runs if run is not None and run.status in _EVALUATED]
    if not evaluated:
        return SweepBaseline(None, f"the sweep's baseline arm {arm.label!r} has no evaluated run")
    rows = (
        await s.execute(
            select(TraceSession.cost_usd, TraceSession.latency_ms, TraceSession.step_count)
            .select_from(PreprodItem)
            .join(TraceSession, TraceSession.pk == PreprodItem.session_pk)
            .where(PreprodItem.run_id.in_(evaluated))
        )
    ).all()
    if not rows:
        return SweepBaseline(None, f"the sweep's baseline arm {arm.label!r} captured no session")
    costs, latencies, steps = zip(*rows, strict=True)
    return SweepBaseline(cohort_stats(costs, latencies, steps), None)
