"""Golden datasets: `/datasets`, their immutable versions and items."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Query

from neens.api.deps import AnyKey, DbDep
from neens.api.paging import cursor_query, decode_cursor, next_cursor
from neens.api.schemas.datasets import (
    DatasetCreate,
    DatasetList,
    DatasetOut,
    ItemList,
    ItemOut,
    VersionCreate,
    VersionList,
    VersionOut,
)
from neens.errors import Unprocessable
from neens.store import datasets as store
from neens.views.datasets import (
    dataset_detail,
    dataset_list,
    dataset_version,
    dataset_versions,
    version_items,
)

router = APIRouter(prefix="/datasets", tags=["datasets"])

_ITEMS = "dataset-items"
"""The tag of this list's cursors."""

MAX_OFFSET = 1_000_000_000
"""Largest item offset: far past any dataset, and far from the 64-bit integers databases hold."""


@router.post("", status_code=201, operation_id="datasets-create")
async def create_dataset(body: DatasetCreate, principal: AnyKey, db: DbDep) -> DatasetOut:
    """Create an empty dataset; push items to it as a version."""
    info = await store.create_dataset(db, principal.project_id, body.name)
    return DatasetOut(**asdict(info))


@router.get("", operation_id="datasets-list")
async def list_datasets(
    principal: AnyKey,
    db: DbDep,
    name: str | None = Query(default=None, description="Only the dataset with this name."),
) -> DatasetList:
    infos = await dataset_list(db, principal.project_id, name=name)
    return DatasetList(datasets=[DatasetOut(**asdict(i)) for i in infos])


@router.get("/{dataset_id}", operation_id="datasets-get")
async def get_dataset(dataset_id: str, principal: AnyKey, db: DbDep) -> DatasetOut:
    return DatasetOut(**asdict(await dataset_detail(db, principal.project_id, dataset_id)))


@router.post("/{dataset_id}/versions", status_code=201, operation_id="datasets-create_version")
async def create_version(
    dataset_id: str, body: VersionCreate, principal: AnyKey, db: DbDep
) -> VersionOut:
    """Snapshot the items as a new immutable version (optionally marked golden)."""
    items = [store.NewItem(i.input, i.expected_output, i.metadata) for i in body.items]
    info = await store.create_version(
        db, principal.project_id, dataset_id, items, golden=body.golden
    )
    return VersionOut(**asdict(info))


@router.get("/{dataset_id}/versions", operation_id="datasets-list_versions")
async def list_versions(dataset_id: str, principal: AnyKey, db: DbDep) -> VersionList:
    infos = await dataset_versions(db, principal.project_id, dataset_id)
    return VersionList(versions=[VersionOut(**asdict(i)) for i in infos])


@router.get("/{dataset_id}/versions/{version_id}", operation_id="datasets-get_version")
async def get_version(dataset_id: str, version_id: str, principal: AnyKey, db: DbDep) -> VersionOut:
    info = await dataset_version(db, principal.project_id, dataset_id, version_id)
    return VersionOut(**asdict(info))


@router.post("/{dataset_id}/versions/{version_id}/golden", operation_id="datasets-mark_golden")
async def mark_golden(dataset_id: str, version_id: str, principal: AnyKey, db: DbDep) -> VersionOut:
    """Make this version the dataset's golden one. The version's items are not touched."""
    info = await store.mark_golden(db, principal.project_id, dataset_id, version_id)
    return VersionOut(**asdict(info))


@router.get("/{dataset_id}/versions/{version_id}/items", operation_id="datasets-list_items")
async def list_items(
    dataset_id: str,
    version_id: str,
    principal: AnyKey,
    db: DbDep,
    limit: int = Query(default=500, ge=1, le=5000, description="Items per page."),
    offset: int | None = Query(
        default=None, ge=0, le=MAX_OFFSET, description="Items to skip (or use `cursor`)."
    ),
    cursor: str | None = cursor_query(),
) -> ItemList:
    """The version's items in frozen order, a page at a time: pass `nextCursor` back as
    `cursor`, or `nextOffset` as `offset`. A version never changes, so both read the same
    pages, and either is as fast for the last page as for the first."""
    after = decode_cursor(_ITEMS, cursor, (int,), db.secrets)
    if after is not None and offset is not None:
        raise Unprocessable("give either cursor or offset, not both", field="cursor")
    start = after[0] + 1 if after is not None else offset or 0
    page = await version_items(
        db, principal.project_id, dataset_id, version_id, limit=limit, start=start
    )
    more = page.next_position is not None
    return ItemList(
        items=[ItemOut(**asdict(i)) for i in page.items],
        next_offset=page.next_position,
        next_cursor=next_cursor(_ITEMS, (page.items[-1].position,), db.secrets) if more else None,
    )
