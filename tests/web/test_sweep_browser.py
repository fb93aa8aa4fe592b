"""The sweep pages in headless chromium: a void sweep's banner with no chart and no ranking, the
frontier on a comparable one, Share hidden while sharing is off, the public share page redacted,
an arm updating live, nothing wider than 1280 px. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neens.demo.endpoints import Agent, serve
from tests.api.test_sweeps import ITEMS, RIGHT
from tests.web.conftest import (
    WIDTH,
    Site,
    no_sideways_scroll,
    reaches_every_control_visibly,
    sharing,
    tab_walk,
    with_client,
)
from tests.web.sweeps import Sweeps, slow_sweep

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("web-sweep-browser")]


@pytest.fixture
def sweeps(sqlite_sweeps: Sweeps) -> Sweeps:
    """The browser runs against the SQLite site: its sweeps."""
    return sqlite_sweeps


def test_a_sweep_its_comparison_frontier_and_drill_down_render_within_1280_px(
    tab: Any, sqlite_site: Site, sweeps: Sweeps, screenshots: Path
) -> None:
    url = sqlite_site.url
    tab.goto(f"{url}/ui/sweeps")
    assert "Model selection" in tab.inner_text("main")
    no_sideways_scroll(tab)
    tab.screenshot(path=str(screenshots / "sweeps.png"))

    tab.click("text=Model selection")
    assert "simulated" in tab.inner_text("table.arms")
    no_sideways_scroll(tab)
    tab.screenshot(path=str(screenshots / "sweep.png"), full_page=True)

    tab.click("text=Compare arms")
    tab.wait_for_url("**/compare")
    main = tab.inner_text("main")
    assert "bar 50% — from the sweep's pinned gate" in main
    assert "Unattributed" in main and "unpriced" in main
    chart = tab.locator("section.frontier img")
    assert chart.count() == 1 and "cost per case" in (chart.get_attribute("alt") or "")
    assert tab.evaluate("document.querySelector('section.frontier img').naturalWidth") > 0, (
        "the chart loads under the page's policy"
    )
    assert "Unpriced — not plotted" in tab.inner_text("section.frontier")
    assert tab.locator("button", has_text="Share (redacted)").count() == 0, "hidden while off"
    no_sideways_scroll(tab)
    tab.screenshot(path=str(screenshots / "sweep-compare.png"), full_page=True)

    # The Baseline arm control re-renders the comparison against another arm.
    tab.select_option("#baselineArm", sweeps.arms["mini"])
    tab.click("button:has-text('Show')")
    tab.wait_for_url(f"**baselineArm={sweeps.arms['mini']}**")
    assert "measured against mini" in tab.inner_text("section.verdict-box")

    tab.goto(f"{url}/ui/sweeps/{sweeps.priced}/compare")
    tab.click(f"a[href*='/arms/{sweeps.arms['broken']}/regressions']")
    tab.wait_for_url("**/regressions")
    assert "Where broken breaks" in tab.inner_text("main")
    assert "question 1" in tab.inner_text("main")
    no_sideways_scroll(tab)
    tab.screenshot(path=str(screenshots / "sweep-regressions.png"), full_page=True)


def test_a_void_sweep_shows_its_banner_and_no_chart_or_ranking(
    tab: Any, sqlite_site: Site, sweeps: Sweeps, screenshots: Path
) -> None:
    tab.goto(f"{sqlite_site.url}/ui/sweeps/{sweeps.void}")
    banner = tab.locator(".void-banner")
    assert banner.is_visible() and "void" in banner.inner_text()
    assert "Diverged: b" in banner.inner_text()
    assert tab.locator("a", has_text="Compare arms").count() == 0
    tab.screenshot(path=str(screenshots / "sweep-void.png"), full_page=True)
    tab.goto(f"{sqlite_site.url}/ui/sweeps/{sweeps.void}/compare")
    assert tab.locator(".void-banner").is_visible()
    assert tab.locator("img").count() == 0 and tab.locator("section.frontier").count() == 0
    assert tab.locator("[data-field=rank]").count() == 0
    assert "Leaderboard" not in tab.inner_text("main")
    no_sideways_scroll(tab)


def test_share_makes_a_link_whose_page_is_redacted(
    tab: Any, browser: Any, sqlite_site: Site, sweeps: Sweeps, screenshots: Path
) -> None:
    sharing(sqlite_site, True)
    try:
        tab.goto(f"{sqlite_site.url}/ui/sweeps/{sweeps.priced}/compare")
        tab.click("button:has-text('Share (redacted)')")
        link = tab.input_value("#share-url")
        tab.screenshot(path=str(screenshots / "sweep-share-made.png"))
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


def test_a_running_sweeps_arms_update_without_a_reload(
    tab: Any, sqlite_site: Site, screenshots: Path
) -> None:
    agent = Agent(RIGHT, latency_s=0.6)
    with serve(agent) as server:
        url = server.url(agent.path)
        sweep_id = with_client(sqlite_site.url, lambda c: slow_sweep(c, sqlite_site.admin, url))
        tab.goto(f"{sqlite_site.url}/ui/sweeps/{sweep_id}")
        live = tab.locator("#sweep-live")
        assert live.get_attribute("data-terminal") == "false"
        first = tab.locator("#sweep-live [data-field='progress.itemsDone']").first
        before = int(first.get_attribute("data-value") or "0")
        # Keyboard focus on a run link inside the part that is swapped stays on that link.
        run_link = tab.locator("#sweep-live a[href^='/ui/preprod-evals/']").first
        href = run_link.get_attribute("href")
        run_link.focus()
        tab.screenshot(path=str(screenshots / "sweep-live.png"))
        tab.evaluate("window.neverReloaded = true")
        tab.locator("#sweep-live[data-terminal=true]").wait_for(timeout=60_000)
    after = int(first.get_attribute("data-value") or "0")
    assert after > before and after == len(ITEMS)
    assert tab.evaluate("window.neverReloaded === true"), "the page was reloaded"
    assert "completed" in tab.inner_text("#sweep-live [role=status]")
    assert tab.evaluate("document.activeElement.getAttribute('href')") == href


def test_the_sweep_pages_are_walked_with_tab_alone(
    tab: Any, sqlite_site: Site, sweeps: Sweeps
) -> None:
    """Every control of a sweep and of Compare arms (Share shown) is reached with Tab, shows its
    focus, and comes in reading order: the page's own controls before the footer."""
    sharing(sqlite_site, True)
    try:
        tab.goto(f"{sqlite_site.url}/ui/sweeps/{sweeps.priced}")
        stops, controls = tab_walk(tab)
        reaches_every_control_visibly(stops, controls)
        seen = [str(stop) for stop in stops]
        assert seen[0] == "a||Skip to content"
        assert "a||Compare arms" in seen
        assert sum(s.startswith("a||") and s[3:].isdigit() for s in seen) == 4 * 3, (
            "each arm's three run links"
        )

        tab.goto(f"{sqlite_site.url}/ui/sweeps/{sweeps.priced}/compare")
        stops, controls = tab_walk(tab)
        reaches_every_control_visibly(stops, controls)
        seen = [str(stop) for stop in stops]
        assert seen[0] == "a||Skip to content"
        order = [
            next(n for n, s in enumerate(seen) if s.startswith(start))
            for start in ("button||Sign out", "button||Share (redacted)", "select|baselineArm|",
                          "input|bar|", "button||Show")
        ]  # fmt: skip
        assert order == sorted(order), seen
        regression_links = [n for n, stop in enumerate(stops) if stop.href.endswith("/regressions")]
        assert regression_links and min(regression_links) > order[-1], seen
        assert not any(stop.in_footer for stop in stops[: order[-1] + 1])
        # The Baseline arm control works from the keyboard too.
        tab.focus("#baselineArm")
        tab.keyboard.press("ArrowDown")
        tab.keyboard.press("Tab")
        tab.keyboard.press("Tab")
        tab.keyboard.press("Enter")
        tab.wait_for_url("**baselineArm=**")
        assert "measured against incumbent" in tab.inner_text("section.verdict-box")
    finally:
        sharing(sqlite_site, False)


def test_cancel_sweep_from_its_page(tab: Any, sqlite_site: Site) -> None:
    agent = Agent(RIGHT, latency_s=2.0)
    with serve(agent) as server:
        url = server.url(agent.path)
        sweep_id = with_client(sqlite_site.url, lambda c: slow_sweep(c, sqlite_site.admin, url))
        tab.goto(f"{sqlite_site.url}/ui/sweeps/{sweep_id}")
        assert "running" in tab.inner_text("#sweep-live [role=status]")
        tab.click("button:has-text('Cancel sweep')")
        tab.wait_for_url(f"**/ui/sweeps/{sweep_id}")
        status = tab.inner_text("#sweep-live [role=status]")
        assert "cancelled" in status, status
        assert tab.inner_text("#sweep-live [data-field=reason]") == "cancelled by request"
        assert tab.locator("button", has_text="Cancel sweep").count() == 0
        assert tab.locator("#sweep-live").get_attribute("data-terminal") == "true"
