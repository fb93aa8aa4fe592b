"""A run's verdict surfaces: `/gate`, `/comparison`, `/metrics`. Every number comes from the
domain functions, so the CLI, the pages and the API cannot disagree."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from neens.api.deps import AnyKey, DbDep
from neens.api.schemas.review import (
    CohortOut,
    ComparisonOut,
    ComparisonRowOut,
    GateOut,
    MetricOut,
    MetricsOut,
)
from neens.domain.comparison import compare_run
from neens.domain.gate import evaluate_gate, parse_gate_policy
from neens.domain.metrics import metrics_rollup
from neens.domain.preprod import CohortStats, items_cohort
from neens.store.review import run_outcomes, run_scores

router = APIRouter(prefix="/preprod-evals", tags=["preprod-evals"])


def _cohort(stats: CohortStats) -> CohortOut:
    return CohortOut(**asdict(stats))


@router.get(
    "/{run_id}/gate",
    operation_id="preprod_evals-gate",
    response_model=GateOut,
    response_model_exclude_unset=True,
)
async def get_gate(run_id: str, principal: AnyKey, db: DbDep) -> Any:
    """Pass or fail, with reasons. Never green before the candidate was evaluated."""
    outcomes = await run_outcomes(db, principal.project_id, run_id)
    result = evaluate_gate(
        outcomes.status,
        outcomes.items,
        parse_gate_policy(outcomes.gate),
        items_cohort(outcomes.items),
        outcomes.baseline,
    )
    return JSONResponse(result.to_dict())


@router.get("/{run_id}/comparison", operation_id="preprod_evals-comparison")
async def get_comparison(run_id: str, principal: AnyKey, db: DbDep) -> ComparisonOut:
    """Per-item verdicts against the baseline, regressions, new passes and cohort deltas."""
    outcomes = await run_outcomes(db, principal.project_id, run_id)
    result = compare_run(outcomes.items, items_cohort(outcomes.items), outcomes.baseline)
    return ComparisonOut(
        rows=[ComparisonRowOut(**asdict(row)) for row in result.rows],
        regressions=list(result.regressions),
        new_passes=list(result.new_passes),
        cost_usd_delta=result.cost_usd_delta,
        latency_ms_delta=result.latency_ms_delta,
        step_count_delta=result.step_count_delta,
        candidate=_cohort(result.candidate),
        baseline=_cohort(result.baseline) if result.baseline else None,
    )


@router.get("/{run_id}/metrics", operation_id="preprod_evals-metrics")
async def get_metrics(run_id: str, principal: AnyKey, db: DbDep) -> MetricsOut:
    """One row per judge metric over the run's scored sessions; empty when nothing is scored."""
    rows = metrics_rollup(await run_scores(db, principal.project_id, run_id))
    return MetricsOut(metrics=[MetricOut(**asdict(row)) for row in rows])
