"""Golden datasets as their routes and pages show them: the list, one dataset, its versions and
a page of a version's items."""

from __future__ import annotations

from dataclasses import dataclass

from neens.store import datasets as store
from neens.store.db import Database


async def dataset_list(
    db: Database, project_id: str, *, name: str | None = None
) -> list[store.DatasetInfo]:
    """The project's datasets in creation order; `name` keeps the one with that name."""
    return await store.list_datasets(db, project_id, name=name)


async def dataset_detail(db: Database, project_id: str, dataset_id: str) -> store.DatasetInfo:
    """One dataset, with its golden and newest version ids."""
    return await store.get_dataset(db, project_id, dataset_id)


async def dataset_versions(
    db: Database, project_id: str, dataset_id: str
) -> list[store.VersionInfo]:
    """The dataset's versions, oldest first, each saying whether it is the golden one now."""
    return await store.list_versions(db, project_id, dataset_id)


async def dataset_version(
    db: Database, project_id: str, dataset_id: str, version_id: str
) -> store.VersionInfo:
    return await store.get_version(db, project_id, dataset_id, version_id)


@dataclass(frozen=True, slots=True)
class ItemsPage:
    """A page of a version's items in frozen order; `next_position` is where the next page
    starts, None on the last page."""

    items: list[store.ItemInfo]
    next_position: int | None


async def version_items(
    db: Database, project_id: str, dataset_id: str, version_id: str, *, limit: int, start: int
) -> ItemsPage:
    """Up to `limit` items from position `start` on."""
    rows = await store.list_items(
        db, project_id, dataset_id, version_id, limit=limit + 1, start=start
    )
    page = rows[:limit]
    return ItemsPage(page, page[-1].position + 1 if len(rows) > limit else None)
