"""One run's answers: its gate, its comparison with the baseline, its metrics, its detail and
its frozen items."""

from __future__ import annotations

from datetime import datetime

from neens.domain.comparison import Comparison, compare_run
from neens.domain.gate import GateResult, evaluate_gate, parse_gate_policy
from neens.domain.metrics import MetricRow, metrics_rollup
from neens.domain.preprod import items_cohort
from neens.store import runs as store
from neens.store.db import Database
from neens.store.review import run_outcomes, run_scores


async def run_gate(db: Database, project_id: str, run_id: str) -> GateResult:
    """Pass or fail, with reasons. Never green before the candidate was evaluated."""
    outcomes = await run_outcomes(db, project_id, run_id)
    baseline, missing = outcomes.baseline, "the run has no baseline cohort"
    if outcomes.sweep_baseline is not None:  # a sweep's child run: its baseline arm
        baseline = outcomes.sweep_baseline.cohort
        missing = outcomes.sweep_baseline.missing or missing
    return evaluate_gate(
        outcomes.status,
        outcomes.items,
        parse_gate_policy(outcomes.gate),
        items_cohort(outcomes.items),
        baseline,
        no_baseline=missing,
    )


async def run_comparison(db: Database, project_id: str, run_id: str) -> Comparison:
    """Per-item verdicts against the baseline, regressions, new passes and cohort deltas."""
    outcomes = await run_outcomes(db, project_id, run_id)
    return compare_run(outcomes.items, items_cohort(outcomes.items), outcomes.baseline)


async def run_metrics(db: Database, project_id: str, run_id: str) -> list[MetricRow]:
    """One row per judge metric over the run's scored sessions; empty when nothing is scored."""
    return metrics_rollup(await run_scores(db, project_id, run_id))


async def run_list(
    db: Database,
    project_id: str,
    *,
    limit: int,
    dataset_id: str | None = None,
    after: tuple[datetime, str] | None = None,
) -> tuple[list[store.RunInfo], tuple[datetime, str] | None]:
    """Newest first: a page of runs after `after`, and where it ends (None on the last page)."""
    return await store.list_runs(db, project_id, limit=limit, dataset_id=dataset_id, after=after)


async def run_detail(db: Database, project_id: str, run_id: str) -> store.RunInfo:
    """The run as created, its status and item counts, and what it is waiting for."""
    return await store.get_run(db, project_id, run_id)


async def run_items(db: Database, project_id: str, run_id: str) -> list[store.RunItem]:
    """The frozen prompts in order, and each one's capture and verdict."""
    return await store.list_items(db, project_id, run_id)


async def run_items_page(
    db: Database, project_id: str, run_id: str, *, limit: int | None, after: int | None
) -> tuple[list[store.RunItem], int | None]:
    """The frozen prompts in order after position `after`, and each one's capture and verdict:
    up to `limit` of them (all without one), and the last one's position when more follow."""
    return await store.list_items_page(db, project_id, run_id, limit=limit, after=after)
