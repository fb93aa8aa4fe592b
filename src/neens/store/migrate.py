"""Applying the Alembic migrations shipped inside the package (`neens db upgrade`, server start).

Every server, worker and database command upgrades its database before it starts. A database that
is already at `HEAD_REVISION` is recognised with one query, and Alembic is imported only when
there is something to do: loading it and the migration scripts took a third of a second of each
start, paid by every `neens keys …`, `neens mcp` and server process.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

from neens.store.db import make_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
PG_MIGRATION_LOCK = 0x4E45454E53
"""Advisory-lock key so that several servers starting at once migrate one after another."""

HEAD_REVISION: Final = "0021"
"""The newest migration's revision (migrations/versions/): a new migration changes it too, and
tests/store/test_migrations.py holds it to the scripts' own head."""


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    """The head of the migration scripts, as Alembic reads them."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def _run(url: str, action: str, revision: str) -> None:
    from alembic import command

    engine = make_engine(url, foreign_keys=False)
    try:
        async with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                await conn.execute(text(f"SELECT pg_advisory_xact_lock({PG_MIGRATION_LOCK})"))

            def run(sync_conn: Connection) -> None:
                config = alembic_config(sync_conn)
                if action == "upgrade":
                    command.upgrade(config, revision)
                else:
                    command.downgrade(config, revision)

            await conn.run_sync(run)
    finally:
        await engine.dispose()


async def _at_head(url: str) -> bool:
    """Whether the database records exactly `HEAD_REVISION`; False when it cannot be read (no
    version table, no database yet), which the full upgrade then handles or reports."""
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            result = await conn.execute(text("SELECT version_num FROM alembic_version"))
            versions = list(result.scalars())
    except DBAPIError:
        return False
    finally:
        await engine.dispose()
    return versions == [HEAD_REVISION]


async def upgrade(url: str, revision: str = "head") -> None:
    if revision == "head" and await _at_head(url):
        return
    await _run(url, "upgrade", revision)


async def downgrade(url: str, revision: str) -> None:
    await _run(url, "downgrade", revision)


async def current_revision(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(
                lambda c: MigrationContext.configure(c).get_current_revision()
            )
    finally:
        await engine.dispose()
