"""Engines and transactions for the embedded SQLite default and for PostgreSQL.

SQLite allows one writer at a time. Rather than let concurrent requests collide inside SQLite and
poll its busy handler, writes from this process queue on an asyncio lock; `busy_timeout` still
covers writers in other processes (`neens worker`s on the same file, a `neens keys create` while
the server runs).

Every write transaction on SQLite starts with `BEGIN IMMEDIATE`, which takes the database's write
lock before the transaction's first read. Python's sqlite3 module would otherwise begin only at
the first INSERT or UPDATE, so a write block's reads ran outside it: two processes could both
read a job as queued and both claim it, the later UPDATE overwriting the first.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, Final, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from neens.secrets import SecretBox, SecretKeyError
from neens.store.types import json_dumps
from neens.store.wal_checkpoint import BACKSTOP_PAGES, Checkpointer

SQLITE_JOURNAL_MODE = "WAL"
"""Readers never block the writer and the writer never blocks readers."""
SQLITE_BUSY_TIMEOUT_MS = 10_000
"""How long a writer from another process waits for the lock before failing."""
SQLITE_BEGIN_WRITE = "BEGIN IMMEDIATE"
"""How a write transaction starts on SQLite: holding the write lock from its first statement, so
what it reads cannot change under it before it commits (see the module's docstring)."""
UNIQUE_RACE_ATTEMPTS = 3
"""How many times `Database.write_unique` runs its work when commits keep breaking its unique
constraints (each time because another transaction committed the same key first)."""
SQLITE_SYNCHRONOUS = "NORMAL"
"""With WAL, NORMAL is durable across application crashes; only an OS crash can lose the last
commits. (OFF, which some tools use, can lose acknowledged writes.)"""


def normalize_url(url: str) -> str:
    """Accept the URLs people paste (`postgresql://…`, `sqlite:///…`) and pick the async driver."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend == "sqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    else:
        raise ValueError(
            f"unsupported database URL scheme {parsed.drivername!r}: "
            "use sqlite:///path/to/neens.db or postgresql+psycopg://user@host/dbname"
        )
    return parsed.render_as_string(hide_password=False)


_NO_ADAPTERS: Final[dict[None, None]] = {}
_NONE_AS_IS: Final = _NO_ADAPTERS.get
"""A C function that gives back None for None (`{}.get(None)`)."""


def _bind_none_directly() -> None:
    """Bind None as NULL without sqlite3's search for an adapter.

    The sqlite3 module binds str, int, float and bytes as they are, but looks for an adapter for
    any other value, None included, and when the registry has none it asks its protocol type for
    `__adapt__`, whose AttributeError (message formatted, then dropped) cost more than binding
    the value: about a fifth of the writing thread's instructions in span ingest, where a span
    row holds eight NULLs or so. An adapter registered for None is found at the first step and
    returns None, which binds as NULL exactly as before. The registry is the module's, so this
    holds for every SQLite connection in the process."""
    sqlite3.register_adapter(type(None), _NONE_AS_IS)


def make_engine(url: str, *, foreign_keys: bool = True) -> AsyncEngine:
    """An async engine with Neens' connection settings."""
    url = normalize_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_async_engine(url, pool_pre_ping=True, json_serializer=json_dumps)
    _bind_none_directly()
    engine = create_async_engine(
        url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, json_serializer=json_dumps
    )
    _set_sqlite_pragmas(engine.sync_engine, foreign_keys=foreign_keys)
    return engine


def _make_sync_sqlite_engine(url: str) -> Engine:
    """A synchronous engine on the same SQLite file, with the same settings, for `run_write`.

    Its connections are made and used on `run_write`'s one thread; `check_same_thread` is off
    only so that `dispose()` may close them from the event loop's thread.
    """
    parsed = make_url(normalize_url(url)).set(drivername="sqlite+pysqlite")
    engine = create_engine(
        parsed,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
        json_serializer=json_dumps,
    )
    # Checkpoints are left to `Checkpointer`; the writer's own is only the backstop.
    _set_sqlite_pragmas(engine, foreign_keys=True, wal_autocheckpoint=BACKSTOP_PAGES)
    return engine


def _set_sqlite_pragmas(
    engine: Engine, *, foreign_keys: bool, wal_autocheckpoint: int | None = None
) -> None:
    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA journal_mode={SQLITE_JOURNAL_MODE}")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute(f"PRAGMA synchronous={SQLITE_SYNCHRONOUS}")
        # Off only while migrating: SQLite rebuilds tables to alter them.
        cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
        if wal_autocheckpoint is not None:
            cursor.execute(f"PRAGMA wal_autocheckpoint={wal_autocheckpoint}")
        cursor.close()


T = TypeVar("T")


class Database:
    """The engine plus the two ways in, `read()` and `write()`, and `run_write()` for a write
    path hot enough that SQLite's per-statement thread hops matter (span ingest)."""

    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        self.dialect = self.engine.dialect.name
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._write_lock = asyncio.Lock() if self.dialect == "sqlite" else None
        self._memo: dict[tuple[str, str], tuple[float, Any]] = {}
        self._sync_engine: Engine | None = None
        self._sync_thread: ThreadPoolExecutor | None = None
        self._checkpointer: Checkpointer | None = None
        self._secrets: SecretBox | None = None
        database = make_url(normalize_url(url)).database
        if self.dialect == "sqlite" and database and database != ":memory:":
            # (An in-memory database is private to its connection: a second engine would not
            # see it, so `run_write` keeps to the async engine there.)
            self._sync_engine = _make_sync_sqlite_engine(url)
            self._sync_thread = ThreadPoolExecutor(1, thread_name_prefix="neens-sqlite-write")
            self._checkpointer = Checkpointer(database, SQLITE_BUSY_TIMEOUT_MS)

    @property
    def secrets(self) -> SecretBox:
        """The keys stored secrets are encrypted with; set by whoever starts the server, a
        worker or a command (`neens.secrets.load_secret_box`)."""
        if self._secrets is None:
            raise SecretKeyError("no secret keys configured for this database handle")
        return self._secrets

    @secrets.setter
    def secrets(self, box: SecretBox) -> None:
        self._secrets = box

    def memo_get(self, kind: str, key: str, *, ttl_s: float) -> Any | None:
        """A value remembered within the last `ttl_s` seconds by this process, else None."""
        hit = self._memo.get((kind, key))
        if hit is None or time.monotonic() - hit[0] > ttl_s:
            return None
        return hit[1]

    def memo_set(self, kind: str, key: str, value: Any) -> None:
        self._memo[(kind, key)] = (time.monotonic(), value)

    def memo_forget(self, kind: str, key: str | None = None) -> None:
        """Forget one remembered value, or every value of `kind`."""
        for memo_key in [k for k in self._memo if k[0] == kind and key in (None, k[1])]:
            del self._memo[memo_key]

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self._sessions() as session:
            yield session

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """A transaction committed when the block exits cleanly, rolled back otherwise."""
        if self._write_lock is None:
            async with self._sessions() as session, session.begin():
                yield session
            return
        async with self._write_lock, self._sessions() as session, session.begin():
            await session.execute(text(SQLITE_BEGIN_WRITE))
            yield session

    async def write_unique(
        self, work: Callable[[AsyncSession], Awaitable[T]], *constraints: str
    ) -> T:
        """`work` in a `write()` transaction, run again in a new one when the database refuses it
        for breaking one of the unique `constraints` (named as `unique_violated` names them).

        For work that checks a name is free before it inserts or renames, raising its 409 when it
        is taken. On PostgreSQL two transactions for one name can both pass the check; the later
        insert then waits for the earlier transaction and, once that commits, breaks the
        constraint. That transaction is rolled back, and the work run again sees the committed row
        and raises the same 409 as any later request for the name. Any other integrity error (a
        foreign key, another constraint) is raised as it is. (SQLite writers take turns, so
        there the check always sees the earlier row.)
        """
        attempt = 1
        while True:
            try:
                async with self.write() as s:
                    return await work(s)
            except IntegrityError as exc:
                if attempt >= UNIQUE_RACE_ATTEMPTS or unique_violated(exc) not in constraints:
                    raise
            attempt += 1

    async def run_write(
        self,
        work: Callable[[Connection], T],
        *,
        prepare: Callable[[], Awaitable[object]] | None = None,
    ) -> T:
        """Run `work` (synchronous SQLAlchemy code) in one transaction: committed when it returns,
        rolled back when it raises. `prepare`, if given, is awaited just before, holding the same
        write lock: reads that `work`'s writes depend on (a project's prices) cannot go stale
        before the commit, exactly as if they were made inside a `write()` block.

        For a hot write path. On PostgreSQL it runs on the async engine through `run_sync`, just
        like a `write()` block. On a SQLite file it runs on a thread of its own with a synchronous
        connection, holding the same write lock as `write()`: aiosqlite hops to its thread and
        back for every cursor, execute, fetch, close, commit and pool reset, and those hops cost
        more than the statements; here the whole transaction is one hop. If the caller is
        cancelled, the lock is kept until the thread has finished the transaction. That thread's
        connection leaves checkpoints to a thread of their own (`store.wal_checkpoint`).
        """
        if self._sync_thread is None or self._sync_engine is None or self._write_lock is None:
            async with self._write_lock or contextlib.nullcontext():
                if prepare is not None:
                    await prepare()
                async with self.engine.begin() as conn:
                    if self._write_lock is not None:
                        await conn.exec_driver_sql(SQLITE_BEGIN_WRITE)
                    return await conn.run_sync(work)
        engine = self._sync_engine
        checkpointer = self._checkpointer

        def transaction() -> T:
            with engine.begin() as conn:
                conn.exec_driver_sql(SQLITE_BEGIN_WRITE)
                result = work(conn)
            if checkpointer is not None:
                checkpointer.after_commit()
            return result

        async with self._write_lock:
            if prepare is not None:
                await prepare()
            done = asyncio.get_running_loop().run_in_executor(self._sync_thread, transaction)
            try:
                return await asyncio.shield(done)
            except asyncio.CancelledError:
                await asyncio.wait([done])
                raise

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self._sync_thread is not None and self._sync_engine is not None:
            await asyncio.get_running_loop().run_in_executor(
                self._sync_thread, self._sync_engine.dispose
            )
            self._sync_thread.shutdown(wait=True)
            self._sync_thread = None
        if self._checkpointer is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._checkpointer.close)


