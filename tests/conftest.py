"""Fixtures shared by the whole suite: a fresh database per test on SQLite and on PostgreSQL,
the app in-process, keys, and a live server on loopback.

Every test that asks for `database_url` (directly or through `db`, `client`, `live_server`)
runs once per dialect (once, on SQLite, where tests/support/sqlite_only.py says why). Set
NEENS_TEST_POSTGRES_URL to use another PostgreSQL server; with NEENS_REQUIRE_POSTGRES=1 (as CI
sets) a missing server fails the run instead of skipping.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import fastapi.dependencies.models as fastapi_dependency_models
import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from neens.api.app import YOUNG_GENERATION_THRESHOLD, create_app
from neens.settings import Settings
from neens.store import migrate
from neens.store.db import Database
from neens.store.keys import CreatedKey, create_key
from tests.support.live import LiveServer, serve_in_thread
from tests.support.pg_pool import PostgresDatabases

PG_URL = os.environ.get(
    "NEENS_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
TEST_SECRET_KEY = "uFnU4dFmBxZJ1m7c3b0q9mJm2rZ9cWq3n1X6d8yq0aE="
"""A fixed Fernet key (32 url-safe base64 bytes) for the stored secrets of tests."""


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Move what importing and collecting made (some 300,000 objects: modules, the ORM, every
    test module) out of the cyclic garbage collector's reach, as `neens serve` does after start
    (`create_app(freeze_startup_heap=True)`): they live as long as the process anyway, and every
    full collection a test triggers would otherwise scan them all again. The youngest generation
    is collected every 50,000 allocations instead of 700, as there too: fewer short-lived objects
    are promoted, so full collections come less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *gc.get_threshold()[1:])


@pytest.fixture(autouse=True)
def _forget_finished_apps() -> Iterator[None]:
    """Let each test's app be freed when the test ends.

    FastAPI caches what it learns about each dependency and endpoint function in module-level
    caches of 4,096 entries (`fastapi.dependencies.models`), and some of those functions are
    closures over their app (fastapi-offline's docs pages). A server makes one app; a test
    process makes thousands, and the caches kept the last thousand or so alive with everything
    they hold: millions of objects for every full garbage collection to scan, which took a
    quarter of the suite's CPU."""
    yield
    forget_finished_apps()


def forget_finished_apps() -> None:
    for cached in vars(fastapi_dependency_models).values():
        if callable(getattr(cached, "cache_clear", None)):
            cached.cache_clear()


@pytest.fixture(autouse=True)
def clean_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Local state goes to tmp_path; no proxy or OTel setting of the machine leaks in."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEENS_HOME", str(tmp_path / "neens-home"))
    for name in list(os.environ):
        upper = name.upper()
        if upper.endswith("_PROXY") or upper.startswith("OTEL_"):
            monkeypatch.delenv(name)
        if upper in ("NEENS_DATABASE_URL", "NEENS_BASE_URL", "NEENS_API_KEY"):
            monkeypatch.delenv(name)
    # PostgreSQL needs a configured key; servers and workers started by tests share this one.
    monkeypatch.setenv("NEENS_SECRET_KEYS", TEST_SECRET_KEY)


def _pg_admin_conninfo(url: str) -> str:
    parsed = make_url(url)
    parts = {
        "host": parsed.host or "127.0.0.1",
        "port": str(parsed.port or 5432),
        "user": parsed.username or "postgres",
        "dbname": parsed.database or "postgres",
    }
    if parsed.password:
        parts["password"] = parsed.password
    return " ".join(f"{k}={v}" for k, v in parts.items())


def _pg_url_for(dbname: str) -> str:
    return make_url(PG_URL).set(database=dbname).render_as_string(hide_password=False)


def _pg_conninfo_for(dbname: str) -> str:
    return _pg_admin_conninfo(_pg_url_for(dbname))


def _pg_admin() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(_pg_admin_conninfo(PG_URL), autocommit=True, connect_timeout=5)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "neens.db"
    asyncio.run(migrate.upgrade(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    try:
        admin = _pg_admin()
    except psycopg.OperationalError as exc:
        reason = f"PostgreSQL not reachable at {PG_URL}: {str(exc).splitlines()[0]}"
        if os.environ.get("NEENS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"NEENS_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    name = f"neens_tpl_{os.getpid()}"
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    asyncio.run(migrate.upgrade(_pg_url_for(name)))
    yield name
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def pg_databases(pg_template: str) -> Iterator[PostgresDatabases]:
    """This process's PostgreSQL test databases, emptied and reused (tests/support/pg_pool.py)."""
    databases = PostgresDatabases(pg_template, _pg_admin, _pg_conninfo_for)
    yield databases
    databases.close()


@pytest.fixture
def database_url(dialect: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database of its own for this test."""
    if dialect == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "neens.db"
        shutil.copyfile(template, path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    databases: PostgresDatabases = request.getfixturevalue("pg_databases")
    name = databases.take()
    yield _pg_url_for(name)
    databases.give_back(name)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


@pytest.fixture
def settings(database_url: str, request: pytest.FixtureRequest) -> Settings:
    # Agent calls get the server's default time (60 s): a machine busy with the rest of the suite
    # has made healthy calls take seconds, and a shorter limit failed them. A test that wants a
    # call to time out marks itself `@pytest.mark.push_timeout(seconds)`.
    marker = request.node.get_closest_marker("push_timeout")
    overrides = {"push_timeout_s": float(marker.args[0])} if marker is not None else {}
    return Settings(database_url=database_url, migrate_on_start=False, **overrides)


@pytest.fixture
async def client(settings: Settings, db: Database) -> AsyncIterator[httpx.AsyncClient]:
    """The real app and database in-process (no sockets), inside the app's lifespan."""
    app = create_app(settings, database=db)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            yield c


@pytest.fixture
async def ingest_key(db: Database) -> CreatedKey:
    return await create_key(db, company="Acme", project="Support agent", role="ingest")


@pytest.fixture
async def admin_key(db: Database, ingest_key: CreatedKey) -> CreatedKey:
    """An admin key of the same project as `ingest_key`."""
    return await create_key(db, company="Acme", project="Support agent", role="admin")


@pytest.fixture
async def other_project_key(db: Database) -> CreatedKey:
    return await create_key(db, company="Globex", project="Billing agent", role="admin")


def auth(key: CreatedKey) -> dict[str, str]:
    return {"Authorization": f"Bearer {key.key}"}


@pytest.fixture
def live_server(database_url: str) -> Iterator[LiveServer]:
    """`neens serve`'s app under uvicorn on a free loopback port, in a thread."""
    settings = Settings(database_url=database_url, migrate_on_start=False)
    with serve_in_thread(create_app(settings)) as server:
        yield server
