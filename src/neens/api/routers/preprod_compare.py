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
from neens.domain.comparison import RunColumn, compare_versions
from neens.domain.conventions import span_view
from neens.domain.preprod import items_cohort
from neens.domain.trajectory import Step, diff_trajectories
from neens.errors import Unprocessable
from neens.store.review import captured_session, run_outcomes
from neens.store.sessions import get_session

router = APIRouter(prefix="/preprod-compare", tags=["preprod-compare"])

STEP_KINDS = ("llm", "tool", "retriever")
"""Span kinds that are steps; an agent span is a step too when it is a sub-agent call."""


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
    if not run_ids:
        raise Unprocessable("runs must name at least one run", field="runs")
    outcomes = [await run_outcomes(db, principal.project_id, run_id) for run_id in run_ids]
    versions = {o.dataset_version_id for o in outcomes}
    if len(versions) > 1:
        raise Unprocessable(
            "these runs replayed different golden versions "
            f"({', '.join(sorted(versions))}); only runs over one version can be compared",
            field="runs",
        )
    result = compare_versions(
        [
            RunColumn(o.run_id, o.version_label, o.model, o.items, items_cohort(o.items))
            for o in outcomes
        ],
        baseline or run_ids[0],
    )
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


async def _steps(db: DbDep, project_id: str, run_id: str, item_id: str) -> list[Step] | None:
    trace_id = await captured_session(db, project_id, run_id, item_id)
    if trace_id is None:
        return None
    steps = []
    for record in (await get_session(db, project_id, trace_id)).spans:
        view = span_view(record)
        if view.kind in STEP_KINDS or (view.kind == "agent" and record.parent_span_id):
            steps.append(Step(view.kind, record.name, view.input, view.output))
    return steps


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
    candidate = await _steps(db, principal.project_id, run, item)
    base = await _steps(db, principal.project_id, baseline, item)
    diff = diff_trajectories(base or [], candidate or []) if candidate and base else []
    return TrajectoryOut(
        run_id=run,
        baseline_run_id=baseline,
        item_id=item,
        candidate_captured=candidate is not None,
        baseline_captured=base is not None,
        steps=[
            StepDiffOut(
                status=d.status,
                baseline=StepOut(**asdict(d.baseline)) if d.baseline else None,
                candidate=StepOut(**asdict(d.candidate)) if d.candidate else None,
                baseline_index=d.baseline_index,
                candidate_index=d.candidate_index,
            )
            for d in diff
        ],
    )
