"""Compare Versions: pick runs over one golden version and a baseline; a row per prompt, a cell
per version, each version's pass rate, cost, latency and steps, each answer beside the expected
output; and the trajectory diff of one prompt. Twins: `GET /preprod-compare`,
`GET /preprod-compare/trajectory`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from neens.api.routers import preprod_compare as api
from neens.api.routers import preprod_evals as api_runs
from neens.api.schemas.compare import VersionsOut
from neens.errors import NeensError
from neens.web.guard import Viewer, current_viewer, db_of
from neens.web.render import query, render

router = APIRouter()

ViewerDep = Annotated[Viewer, Depends(current_viewer)]
PICKABLE_RUNS = 100
MAX_RUNS = 12
"""Most runs one comparison lines up (a cell each): more would not fit a 1280 px page."""


def _run_ids(runs: list[str]) -> list[str]:
    """Runs as picked: repeated `runs`, or comma-separated as the API takes them."""
    ids: list[str] = []
    for value in runs:
        for run_id in value.split(","):
            if run_id.strip() and run_id.strip() not in ids:
                ids.append(run_id.strip())
    return ids


@router.get("/compare")
async def compare_page(
    request: Request,
    viewer: ViewerDep,
    runs: Annotated[list[str] | None, Query()] = None,
    baseline: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    db, principal = db_of(request), viewer.principal
    picked = _run_ids(runs or [])
    recent = (
        await api_runs.list_runs(principal, db, dataset_id=None, limit=PICKABLE_RUNS, cursor=None)
    ).runs
    result: VersionsOut | None = None
    error: str | None = None
    if baseline and baseline not in picked:
        picked.insert(0, baseline)
    if len(picked) > MAX_RUNS:
        error = f"pick at most {MAX_RUNS} runs to line up side by side"
    elif picked:
        try:
            result = await api.compare(principal, db, runs=",".join(picked), baseline=baseline)
        except NeensError as exc:
            error = exc.message
    return render(
        request,
        "compare/versions.html",
        viewer,
        section="compare",
        twin="/preprod-compare" + query(runs=",".join(picked), baseline=baseline)
        if picked
        else None,
        recent=recent,
        picked=picked,
        baseline=baseline or (picked[0] if picked else None),
        result=result,
        error=error,
    )


@router.get("/compare/trajectory")
async def trajectory_page(
    request: Request,
    viewer: ViewerDep,
    run: Annotated[str, Query(max_length=200)],
    baseline: Annotated[str, Query(max_length=200)],
    item: Annotated[str, Query(max_length=200)],
) -> Response:
    db, principal = db_of(request), viewer.principal
    diff = await api.trajectory(principal, db, run=run, baseline=baseline, item=item)
    versions = await api.compare(principal, db, runs=f"{baseline},{run}", baseline=baseline)
    row = next((r for r in versions.rows if r.item_id == item), None)
    return render(
        request,
        "compare/trajectory.html",
        viewer,
        section="compare",
        twin="/preprod-compare/trajectory" + query(run=run, baseline=baseline, item=item),
        diff=diff,
        versions=versions,
        row=row,
    )
