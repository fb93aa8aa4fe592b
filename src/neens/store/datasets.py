"""Datasets, their immutable versions and items, and the golden mark."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.errors import Conflict, NotFound
from neens.store.db import Database
from neens.store.ids import new_id
from neens.store.models import Dataset, DatasetItem, DatasetVersion, GoldenMark
from neens.store.tenancy import DATASET, owned, owned_by


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    id: str
    name: str
    created_at: datetime
    golden_version_id: str | None
    latest_version_id: str | None
    version_count: int


@dataclass(frozen=True, slots=True)
class VersionInfo:
    id: str
    dataset_id: str
    number: int
    item_count: int
    golden: bool
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ItemInfo:
    id: str
    position: int
    input: str
    expected_output: str | None
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NewItem:
    input: str
    expected_output: str | None
    metadata: dict[str, Any]


def _golden_version_id(dataset_id: Any) -> Any:
    """Scalar subquery: the version named by the dataset's newest golden mark."""
    return (
        select(GoldenMark.version_id)
        .where(GoldenMark.dataset_id == dataset_id)
        .order_by(GoldenMark.id.desc())
        .limit(1)
        .scalar_subquery()
    )


def _dataset_query(project_id: str) -> Select[Any]:
    latest = (
        select(DatasetVersion.id)
        .where(DatasetVersion.dataset_id == Dataset.id)
        .order_by(DatasetVersion.number.desc())
        .limit(1)
        .scalar_subquery()
    )
    count = select(func.count()).where(DatasetVersion.dataset_id == Dataset.id).scalar_subquery()
    return select(Dataset, _golden_version_id(Dataset.id), latest, count).where(
        owned_by(Dataset, project_id)
    )


def _dataset_info(row: Any) -> DatasetInfo:
    dataset, golden, latest, count = row
    return DatasetInfo(dataset.id, dataset.name, dataset.created_at, golden, latest, count)


async def _require_dataset(s: AsyncSession, project_id: str, dataset_id: str) -> Dataset:
    return await owned(s, DATASET, project_id, dataset_id)


DATASET_NAME_UNIQUE = "uq_datasets_project_id_name"
"""The constraint that keeps dataset names unique in a project (for `Database.write_unique`)."""


async def create_dataset(db: Database, project_id: str, name: str) -> DatasetInfo:
    async def work(s: AsyncSession) -> Dataset:
        return await add_dataset(
            s, project_id, name, exists_hint="push a new version to it instead"
        )

    dataset = await db.write_unique(work, DATASET_NAME_UNIQUE)
    return DatasetInfo(dataset.id, dataset.name, dataset.created_at, None, None, 0)


async def add_dataset(
    s: AsyncSession, project_id: str, name: str, *, exists_hint: str, field: str = "name"
) -> Dataset:
    """A new empty dataset in the caller's transaction; 409 naming `field` when the project has
    a dataset of that name (`exists_hint` says what to do instead). Run the transaction with
    `Database.write_unique(…, DATASET_NAME_UNIQUE)`, so that a concurrent create of the name gets
    the 409 too."""
    exists = await s.scalar(
        select(Dataset.id).where(owned_by(Dataset, project_id), Dataset.name == name)
    )
    if exists is not None:
        raise Conflict(
            f"a dataset named {name!r} already exists ({exists}); {exists_hint}", field=field
        )
    dataset = Dataset(id=new_id("ds_"), project_id=project_id, name=name)
    s.add(dataset)
    await s.flush()
    return dataset


async def list_datasets(
    db: Database, project_id: str, *, name: str | None = None
) -> list[DatasetInfo]:
    query = _dataset_query(project_id).order_by(Dataset.created_at, Dataset.id)
    if name is not None:
        query = query.where(Dataset.name == name)
    async with db.read() as s:
        return [_dataset_info(row) for row in (await s.execute(query)).all()]


async def get_dataset(db: Database, project_id: str, dataset_id: str) -> DatasetInfo:
    async with db.read() as s:
        row = (await s.execute(_dataset_query(project_id).where(Dataset.id == dataset_id))).first()
    if row is None:
        raise DATASET.missing(dataset_id)
    return _dataset_info(row)


