"""Reading a run back as the plain data the gate, comparison and metrics are computed from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from neens.domain.metrics import JudgeScore
from neens.domain.preprod import CohortStats, ItemOutcome
from neens.domain.run_lifecycle import RunStatus
from neens.errors import NotFound
from neens.store.db import Database
from neens.store.models import PreprodItem, Score, TraceSession
from neens.store.sweep_baseline import SweepBaseline, baseline_for_run, needs_baseline
from neens.store.tenancy import RUN, owned


@dataclass(frozen=True, slots=True)
class RunOutcomes:
    run_id: str
    status: RunStatus
    version_label: str
    model: str | None
    dataset_version_id: str
    gate: dict[str, Any]
    items: list[ItemOutcome]
    baseline: CohortStats | None
    sweep_baseline: SweepBaseline | None = None
    """For a sweep's child run whose gate has a cost-delta rule: the sweep's baseline arm,
    which that rule compares with (the run has no baseline of its own)."""


def cohort_from_stamp(stamp: dict[str, Any] | None) -> CohortStats | None:
    if stamp is None:
        return None
    return CohortStats(
        avg_cost_usd=stamp["avgCostUsd"],
        priced_sessions=stamp["pricedSessions"],
        sessions=stamp["sessions"],
        avg_latency_ms=stamp["avgLatencyMs"],
        avg_step_count=stamp["avgStepCount"],
    )


def item_outcome(item: PreprodItem, session: TraceSession | None = None) -> ItemOutcome:
    """An item row as the plain outcome the verdict rules read; `session` adds its captured
    answer and numbers (without it they are unknown)."""
    return ItemOutcome(
        item_id=item.item_id,
        position=item.position,
        input=item.input,
        expected_output=item.expected_output,
        status=item.status,
        score=item.score,
        passed=item.passed,
        baseline_passed=item.baseline_passed,
        error=item.error,
        output=session.output if session else None,
        cost_usd=session.cost_usd if session else None,
        latency_ms=session.latency_ms if session else None,
        step_count=session.step_count if session else None,
        session_id=session.trace_id if session else None,
    )


async def run_outcomes(db: Database, project_id: str, run_id: str) -> RunOutcomes:
    async with db.read() as s:
        run = await owned(s, RUN, project_id, run_id)
        rows = (
            await s.execute(
                select(PreprodItem, TraceSession)
                .outerjoin(TraceSession, TraceSession.pk == PreprodItem.session_pk)
                .where(PreprodItem.run_id == run_id)
                .order_by(PreprodItem.position)
            )
        ).all()
        sweep_baseline = None
        if run.baseline is None and needs_baseline(run.gate):
            sweep_baseline = await baseline_for_run(s, run.id)
    items = [item_outcome(item, session) for item, session in rows]
    return RunOutcomes(
        run.id,
        run.status,
        run.version_label,
        run.model,
        run.dataset_version_id,
        dict(run.gate),
        items,
        cohort_from_stamp(run.baseline_cohort),
        sweep_baseline,
    )


async def run_scores(db: Database, project_id: str, run_id: str) -> list[JudgeScore]:
    """Every judge verdict stored for the run's sessions (one per judge and session)."""
    async with db.read() as s:
        await owned(s, RUN, project_id, run_id)
        rows = (
            await s.execute(
                select(Score, TraceSession.trace_id)
                .join(TraceSession, TraceSession.pk == Score.session_pk)
                .where(Score.run_id == run_id, Score.source == "preprod")
                .order_by(Score.pk)
            )
        ).all()
    return [
        JudgeScore(
            judge_id=score.judge_id,
            judge_name=score.judge_name,
            session_id=trace_id,
            score=score.score,
            passed=score.passed,
            unscored=score.unscored_reason is not None,
        )
        for score, trace_id in rows
    ]


async def captured_session(db: Database, project_id: str, run_id: str, item_id: str) -> str | None:
    """The session (trace id) captured for `item_id` in `run_id`, or None when nothing was
    captured. Raises NotFound for an unknown run or item."""
    async with db.read() as s:
        await owned(s, RUN, project_id, run_id, field="run")
        row = (
            await s.execute(
                select(PreprodItem.pk, TraceSession.trace_id)
                .outerjoin(TraceSession, TraceSession.pk == PreprodItem.session_pk)
                .where(PreprodItem.run_id == run_id, PreprodItem.item_id == item_id)
            )
        ).first()
    if row is None:
        raise NotFound(f"run {run_id} has no item {item_id!r}", field="item")
    trace_id: str | None = row[1]
    return trace_id
