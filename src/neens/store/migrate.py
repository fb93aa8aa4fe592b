"""Applying the Alembic migrations shipped inside the package (`neens db upgrade`, server start)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from neens.store.db import make_engine

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
PG_MIGRATION_LOCK = 0x4E45454E53
"""Advisory-lock key so that several servers starting at once migrate one after another."""


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def _run(url: str, action: str, revision: str) -> None:
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


async def upgrade(url: str, revision: str = "head") -> None:
    await _run(url, "upgrade", revision)


async def downgrade(url: str, revision: str) -> None:
    await _run(url, "downgrade", revision)


async def current_revision(url: str) -> str | None:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(
                lambda c: MigrationContext.configure(c).get_current_revision()
            )
    finally:
        await engine.dispose()
