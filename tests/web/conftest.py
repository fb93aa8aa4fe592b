"""A Neens server on loopback per test module and database, seeded once through the API
(`scenario.seed`, and `sweeps.seed_sweeps` for the sweep pages), clients signed in to its pages,
and the browser the browser tests drive, with a tab signed in.

The server is module-scoped: seeding runs several push and runner-mode runs, and every test of
a module only reads it or adds data of its own. Each such module is one `xdist_group`, which
`make test` (`--dist loadgroup`) runs in one test process: split over processes, each of them
seeded a server of its own. Browser tests use Debian's chromium through
Playwright; without it they are skipped, unless NEENS_REQUIRE_BROWSER=1 or CI=true (as in
.ci/run), where a missing browser fails them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import pytest

from neens.api.app import create_app
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey, Role, create_key
from tests.conftest import TEST_SECRET_KEY, _pg_admin, _pg_url_for
from tests.support.live import serve_in_thread
from tests.web.pages import sign_in
from tests.web.scenario import Scenario, seed
from tests.web.sweeps import Sweeps, enable_sharing, seed_sweeps

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("NEENS_TEST_ARTIFACTS", ROOT / "test-artifacts"))
CHROMIUM = os.environ.get("NEENS_CHROMIUM", "/usr/bin/chromium")
WIDTH = 1280
"""The window the browser tests use: no page may be wider."""


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


def with_client(
    url: str, call: Callable[[httpx.AsyncClient], Awaitable[T]], *, timeout: float = 60
) -> T:
    """`call` with a client of the server at `url`, run to the end on a loop of its own thread
    (`run_async`): how the synchronous tests and fixtures reach the API."""

    async def go() -> T:
        async with httpx.AsyncClient(base_url=url, timeout=timeout) as client:
            return await call(client)

    return run_async(go())


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
            scenario = with_client(live.url, lambda client: seed(client, admin))
            yield Site(live.url, database_url, settings, admin, ingest, other, scenario)


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


def _sweeps_of(site: Site) -> Sweeps:
    return with_client(site.url, lambda client: seed_sweeps(client, site.admin, site.database_url))


@pytest.fixture(scope="module")
def sweeps(site: Site) -> Sweeps:
    """The sweeps of `tests.web.sweeps`, run on the seeded server."""
    return _sweeps_of(site)


@pytest.fixture(scope="module")
def sqlite_sweeps(sqlite_site: Site) -> Sweeps:
    """The same sweeps on the SQLite server the browser tests use."""
    return _sweeps_of(sqlite_site)


def sharing(site: Site, enabled: bool) -> None:
    """Turn sharing on or off for the site's project (`PUT /share-links/settings`)."""
    with_client(site.url, lambda client: enable_sharing(client, site.admin, enabled))


@pytest.fixture
async def pages(site: Site) -> AsyncIterator[httpx.AsyncClient]:
    """A browser-like client signed in to the pages with the site's admin key."""
    async with httpx.AsyncClient(base_url=site.url, timeout=30) as client:
        await sign_in(client, site.admin)
        yield client


@pytest.fixture
async def anonymous(site: Site) -> AsyncIterator[httpx.AsyncClient]:
    """A client that has not signed in."""
    async with httpx.AsyncClient(base_url=site.url, timeout=30) as client:
        yield client


def browser_required() -> bool:
    return os.environ.get("NEENS_REQUIRE_BROWSER") == "1" or os.environ.get("CI") == "true"


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium, or a skip saying what is missing (a failure where a browser is
    required). While it runs, Playwright keeps an event loop running in this thread: fixtures
    it needs (a server, its seeding) are made before it."""
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
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def browser(sqlite_site: Site) -> Iterator[Any]:
    """One headless chromium per module, started after the site it is for."""
    with chromium() as browser:
        yield browser


@contextmanager
def signed_in_tab(
    browser: Any, url: str, key: str, *, then: str = "/ui/preprod-evals"
) -> Iterator[Any]:
    """A tab of a fresh browser context, `WIDTH` px wide, signed in with `key` through the form
    and on the page `then`. It fails the test if any page opened a dialog (`alert()`): stored
    text never runs."""
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    dialogs: list[str] = []
    tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    tab.goto(f"{url}/ui/sign-in?next={quote(then, safe='/')}")
    tab.fill("#key", key)
    tab.click("button[type=submit]")
    tab.wait_for_url(f"**{then}")
    try:
        yield tab
    finally:
        context.close()
    assert dialogs == [], f"a page ran a script from stored text: {dialogs}"


@pytest.fixture
def tab(browser: Any, sqlite_site: Site) -> Iterator[Any]:
    """A browser tab signed in with the SQLite site's admin key."""
    with signed_in_tab(browser, sqlite_site.url, sqlite_site.admin.key) as signed_in:
        yield signed_in