_SQLITE_UNIQUE_FAILED = "UNIQUE constraint failed: "


def unique_violated(exc: IntegrityError) -> str | None:
    """The unique constraint `exc` reports breaking, or None when it is another integrity error.

    The name is PostgreSQL's, which follows the schema's naming convention,
    `uq_<table>_<column>_<column>…` (`neens.store.models.NAMING_CONVENTION`). SQLite reports the
    columns instead ("UNIQUE constraint failed: datasets.project_id, datasets.name"), which
    name the same constraint by that convention.
    """
    orig = exc.orig
    if getattr(orig, "sqlstate", None) == "23505":  # psycopg's UniqueViolation
        name = getattr(getattr(orig, "diag", None), "constraint_name", None)
        return name if isinstance(name, str) else None
    message = str(orig)
    if not isinstance(orig, sqlite3.IntegrityError) or not message.startswith(
        _SQLITE_UNIQUE_FAILED
    ):
        return None
    columns = [c.strip().split(".", 1) for c in message[len(_SQLITE_UNIQUE_FAILED) :].split(",")]
    if any(len(c) != 2 or c[0] != columns[0][0] for c in columns):
        return None
    return "_".join(["uq", columns[0][0], *(c[1] for c in columns)])


def upsert_insert(session: AsyncSession, table: Any) -> Any:
    """The dialect's own INSERT, which knows ON CONFLICT (both SQLite and PostgreSQL)."""
    return dialect_insert(session.get_bind().dialect.name, table)


def dialect_insert(dialect: str, table: Any) -> Any:
    """`upsert_insert` by dialect name."""
    if dialect == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
