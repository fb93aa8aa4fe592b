"""A run's verdict surfaces: `/gate`, `/comparison`, `/metrics`. Every number comes from
`neens.views.runs`, so the CLI, the pages and the API cannot disagree."""

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
from neens.domain.preprod import CohortStats
from neens.views.runs import run_comparison, run_gate, run_metrics

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
    result = await run_gate(db, principal.project_id, run_id)
    return JSONResponse(result.to_dict())


@router.get("/{run_id}/comparison", operation_id="preprod_evals-comparison")
async def get_comparison(run_id: str, principal: AnyKey, db: DbDep) -> ComparisonOut:
    """Per-item verdicts against the baseline, regressions, new passes and cohort deltas."""
    result = await run_comparison(db, principal.project_id, run_id)
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
    rows = await run_metrics(db, principal.project_id, run_id)
    return MetricsOut(metrics=[MetricOut(**asdict(row)) for row in rows])
