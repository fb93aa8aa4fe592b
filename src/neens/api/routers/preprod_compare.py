"""Compare Versions: `/preprod-compare` lines up runs over one golden version, prompt by
prompt; `/preprod-compare/trajectory` aligns two runs' steps for one prompt."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Query

from neens.api.deps import AnyKey, DbDep
from neens.api.schemas.compare import (
    StepDiffOut,
    StepOut,
    TrajectoryOut,
    VersionCellOut,
    VersionRowOut,
    VersionsOut,
    VersionSummaryOut,
)
from neens.views.compare import compare_versions, run_trajectory

router = APIRouter(prefix="/preprod-compare", tags=["preprod-compare"])


@router.get("", operation_id="preprod_compare-versions")
async def compare(
    principal: AnyKey,
    db: DbDep,
    runs: str = Query(description="Comma-separated run ids, e.g. ppr_a,ppr_b,ppr_c."),
    baseline: str | None = Query(
        default=None, description="The run others are measured against; default: the first listed."
    ),
) -> VersionsOut:
    """Runs over the same golden version side by side: a row per prompt, a cell per run."""
    run_ids = [r.strip() for r in runs.split(",") if r.strip()]
    result = await compare_versions(db, principal.project_id, run_ids, baseline)
    return VersionsOut(
        baseline_run_id=result.baseline_run_id,
        runs=[VersionSummaryOut(**asdict(summary)) for summary in result.runs],
        rows=[
            VersionRowOut(
                item_id=row.item_id,
                position=row.position,
                input=row.input,
                expected_output=row.expected_output,
                cells=[VersionCellOut(**asdict(cell)) for cell in row.cells],
            )
            for row in result.rows
        ],
    )


@router.get("/trajectory", operation_id="preprod_compare-trajectory")
async def trajectory(
    principal: AnyKey,
    db: DbDep,
    run: str = Query(description="The candidate run."),
    baseline: str = Query(description="The run to compare with."),
    item: str = Query(description="The frozen item (dataset item id)."),
) -> TrajectoryOut:
    """The two runs' steps for one prompt, aligned: each marked added, removed, changed or same.

    Steps are the LLM, tool and retriever calls (and sub-agent calls) in start order."""
    result = await run_trajectory(db, principal.project_id, run, baseline, item)
    return TrajectoryOut(
        run_id=result.run_id,
        baseline_run_id=result.baseline_run_id,
        item_id=result.item_id,
        candidate_captured=result.candidate_captured,
        baseline_captured=result.baseline_captured,
        steps=[
            StepDiffOut(
                status=d.status,
                baseline=StepOut(**asdict(d.baseline)) if d.baseline else None,
                candidate=StepOut(**asdict(d.candidate)) if d.candidate else None,
                baseline_index=d.baseline_index,
                candidate_index=d.candidate_index,
            )
            for d in result.steps
        ],
    )
