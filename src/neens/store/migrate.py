"""Applying the Alembic migrations shipped inside the package (`neens db upgrade`, server start).

Every server, worker and database command upgrades its database before it starts. A database that
is already at `HEAD_REVISION` is recognised with one query, and Alembic is imported only when
there is something to do: loading it and the migration scripts took a third of a second of each
start, paid by every `neens keys …`, `neens mcp` and server process.

A database that cannot be used is one line for the person who started the command, raised as the
CLI's own errors (`DatabaseUnusable`, exit 2; `DatabaseUnreachable`, exit 3): a URL Neens does
not read, a connection refused, or a revision this Neens lacks because a newer one migrated it,
which is never downgraded or upgraded past.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Final

from neens_eval.errors import ConfigError, Unreachable
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from neens.store.db import SQLITE_BEGIN_WRITE, make_engine, normalize_url

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
PG_MIGRATION_LOCK = 0x4E45454E53
"""Advisory-lock key so that several servers starting at once migrate one after another (on
SQLite, the database's own write lock, taken for the whole upgrade, does the same)."""

HEAD_REVISION: Final = "0024"
"""The newest migration's revision (migrations/versions/): a new migration changes it too, and
tests/store/test_migrations.py holds it to the scripts' own head."""


class DatabaseUnusable(ConfigError):
    """The database cannot be used as configured (exit code 2): a URL Neens does not read, a
    SQLite file that cannot be opened, or a schema written by a newer Neens."""


class DatabaseUnreachable(Unreachable):
    """The database server did not accept a connection (exit code 3: try again once it is up)."""


def _label(url: str) -> str:
    """The database's URL for a message, without its password."""
    return make_url(url).render_as_string(hide_password=True)


def check_url(url: str) -> None:
    """Refuse (`DatabaseUnusable`) a database URL Neens cannot read or use, before anything
    that needs it starts."""
    try:
        make_url(url).get_backend_name()
    except (ArgumentError, ValueError):  # not a URL, or a broken host or port in it
        raise DatabaseUnusable(
            "database URL: not a URL Neens can read (--database-url or NEENS_DATABASE_URL); "
            "use sqlite:///path/to/neens.db or postgresql+psycopg://user@host/dbname"
        ) from None
    try:
        normalize_url(url)
    except ValueError as exc:  # a scheme other than SQLite or PostgreSQL
        raise DatabaseUnusable(f"database URL: {exc}") from None


def _engine(url: str, *, foreign_keys: bool = True) -> AsyncEngine:
    check_url(url)
    engine = make_engine(url, foreign_keys=foreign_keys)
    if engine.dialect.name == "sqlite":
        _check_sqlite_file(url)
    return engine


def _check_sqlite_file(url: str) -> None:
    """Open the SQLite file once with the standard library first: when aiosqlite fails to open
    it, its thread reports the failure to an event loop that `asyncio.run` may have closed by
    then, printing a traceback after the command's own one-line error."""
    database = make_url(url).database
    if not database or database == ":memory:":
        return
    directory = Path(database).parent
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise DatabaseUnusable(
            f"cannot open the database {_label(url)}: {directory} {what}; check the path, or "
            "create the directory first (--database-url or NEENS_DATABASE_URL)"
        )
    try:
        sqlite3.connect(database).close()
    except sqlite3.Error as exc:
        raise DatabaseUnusable(
            f"cannot open the database {_label(url)}: {exc}; check the path and its "
            "permissions (--database-url or NEENS_DATABASE_URL)"
        ) from None


async def _connect(engine: AsyncEngine, url: str) -> AsyncConnection:
    """A connection, or one line saying why there is none instead of the driver's traceback."""
    try:
        return await engine.connect()
    except DBAPIError as exc:
        reason = " ".join(str(exc.orig).split()) or type(exc.orig).__name__
        if engine.dialect.name == "sqlite":
            raise DatabaseUnusable(
                f"cannot open the database {_label(url)}: {reason}; check the path and its "
                "permissions (--database-url or NEENS_DATABASE_URL)"
            ) from None
        raise DatabaseUnreachable(
            f"cannot connect to the database {_label(url)}: {reason}; check that it is running "
            "and that the URL is right (--database-url or NEENS_DATABASE_URL)"
        ) from None


async def _recorded_revisions(url: str) -> list[str] | None:
    """The revisions the database records, or None when it has no version table (a database
    Neens has not set up yet)."""
    engine = _engine(url)
    try:
        conn = await _connect(engine, url)
        try:
            result = await conn.execute(text("SELECT version_num FROM alembic_version"))
            return list(result.scalars())
        except DBAPIError:
            return None
        finally:
            await conn.close()
    finally:
        await engine.dispose()


def _refuse_unknown(url: str, recorded: list[str] | None) -> None:
    """Refuse a database at a revision the scripts do not have: a newer Neens migrated it, and
    neither an upgrade nor the code of this one can be trusted with it."""
    for revision in recorded or []:
        if not is_known(revision):
            raise DatabaseUnusable(
                f"the database {_label(url)} is at migration {revision!r}, which this Neens does "
                f"not have (its newest is {HEAD_REVISION}): a newer Neens has upgraded it. Run "
                "that newer Neens, or upgrade this one (pip install -U neens)"
            )


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


async def _run(url: str, action: str, revision: str, recorded: list[str] | None) -> None:
    """Upgrade or downgrade to `revision` a database recording the revisions `recorded`."""
    from alembic import command

    _refuse_unknown(url, recorded)
    engine = _engine(url, foreign_keys=False)
    try:
        conn = await _connect(engine, url)
        try:
            async with conn.begin():
                if conn.dialect.name == "postgresql":
                    await conn.execute(text(f"SELECT pg_advisory_xact_lock({PG_MIGRATION_LOCK})"))
                else:
                    # The whole upgrade in one transaction holding SQLite's write lock: commands
                    # started at once on a new store migrate one after another (the next finds
                    # the tables there), and a failed upgrade leaves nothing half-made. Without
                    # it Python's sqlite3 ran each CREATE TABLE on its own, and the second
                    # command failed on "table companies already exists".
                    await conn.exec_driver_sql(SQLITE_BEGIN_WRITE)

                def run(sync_conn: Connection) -> None:
                    config = alembic_config(sync_conn)
                    if action == "upgrade":
                        command.upgrade(config, revision)
                    else:
                        command.downgrade(config, revision)

                await conn.run_sync(run)
        finally:
            await conn.close()
    finally:
        await engine.dispose()


async def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database to `revision`. Raises `DatabaseUnusable` or `DatabaseUnreachable`
    (one line each) when it cannot be opened or a newer Neens has migrated it."""
    recorded = await _recorded_revisions(url)
    if revision == "head" and recorded == [HEAD_REVISION]:
        return
    await _run(url, "upgrade", revision, recorded)


async def require_current(url: str) -> None:
    """Refuse (`DatabaseUnusable`) a database not migrated to this version's schema, for a
    server or worker told not to migrate it on start (`NEENS_MIGRATE_ON_START=false`): it
    failed inside its startup with "no such table", naming no way out."""
    recorded = await _recorded_revisions(url)
    _refuse_unknown(url, recorded)
    if recorded != [HEAD_REVISION]:
        found = f"revision {', '.join(recorded)}" if recorded else "no Neens schema yet"
        raise DatabaseUnusable(
            f"the database {_label(url)} has {found}, not this version's {HEAD_REVISION}, and "
            "NEENS_MIGRATE_ON_START is false: run `neens db upgrade` first (or leave "
            "NEENS_MIGRATE_ON_START unset to migrate on start)"
        )


async def downgrade(url: str, revision: str) -> None:
    await _run(url, "downgrade", revision, await _recorded_revisions(url))


async def current_revision(url: str) -> str | None:
    """The revision the database records; None for one Neens has not set up."""
    recorded = await _recorded_revisions(url)
    return recorded[0] if recorded else None


def is_known(revision: str) -> bool:
    """Whether this Neens has the migration `revision` (False: a newer Neens wrote it)."""
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except CommandError:
        return False