async def create_version(
    db: Database, project_id: str, dataset_id: str, items: list[NewItem], *, golden: bool
) -> VersionInfo:
    """Snapshot `items` as the dataset's next version, in the order given."""
    async with db.write() as s:
        # Lock the dataset row (PostgreSQL) so concurrent pushes get distinct version numbers.
        await owned(s, DATASET, project_id, dataset_id, for_update=True)
        version = await add_version(s, dataset_id, items, golden=golden)
    return VersionInfo(
        version.id, dataset_id, version.number, len(items), golden, version.created_at
    )


async def add_version(
    s: AsyncSession, dataset_id: str, items: list[NewItem], *, golden: bool
) -> DatasetVersion:
    """The dataset's next version in the caller's transaction, which has locked the dataset's
    row (`owned(..., for_update=True)`) or created it."""
    number = (
        await s.scalar(
            select(func.max(DatasetVersion.number)).where(DatasetVersion.dataset_id == dataset_id)
        )
        or 0
    ) + 1
    version = DatasetVersion(
        id=new_id("dsv_"), dataset_id=dataset_id, number=number, item_count=len(items)
    )
    s.add(version)
    await s.flush()
    await s.execute(
        insert(DatasetItem),
        [
            {
                "id": new_id("dsi_"),
                "version_id": version.id,
                "position": position,
                "input": item.input,
                "expected_output": item.expected_output,
                "item_metadata": item.metadata,
            }
            for position, item in enumerate(items)
        ],
    )
    if golden:
        s.add(GoldenMark(dataset_id=dataset_id, version_id=version.id))
    return version


async def list_versions(db: Database, project_id: str, dataset_id: str) -> list[VersionInfo]:
    async with db.read() as s:
        await _require_dataset(s, project_id, dataset_id)
        golden = await s.scalar(select(_golden_version_id(dataset_id)))
        versions = await s.scalars(
            select(DatasetVersion)
            .where(DatasetVersion.dataset_id == dataset_id)
            .order_by(DatasetVersion.number)
        )
        return [
            VersionInfo(v.id, v.dataset_id, v.number, v.item_count, v.id == golden, v.created_at)
            for v in versions
        ]


async def _require_version(
    s: AsyncSession, project_id: str, dataset_id: str, version_id: str
) -> DatasetVersion:
    await _require_dataset(s, project_id, dataset_id)
    version = await s.scalar(
        select(DatasetVersion).where(
            DatasetVersion.id == version_id, DatasetVersion.dataset_id == dataset_id
        )
    )
    if version is None:
        raise NotFound(f"no version {version_id!r} in dataset {dataset_id!r}", field="version_id")
    return version


async def get_version(
    db: Database, project_id: str, dataset_id: str, version_id: str
) -> VersionInfo:
    async with db.read() as s:
        v = await _require_version(s, project_id, dataset_id, version_id)
        golden = await s.scalar(select(_golden_version_id(dataset_id)))
    return VersionInfo(v.id, v.dataset_id, v.number, v.item_count, v.id == golden, v.created_at)


async def list_items(
    db: Database, project_id: str, dataset_id: str, version_id: str, *, limit: int, start: int
) -> list[ItemInfo]:
    """Up to `limit` items from position `start` on, in frozen order. A version's positions
    are 0, 1, 2, … and never change, so this is a seek on the version's position index
    however deep the page."""
    async with db.read() as s:
        await _require_version(s, project_id, dataset_id, version_id)
        rows = await s.scalars(
            select(DatasetItem)
            .where(DatasetItem.version_id == version_id, DatasetItem.position >= start)
            .order_by(DatasetItem.position)
            .limit(limit)
        )
        return [
            ItemInfo(r.id, r.position, r.input, r.expected_output, r.item_metadata) for r in rows
        ]


async def mark_golden(
    db: Database, project_id: str, dataset_id: str, version_id: str
) -> VersionInfo:
    """Make `version_id` the dataset's golden version. The version itself is not changed."""
    async with db.write() as s:
        v = await _require_version(s, project_id, dataset_id, version_id)
        s.add(GoldenMark(dataset_id=dataset_id, version_id=version_id))
    return VersionInfo(v.id, v.dataset_id, v.number, v.item_count, True, v.created_at)
