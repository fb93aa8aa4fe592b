"""Migrations go up and down on both dialects, and the models match the migrated schema."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect, text

from neens.store import migrate
from neens.store.db import make_engine
from neens.store.models import Base


def _diff(conn: Connection) -> list[object]:
    context = MigrationContext.configure(conn, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names()) - {"alembic_version"}


async def test_models_match_the_migrated_schema(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
    finally:
        await engine.dispose()


async def test_migrations_go_down_to_nothing_and_up_again(database_url: str) -> None:
    assert await migrate.current_revision(database_url) == migrate.head_revision()
    await migrate.downgrade(database_url, "base")
    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == set()
        await migrate.upgrade(database_url)
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == set(Base.metadata.tables)
    finally:
        await engine.dispose()
    assert await migrate.current_revision(database_url) == migrate.head_revision()


async def test_upgrading_twice_changes_nothing(database_url: str) -> None:
    await migrate.upgrade(database_url)
    assert await migrate.current_revision(database_url) == migrate.head_revision()


def test_the_head_revision_constant_is_the_scripts_head() -> None:
    """`migrate.upgrade` leaves a database at `HEAD_REVISION` alone without loading Alembic: a
    migration added without moving the constant would never reach databases at the old head."""
    assert migrate.HEAD_REVISION == migrate.head_revision()


async def test_a_database_one_migration_behind_is_upgraded(database_url: str) -> None:
    await migrate.downgrade(database_url, "-1")
    assert await migrate.current_revision(database_url) != migrate.HEAD_REVISION
    await migrate.upgrade(database_url)
    assert await migrate.current_revision(database_url) == migrate.head_revision()


def test_a_database_at_the_head_is_checked_without_loading_alembic(database_url: str) -> None:
    code = (
        "import asyncio, sys\n"
        "from neens.store import migrate\n"
        f"asyncio.run(migrate.upgrade({database_url!r}))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    env = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "logfire-plugin"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


async def test_a_database_at_a_revision_this_neens_lacks_is_left_as_it_is(
    database_url: str,
) -> None:
    """A newer Neens migrated it: neither upgrading nor downgrading is attempted."""
    engine = make_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        for attempt in (migrate.upgrade(database_url), migrate.downgrade(database_url, "base")):
            with pytest.raises(migrate.DatabaseUnusable, match="at migration '9999', which this"):
                await attempt
        assert await migrate.current_revision(database_url) == "9999"
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == set(Base.metadata.tables)
    finally:
        async with engine.begin() as conn:
            await conn.execute(
                text("UPDATE alembic_version SET version_num = :head"),
                {"head": migrate.HEAD_REVISION},
            )
        await engine.dispose()
    assert migrate.is_known(migrate.HEAD_REVISION)
    assert not migrate.is_known("9999")


async def test_an_unreachable_database_server_is_one_line_without_the_password() -> None:
    url = "postgresql+psycopg://postgres:s3cret@127.0.0.1:1/neens"
    with pytest.raises(migrate.DatabaseUnreachable) as caught:
        await migrate.upgrade(url)
    message = str(caught.value)
    assert message.startswith("cannot connect to the database postgresql+psycopg://postgres:***@")
    assert "s3cret" not in message
    assert "\n" not in message
    assert caught.value.exit_code == 3


def test_commands_started_at_once_on_a_new_sqlite_store_all_migrate_it(tmp_path: Path) -> None:
    """Several processes upgrading one new SQLite file at once (parallel CI jobs sharing a
    store): one creates the tables, the others wait for its write lock and find them there."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'new.db'}"
    probe = (
        f"import asyncio\nfrom neens.store import migrate\nasyncio.run(migrate.upgrade({url!r}))\n"
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", probe], stderr=subprocess.PIPE, text=True, env=os.environ
        )
        for _ in range(4)
    ]
    failures = []
    for process in processes:
        _, stderr = process.communicate(timeout=120)
        if process.returncode != 0:
            failures.append(stderr.strip().splitlines()[-1])
    assert failures == []
    assert asyncio.run(migrate.current_revision(url)) == migrate.HEAD_REVISION


async def test_sinks_sharing_a_name_are_told_apart_when_names_become_unique(
    database_url: str,
) -> None:
    """0024: the oldest keeps the name, later ones take the first free `NAME (n)`; nothing is
    deleted, and another project's sink of the same name is left alone."""
    await migrate.downgrade(database_url, "0023")
    engine = make_engine(database_url)
    sinks = [
        ("sink_a", "prj_1", "hook", 1),
        ("sink_b", "prj_1", "hook", 2),
        ("sink_c", "prj_1", "hook (2)", 3),
        ("sink_d", "prj_1", "hook", 4),
        ("sink_e", "prj_2", "hook", 5),
    ]
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO companies (id, name, created_at) "
                    "VALUES ('co_1', 'Acme', CURRENT_TIMESTAMP)"
                )
            )
            for project in ("prj_1", "prj_2"):
                await conn.execute(
                    text(
                        "INSERT INTO projects (id, company_id, name, created_at) "
                        "VALUES (:id, 'co_1', :id, CURRENT_TIMESTAMP)"
                    ),
                    {"id": project},
                )
            for ident, project, name, minute in sinks:
                await conn.execute(
                    text(
                        "INSERT INTO notification_sinks (id, project_id, name, url, headers, "
                        "created_at) VALUES (:id, :project, :name, 'http://127.0.0.1:9/h', '{}', "
                        ":at)"
                    ),
                    {
                        "id": ident,
                        "project": project,
                        "name": name,
                        "at": f"2026-12-03 10:{minute:02d}:00+00:00",
                    },
                )
        await migrate.upgrade(database_url)
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT id, name FROM notification_sinks"))).all()
    finally:
        await engine.dispose()
    assert dict(rows) == {
        "sink_a": "hook",
        "sink_b": "hook (3)",
        "sink_c": "hook (2)",
        "sink_d": "hook (4)",
        "sink_e": "hook",
    }
