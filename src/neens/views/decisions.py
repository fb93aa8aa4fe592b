"""A sweep's decision: its evidence read once, and `domain.decision.compare_sweep` over it.

Every number of the comparison (rates, intervals, costs, regressions, the ranking, the verdict
sentence, per agent) comes from that one function; the API, the CLI, the MCP tools and the share
page render it and never re-derive a ranking.
"""

from __future__ import annotations

from dataclasses import dataclass

from neens.domain.decision import (
    DEFAULT_BAR,
    ArmEvidence,
    Bar,
    RepeatColumns,
    SweepComparison,
    compare_sweep,
)
from neens.domain.sweeps import SweepRollup
from neens.store import decisions as store
from neens.store.db import Database
from neens.store.models import ModelSweep
from neens.views.sweeps import SweepView, sweep_detail


@dataclass(frozen=True, slots=True)
class SweepDecision:
    view: SweepView
    comparison: SweepComparison

    @property
    def sweep(self) -> ModelSweep:
        return self.view.sweep

    @property
    def rollup(self) -> SweepRollup:
        return self.view.rollup


def bar_of(sweep: ModelSweep, asked: float | None) -> Bar:
    """The bar and where it came from: the query's, else the sweep's pinned gate's
    `min_pass_rate`, else the documented default (always said, never silent)."""
    if asked is not None:
        return Bar(asked, "query")
    pinned = dict(sweep.gate).get("min_pass_rate")
    if isinstance(pinned, int | float) and not isinstance(pinned, bool):
        return Bar(float(pinned), "gate")
    return Bar(DEFAULT_BAR, "default")


async def sweep_decision(
    db: Database,
    project_id: str,
    sweep_id: str,
    *,
    bar: float | None = None,
    baseline_arm_id: str | None = None,
) -> SweepDecision:
    """The comparison of the sweep as it is now (a void sweep compares nothing across arms)."""
    view = await sweep_detail(db, project_id, sweep_id)
    async with db.read() as s:
        answers = await store.sweep_answers(s, sweep_id)
        item_ids = await store.frozen_item_ids(s, view.sweep.dataset_version_id)
    rollup = view.rollup
    arms = [
        ArmEvidence(
            id=arm.id,
            label=arm.label,
            position=position,
            status=arm.status,
            passed=arm.passed,
            runs=arm.runs,
            repeats=RepeatColumns.from_rows(answers.get(arm.id, [])),
        )
        for position, arm in enumerate(rollup.arms)
    ]
    comparison = compare_sweep(
        arms,
        item_ids,
        comparable=rollup.status != "void",
        void_reason=rollup.void_reason,
        bar=bar_of(view.sweep, bar),
        baseline_arm_id=baseline_arm_id,
    )
    return SweepDecision(view, comparison)
