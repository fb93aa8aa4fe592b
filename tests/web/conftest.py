"""A Neens server on loopback per test module and database, seeded once through the API
(`scenario.seed`), and the browser the browser tests drive.

The server is module-scoped: seeding runs several push and runner-mode runs, and every test of
a module only reads it or adds data of its own. Browser tests use Debian's chromium through
Playwright; without it they are skipped, unless NEENS_REQUIRE_BROWSER=1 or CI=true (as in
.ci/run), where a missing browser fails them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from neens.api.app import create_app
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey, Role, create_key
from tests.conftest import TEST_SECRET_KEY, _pg_admin, _pg_url_for
from tests.support.live import LiveServer, serve_in_thread
from tests.web.scenario import Scenario, seed

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("NEENS_TEST_ARTIFACTS", ROOT / "test-artifacts"))
CHROMIUM = os.environ.get("NEENS_CHROMIUM", "/usr/bin/chromium")


@dataclass(frozen=True)
class Site:
    url: str
    database_url: str
    settings: Settings
    admin: CreatedKey
    ingest: CreatedKey
    other: CreatedKey
    """An admin key of another project."""
    scenario: Scenario


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to the end on an event loop of its own thread: Playwright's sync API
    keeps a loop running in the test's thread while a browser is open."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def make_key(database_url: str, role: Role, project: str = "Support agent") -> CreatedKey:
    async def make() -> CreatedKey:
        db = Database(database_url)
        try:
            return await create_key(db, company="Acme", project=project, role=role)
        finally:
            await db.dispose()

    return run_async(make())


def site_settings(database_url: str, home: Path) -> Settings:
    return Settings(
        database_url=database_url, migrate_on_start=False, secret_keys=TEST_SECRET_KEY, home=home
    )


@contextmanager
def fresh_database(dialect: str, request: pytest.FixtureRequest, where: Path) -> Iterator[str]:
    """A migrated, empty database of its own, dropped afterwards."""
    if dialect == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        shutil.copyfile(template, where / "neens.db")
        yield f"sqlite+aiosqlite:///{where / 'neens.db'}"
        return
    template_name: str = request.getfixturevalue("pg_template")
    name = f"neens_web_{os.getpid()}_{where.name}"
    with _pg_admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_name}"')
    yield _pg_url_for(name)
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _site(dialect: str, request: pytest.FixtureRequest, tmp: Path) -> Iterator[Site]:
    with fresh_database(dialect, request, tmp) as database_url:
        settings = site_settings(database_url, tmp / "home")
        with serve_in_thread(create_app(settings)) as live:
            admin = make_key(database_url, "admin")
            ingest = make_key(database_url, "ingest")
            other = make_key(database_url, "admin", project="Billing agent")
            scenario = run_async(_seed(live, admin))
            yield Site(live.url, database_url, settings, admin, ingest, other, scenario)


async def _seed(live: LiveServer, admin: CreatedKey) -> Scenario:
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as client:
        return await seed(client, admin)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    """The seeded server, once per database."""
    yield from _site(str(request.param), request, tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def sqlite_site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    """The seeded server on SQLite, for tests where the database does not matter (the browser)."""
    yield from _site("sqlite", request, tmp_path_factory.mktemp("site"))


def browser_required() -> bool:
    return os.environ.get("NEENS_REQUIRE_BROWSER") == "1" or os.environ.get("CI") == "true"


@pytest.fixture(scope="module")
def browser(sqlite_site: Site) -> Iterator[Any]:
    """One headless chromium per module, started after the site it is for: while it runs,
    Playwright keeps an event loop running in this thread."""
    problem = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "the playwright package is not installed (pip install -e '.[dev]')"
    if problem is None and not Path(CHROMIUM).exists():
        problem = f"no chromium at {CHROMIUM} (apt-get install chromium, or set NEENS_CHROMIUM)"
    if problem is not None:
        if browser_required():
            pytest.fail(f"browser tests are required here but {problem}", pytrace=False)
        pytest.skip(problem)
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def screenshots() -> Path:
    """Where the browser tests write their screenshots (a test artifact, not in git)."""
    path = ARTIFACTS / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path
