"""Datasets: the list, one dataset with its versions (the golden one marked), and a version's
items a page at a time. Twins: `GET /datasets`, `/datasets/{id}`, `/datasets/{id}/versions`,
`/datasets/{id}/versions/{vid}/items`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response

from neens.api.paging import MAX_CURSOR_CHARS
from neens.api.routers import datasets as api
from neens.web.guard import Viewer, current_viewer, db_of, read_form
from neens.web.render import render, segment

router = APIRouter()

ViewerDep = Annotated[Viewer, Depends(current_viewer)]
ITEMS_PER_PAGE = 100


@router.get("/datasets")
async def dataset_list(request: Request, viewer: ViewerDep) -> Response:
    db, principal = db_of(request), viewer.principal
    datasets = (await api.list_datasets(principal, db, name=None)).datasets
    versions = {d.id: (await api.list_versions(d.id, principal, db)).versions for d in datasets}
    golden = {d.id: next((v for v in versions[d.id] if v.golden), None) for d in datasets}
    return render(
        request,
        "datasets/list.html",
        viewer,
        section="datasets",
        twin="/datasets",
        datasets=datasets,
        golden=golden,
    )


@router.get("/datasets/{dataset_id}")
async def dataset_page(request: Request, dataset_id: str, viewer: ViewerDep) -> Response:
    db, principal = db_of(request), viewer.principal
    dataset = await api.get_dataset(dataset_id, principal, db)
    versions = (await api.list_versions(dataset_id, principal, db)).versions
    return render(
        request,
        "datasets/detail.html",
        viewer,
        section="datasets",
        twin=f"/datasets/{segment(dataset_id)}/versions",
        dataset=dataset,
        versions=versions,
    )


@router.post("/datasets/{dataset_id}/versions/{version_id}/golden")
async def mark_golden(
    request: Request, dataset_id: str, version_id: str, viewer: ViewerDep
) -> Response:
    """The form twin of `POST /datasets/{id}/versions/{vid}/golden`, through its own function."""
    await read_form(request, viewer.session)
    await api.mark_golden(dataset_id, version_id, viewer.principal, db_of(request))
    return RedirectResponse(f"/ui/datasets/{segment(dataset_id)}", status_code=303)


@router.get("/datasets/{dataset_id}/versions/{version_id}")
async def version_page(
    request: Request,
    dataset_id: str,
    version_id: str,
    viewer: ViewerDep,
    cursor: str | None = Query(default=None, max_length=MAX_CURSOR_CHARS),
) -> Response:
    db, principal = db_of(request), viewer.principal
    dataset = await api.get_dataset(dataset_id, principal, db)
    version = await api.get_version(dataset_id, version_id, principal, db)
    items = await api.list_items(
        dataset_id, version_id, principal, db, limit=ITEMS_PER_PAGE, offset=None, cursor=cursor
    )
    return render(
        request,
        "datasets/items.html",
        viewer,
        section="datasets",
        twin=f"/datasets/{segment(dataset_id)}/versions/{segment(version_id)}/items"
        f"?limit={ITEMS_PER_PAGE}",
        dataset=dataset,
        version=version,
        items=items,
        cursor=cursor,
    )
