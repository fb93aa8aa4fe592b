"""Pre-prod Evals: the list, the New pre-prod eval form, and a run's detail (the Model badge,
status, gate with reasons, comparison, metric rollup and per-item results), which follows a
run that is still going. Twins: `GET /preprod-evals`, `POST /preprod-evals`,
`GET /preprod-evals/{id}` and its `/items`, `/gate`, `/comparison`, `/metrics`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from neens.api.errors import problems_body
from neens.api.paging import MAX_CURSOR_CHARS
from neens.api.routers import agent_connections as api_connections
from neens.api.routers import datasets as api_datasets
from neens.api.routers import judges as api_judges
from neens.api.routers import preprod_evals as api_runs
from neens.api.routers import preprod_review as api_review
from neens.api.schemas.preprod import PreprodCreate
from neens.errors import NeensError
from neens.views.runs import run_gate
from neens.web import new_run
from neens.web.guard import Viewer, current_viewer, db_of, read_form, worker_of
from neens.web.render import query, render, segment

router = APIRouter()

ViewerDep = Annotated[Viewer, Depends(current_viewer)]
RUNS_PER_PAGE = 50
ITEMS_PER_PAGE = 100
CursorQuery = Annotated[str | None, Query(max_length=MAX_CURSOR_CHARS)]


@router.get("/preprod-evals")
async def run_list(request: Request, viewer: ViewerDep, cursor: CursorQuery = None) -> Response:
    page = await api_runs.list_runs(
        viewer.principal, db_of(request), dataset_id=None, limit=RUNS_PER_PAGE, cursor=cursor
    )
    return render(
        request,
        "preprod/list.html",
        viewer,
        section="preprod",
        twin="/preprod-evals" + query(limit=RUNS_PER_PAGE, cursor=cursor),
        runs=page.runs,
        next_cursor=page.next_cursor,
        cursor=cursor,
    )


async def _offer(request: Request, viewer: Viewer) -> new_run.Offer:
    db, principal = db_of(request), viewer.principal
    datasets = (await api_datasets.list_datasets(principal, db, name=None)).datasets
    versions = {
        d.id: (await api_datasets.list_versions(d.id, principal, db)).versions for d in datasets
    }
    judges = (await api_judges.list_judges(principal, db)).judges
    # Listing connections needs an admin key in the API; the page asks no more of the key.
    connections = (
        (await api_connections.list_connections(principal, db)).agent_connections
        if viewer.is_admin
        else None
    )
    runs = (
        await api_runs.list_runs(principal, db, dataset_id=None, limit=RUNS_PER_PAGE, cursor=None)
    ).runs
    return new_run.Offer(
        new_run.dataset_groups(datasets, versions), new_run.scoreable(judges), connections, runs
    )


def _form_page(
    request: Request,
    viewer: Viewer,
    offer: new_run.Offer,
    values: new_run.Values,
    *,
    error: str | None = None,
    error_field: str | None = None,
    status_code: int = 200,
) -> Response:
    return render(
        request,
        "preprod/new.html",
        viewer,
        status_code=status_code,
        section="preprod",
        offer=offer,
        values=values,
        windows=new_run.PROD_WINDOWS,
        error=error,
        error_field=error_field,
    )


@router.get("/preprod-evals/new")
async def new_run_form(request: Request, viewer: ViewerDep) -> Response:
    offer = await _offer(request, viewer)
    return _form_page(request, viewer, offer, new_run.defaults(offer))


@router.post("/preprod-evals")
async def create_run(request: Request, viewer: ViewerDep) -> Response:
    """The form twin of `POST /preprod-evals`: the same body model, the same route function."""
    form = await read_form(request, viewer.session)
    values = new_run.posted(form)
    body: dict[str, Any] = {}
    try:
        body = new_run.request_body(values)
        run = await api_runs.create_run(
            PreprodCreate.model_validate(body),
            viewer.principal,
            db_of(request),
            worker_of(request),
        )
    except ValidationError as exc:
        problem = problems_body(exc.errors(), body)["error"]
        return _form_page(
            request,
            viewer,
            await _offer(request, viewer),
            values,
            error=problem["message"],
            error_field=problem.get("field"),
            status_code=422,
        )
    except NeensError as exc:
        return _form_page(
            request,
            viewer,
            await _offer(request, viewer),
            values,
            error=exc.message,
            error_field=exc.field,
            status_code=exc.status_code,
        )
    return RedirectResponse(f"/ui/preprod-evals/{segment(run.id)}", status_code=303)


async def _review(
    request: Request, viewer: Viewer, run_id: str, cursor: str | None
) -> dict[str, Any]:
    """Everything the run's page shows, each part from its twin route's own function."""
    db, principal = db_of(request), viewer.principal
    run = await api_runs.get_run(run_id, principal, db)
    items = await api_runs.list_items(run_id, principal, db, limit=ITEMS_PER_PAGE, cursor=cursor)
    comparison = await api_review.get_comparison(run_id, principal, db)
    return {
        "run": run,
        "items": items.items,
        "next_cursor": items.next_cursor,
        "cursor": cursor,
        "rows": {row.item_id: row for row in comparison.rows},
        "comparison": comparison,
        "gate": await run_gate(db, principal.project_id, run_id),
        "metrics": (await api_review.get_metrics(run_id, principal, db)).metrics,
        "terminal": new_run.is_terminal(run.status),
    }


@router.get("/preprod-evals/{run_id}")
async def run_page(
    request: Request, run_id: str, viewer: ViewerDep, cursor: CursorQuery = None
) -> Response:
    db, principal = db_of(request), viewer.principal
    review = await _review(request, viewer, run_id, cursor)
    run = review["run"]
    judges = {j.id: j for j in (await api_judges.list_judges(principal, db)).judges}
    dataset = await api_datasets.get_dataset(run.dataset_id, principal, db)
    version = await api_datasets.get_version(run.dataset_id, run.dataset_version_id, principal, db)
    return render(
        request,
        "preprod/detail.html",
        viewer,
        section="preprod",
        twin=f"/preprod-evals/{segment(run_id)}",
        judges=judges,
        dataset=dataset,
        version=version,
        **review,
    )


@router.get("/preprod-evals/{run_id}/live")
async def run_live(
    request: Request, run_id: str, viewer: ViewerDep, cursor: CursorQuery = None
) -> Response:
    """The part of the run's page that changes while it runs; the page polls it."""
    review = await _review(request, viewer, run_id, cursor)
    return render(request, "preprod/live.html", viewer, **review)


@router.post("/preprod-evals/{run_id}/cancel")
async def cancel_run(request: Request, run_id: str, viewer: ViewerDep) -> Response:
    """The form twin of `POST /preprod-evals/{id}/cancel`."""
    await read_form(request, viewer.session)
    await api_runs.cancel_run(run_id, viewer.principal, db_of(request))
    return RedirectResponse(f"/ui/preprod-evals/{segment(run_id)}", status_code=303)
