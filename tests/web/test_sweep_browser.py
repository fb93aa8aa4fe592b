"""The sweep pages in headless chromium: a void sweep's banner with no chart and no ranking, the
frontier on a comparable one, Share hidden while sharing is off, the public share page redacted,
an arm updating live, nothing wider than 1280 px. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from neens.demo.endpoints import Agent, serve
from tests.api.test_sweeps import ITEMS, RIGHT
from tests.support.preprod import auth, connection, golden_dataset
from tests.web.conftest import Site, run_async
from tests.web.sweeps import Sweeps, enable_sharing, seed_sweeps

pytestmark = pytest.mark.e2e

WIDTH = 1280


@pytest.fixture(scope="module")
def sweeps(sqlite_site: Site) -> Sweeps:
    async def seed() -> Sweeps:
        async with httpx.AsyncClient(base_url=sqlite_site.url, timeout=60) as client:
            return await seed_sweeps(client, sqlite_site.admin, sqlite_site.database_url)

    return run_async(seed())


@pytest.fixture
def page(browser: Any, sqlite_site: Site, sweeps: Sweeps) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    tab.goto(f"{sqlite_site.url}/ui/sign-in?next=/ui/sweeps")
    tab.fill("#key", sqlite_site.admin.key)
    tab.click("button[type=submit]")
    tab.wait_for_url("**/ui/sweeps")
    try:
        yield tab
    finally:
        context.close()


def no_sideways_scroll(tab: Any) -> None:
    width = tab.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{tab.url} is {width}px wide at a {WIDTH}px window"


def sharing(site: Site, enabled: bool) -> None:
    async def put() -> None:
        async with httpx.AsyncClient(base_url=site.url, timeout=30) as client:
            await enable_sharing(client, site.admin, enabled)

    run_async(put())


def test_a_sweep_its_comparison_frontier_and_drill_down_render_within_1280_px(
    page: Any, sqlite_site: Site, sweeps: Sweeps, screenshots: Path
) -> None:
    url = sqlite_site.url
    page.goto(f"{url}/ui/sweeps")
    assert "Model selection" in page.inner_text("main")
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / "sweeps.png"))

    page.click("text=Model selection")
    assert "simulated" in page.inner_text("table.arms")
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / "sweep.png"), full_page=True)

    page.click("text=Compare arms")
    page.wait_for_url("**/compare")
    main = page.inner_text("main")
    assert "bar 50% — from the sweep's pinned gate" in main
    assert "Unattributed" in main and "unpriced" in main
    chart = page.locator("section.frontier img")
    assert chart.count() == 1 and "cost per case" in (chart.get_attribute("alt") or "")
    assert page.evaluate("document.querySelector('section.frontier img').naturalWidth") > 0, (
        "the chart loads under the page's policy"
    )
    assert "Unpriced — not plotted" in page.inner_text("section.frontier")
    assert page.locator("button", has_text="Share (redacted)").count() == 0, "hidden while off"
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / "sweep-compare.png"), full_page=True)

    # The Baseline arm control re-renders the comparison against another arm.
    page.select_option("#baselineArm", sweeps.arms["mini"])
    page.click("button:has-text('Show')")
    page.wait_for_url(f"**baselineArm={sweeps.arms['mini']}**")
    assert "measured against mini" in page.inner_text("section.verdict-box")

    page.goto(f"{url}/ui/sweeps/{sweeps.priced}/compare")
    page.click(f"a[href*='/arms/{sweeps.arms['broken']}/regressions']")
    page.wait_for_url("**/regressions")
    assert "Where broken breaks" in page.inner_text("main")
    assert "question 1" in page.inner_text("main")
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / "sweep-regressions.png"), full_page=True)


def test_a_void_sweep_shows_its_banner_and_no_chart_or_ranking(
    page: Any, sqlite_site: Site, sweeps: Sweeps, screenshots: Path
) -> None:
    page.goto(f"{sqlite_site.url}/ui/sweeps/{sweeps.void}")
    banner = page.locator(".void-banner")
    assert banner.is_visible() and "void" in banner.inner_text()
    assert "Diverged: b" in banner.inner_text()
    assert page.locator("a", has_text="Compare arms").count() == 0
    page.screenshot(path=str(screenshots / "sweep-void.png"), full_page=True)
    page.goto(f"{sqlite_site.url}/ui/sweeps/{sweeps.void}/compare")
    assert page.locator(".void-banner").is_visible()
    assert page.locator("img").count() == 0 and page.locator("section.frontier").count() == 0
    assert page.locator("[data-field=rank]").count() == 0
    assert "Leaderboard" not in page.inner_text("main")
    no_sideways_scroll(page)


def test_share_makes_a_link_whose_page_is_redacted(
    page: Any, browser: Any, sqlite_site: Site, sweeps: Sweeps, screenshots: Path
) -> None:
    sharing(sqlite_site, True)
    try:
        page.goto(f"{sqlite_site.url}/ui/sweeps/{sweeps.priced}/compare")
        page.click("button:has-text('Share (redacted)')")
        link = page.input_value("#share-url")
        page.screenshot(path=str(screenshots / "sweep-share-made.png"))
        public = browser.new_context(viewport={"width": WIDTH, "height": 900}).new_page()
        try:
            public.goto(link)
            text = public.inner_text("body")
            assert "Model selection" in text and "Sign out" not in text
            assert "question 1" not in text and "msa-" not in text and "msw-" not in text
            assert "simulated" in text
            no_sideways_scroll(public)
            public.screenshot(path=str(screenshots / "share.png"), full_page=True)
        finally:
            public.context.close()
    finally:
        sharing(sqlite_site, False)


async def _slow_sweep(site: Site, url: str) -> str:
    async with httpx.AsyncClient(base_url=site.url, timeout=30) as client:
        dataset_id, _ = await golden_dataset(client, site.admin, ITEMS, name="slow-golden")
        conns = [
            await connection(client, site.admin, f"{url}?arm={n}", name=f"slow {n}")
            for n in range(2)
        ]
        r = await client.post(
            "/model-sweeps",
            json={
                "name": "Followed live",
                "versionLabel": "live",
                "datasetId": dataset_id,
                "passK": 1,
                "arms": [
                    {"label": f"arm {n}", "agentConnectionId": c} for n, c in enumerate(conns)
                ],
            },
            headers=auth(site.admin),
        )
        assert r.status_code == 201, r.text
        return str(r.json()["id"])


def test_a_running_sweeps_arms_update_without_a_reload(
    page: Any, sqlite_site: Site, screenshots: Path
) -> None:
    agent = Agent(RIGHT, latency_s=0.6)
    with serve(agent) as server:
        sweep_id = run_async(_slow_sweep(sqlite_site, server.url(agent.path)))
        page.goto(f"{sqlite_site.url}/ui/sweeps/{sweep_id}")
        live = page.locator("#sweep-live")
        assert live.get_attribute("data-terminal") == "false"
        first = page.locator("#sweep-live [data-field='progress.itemsDone']").first
        before = int(first.get_attribute("data-value") or "0")
        page.screenshot(path=str(screenshots / "sweep-live.png"))
        page.evaluate("window.neverReloaded = true")
        page.locator("#sweep-live[data-terminal=true]").wait_for(timeout=60_000)
    after = int(first.get_attribute("data-value") or "0")
    assert after > before and after == len(ITEMS)
    assert page.evaluate("window.neverReloaded === true"), "the page was reloaded"
    assert "completed" in page.inner_text("#sweep-live [role=status]")