def no_sideways_scroll(tab: Any) -> None:
    width = tab.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{tab.url} is {width}px wide at a {WIDTH}px window"


@pytest.fixture
def screenshots() -> Path:
    """Where the browser tests write their screenshots (a test artifact, not in git)."""
    path = ARTIFACTS / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class Stop:
    """Where one press of Tab put the keyboard focus."""

    index: int
    """The element's place among the page's controls in document order (`CONTROLS`)."""
    tag: str
    name: str
    """Its name, else its id."""
    text: str
    href: str
    outlined: bool
    """Whether its focus shows: an outline or a box shadow in its computed style."""
    in_footer: bool

    def __str__(self) -> str:
        return f"{self.tag}|{self.name}|{self.text}"


CONTROLS = (
    "a[href], button, input:not([type=hidden]), select, textarea, summary, "
    "[tabindex]:not([tabindex='-1'])"
)
"""What a keyboard user must be able to reach."""

_MARK_CONTROLS = """(selector) => {
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const all = Array.from(document.querySelectorAll(selector)).filter((e) => !e.disabled);
  all.forEach((e, n) => e.setAttribute('data-walk', String(n)));
  return all.map((e, n) => ({n, shown: shown(e), what: e.outerHTML.slice(0, 120)}));
}"""

_FOCUSED = """() => {
  const e = document.activeElement;
  if (!e || e === document.body || !e.hasAttribute('data-walk')) return null;
  const style = getComputedStyle(e);
  const outline = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0;
  return {index: Number(e.getAttribute('data-walk')), tag: e.tagName.toLowerCase(),
          name: e.name || e.id || '', text: (e.innerText || e.value || '').trim().slice(0, 40),
          href: e.getAttribute('href') || '',
          outlined: outline || style.boxShadow !== 'none', in_footer: !!e.closest('footer')};
}"""


def tab_walk(tab: Any, *, limit: int = 300) -> tuple[list[Stop], list[dict[str, Any]]]:
    """Press Tab from where the focus is (the top of a page just loaded) until it leaves the
    page or comes round again: the stops in order, and every control the page shows (numbered
    in document order), so a test can tell which it never reached."""
    controls = tab.evaluate(_MARK_CONTROLS, CONTROLS)
    stops: list[Stop] = []
    for _ in range(limit):
        tab.keyboard.press("Tab")
        focused = tab.evaluate(_FOCUSED)
        if focused is None or (stops and focused["index"] == stops[0].index):
            break
        stops.append(Stop(**focused))
    else:
        raise AssertionError(f"{limit} presses of Tab did not go round {tab.url}")
    return stops, [c for c in controls if c["shown"]]


def reaches_every_control_visibly(stops: list[Stop], controls: list[dict[str, Any]]) -> None:
    """Tab alone reached every control the page shows, each once, in document order (so the
    footer's come last), each with its focus shown."""
    reached = [stop.index for stop in stops]
    missed = [c["what"] for c in controls if c["n"] not in reached]
    assert missed == [], f"Tab never reaches: {missed}"
    assert len(set(reached)) == len(reached), f"Tab stops twice: {[str(s) for s in stops]}"
    assert reached == sorted(reached), f"Tab goes out of reading order: {[str(s) for s in stops]}"
    hidden = [str(stop) for stop in stops if not stop.outlined]
    assert hidden == [], f"focus does not show on: {hidden}"
