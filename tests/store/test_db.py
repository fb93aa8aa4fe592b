"""Database URLs and the SQLite settings that make the embedded default durable."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import Connection, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from neens.store.datasets import DATASET_NAME_UNIQUE
from neens.store.db import UNIQUE_RACE_ATTEMPTS, Database, normalize_url, unique_violated
from neens.store.keys import CreatedKey
from neens.store.models import Dataset


def test_pasted_urls_get_the_async_driver() -> None:
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert (
        normalize_url("postgresql+psycopg://u:p@h:5433/db") == "postgresql+psycopg://u:p@h:5433/db"
    )
    assert normalize_url("sqlite:///x/neens.db") == "sqlite+aiosqlite:///x/neens.db"


def test_an_unsupported_database_is_refused_with_the_schemes_to_use() -> None:
    with pytest.raises(ValueError, match="postgresql\\+psycopg"):
        normalize_url("mysql://root@localhost/test")


@pytest.mark.parametrize("dialect", ["sqlite"])
async def test_sqlite_runs_in_wal_mode_with_foreign_keys_enforced(db: Database) -> None:
    async with db.read() as s:
        assert (await s.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
        assert (await s.execute(text("PRAGMA foreign_keys"))).scalar() == 1
        assert (await s.execute(text("PRAGMA synchronous"))).scalar() == 1  # NORMAL
        assert (await s.execute(text("PRAGMA busy_timeout"))).scalar() == 10_000


async def test_none_binds_as_null_through_the_registered_adapter(db: Database) -> None:
    """On SQLite, None takes the adapter registry's first step (`_bind_none_directly`) and is
    still bound as NULL, through the driver and through SQLAlchemy, on both engines."""
    if db.dialect != "sqlite":
        pytest.skip("an adapter of Python's sqlite3 module")
    assert sqlite3.adapters[(type(None), sqlite3.PrepareProtocol)](None) is None

    def bound(conn: Connection) -> tuple[object, ...]:
        row = conn.exec_driver_sql("SELECT ? IS NULL, typeof(?), coalesce(?, 'x')", (None,) * 3)
        return tuple(row.one())

    assert await db.run_write(bound) == (1, "null", "x")
    async with db.read() as s:
        row = (await s.execute(text("SELECT :v IS NULL, typeof(:v)"), {"v": None})).one()
    assert tuple(row) == (1, "null")


async def test_unique_violated_names_the_constraint_on_both_databases(
    db: Database, ingest_key: CreatedKey
) -> None:
    project = ingest_key.project_id
    async with db.write() as s:
        s.add(Dataset(id="ds_first", project_id=project, name="golden"))
    with pytest.raises(IntegrityError) as taken:
        async with db.write() as s:
            s.add(Dataset(id="ds_second", project_id=project, name="golden"))
    assert unique_violated(taken.value) == DATASET_NAME_UNIQUE
    with pytest.raises(IntegrityError) as orphan:
        async with db.write() as s:
            s.add(Dataset(id="ds_orphan", project_id="prj_none", name="x"))
    assert unique_violated(orphan.value) is None, "a foreign key is no unique constraint"


async def test_write_unique_runs_again_only_for_its_own_constraints(
    db: Database, ingest_key: CreatedKey
) -> None:
    project = ingest_key.project_id
    async with db.write() as s:
        s.add(Dataset(id="ds_first", project_id=project, name="golden"))
    runs: list[str] = []

    async def insert(dataset_id: str, project_id: str) -> None:
        async def work(s: AsyncSession) -> None:
            runs.append(dataset_id)
            s.add(Dataset(id=dataset_id, project_id=project_id, name="golden"))

        await db.write_unique(work, DATASET_NAME_UNIQUE)

    # Its own constraint, broken every time (no check to raise a 409): run again, then raised.
    with pytest.raises(IntegrityError):
        await insert("ds_again", project)
    assert runs == ["ds_again"] * UNIQUE_RACE_ATTEMPTS
    # Any other integrity error is raised at once, as it always was.
    runs.clear()
    with pytest.raises(IntegrityError):
        await insert("ds_orphan", "prj_none")
    assert runs == ["ds_orphan"]
    async with db.read() as s:
        assert list(await s.scalars(select(Dataset.id))) == ["ds_first"]
