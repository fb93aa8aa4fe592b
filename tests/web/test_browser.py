"""The pages in a real browser (headless chromium): signing in, every page with real data, no
page wider than 1280 px, keyboard focus reaching the controls, a run followed live, and markup
in stored text never running. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from neens.demo.endpoints import Agent, serve
from tests.support.preprod import auth, connection
from tests.web.conftest import Site, run_async
from tests.web.scenario import GOOD, MARKUP, Planted, plant_markup

pytestmark = pytest.mark.e2e

WIDTH = 1280


@pytest.fixture
def page(browser: Any, sqlite_site: Site) -> Iterator[Any]:
    """A fresh browser context at 1280 px, signed in with the site's admin key."""
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    dialogs: list[str] = []
    tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    tab.goto(f"{sqlite_site.url}/ui/sign-in")
    tab.fill("#key", sqlite_site.admin.key)
    tab.click("button[type=submit]")
    tab.wait_for_url("**/ui/preprod-evals")
    try:
        yield tab
    finally:
        assert dialogs == [], f"a page ran a script from stored text: {dialogs}"
        context.close()


def no_sideways_scroll(tab: Any) -> None:
    width = tab.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{tab.url} is {width}px wide at a {WIDTH}px window"


def test_sign_in_with_a_key_returns_to_the_page_asked_for(
    browser: Any, sqlite_site: Site, screenshots: Path
) -> None:
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    tab = context.new_page()
    try:
        tab.goto(f"{sqlite_site.url}/ui/datasets")
        assert "/ui/sign-in?next=%2Fui%2Fdatasets" in tab.url
        tab.screenshot(path=str(screenshots / "sign-in.png"))
        tab.fill("#key", "nk_live_not-a-key")
        tab.click("button[type=submit]")
        assert "unknown or revoked" in tab.inner_text("[role=alert]")
        tab.fill("#key", sqlite_site.ingest.key)
        tab.click("button[type=submit]")
        tab.wait_for_url("**/ui/datasets")
        assert "ingest key" in tab.inner_text("header")
        tab.click("text=Sign out")
        tab.wait_for_url("**/ui/sign-in")
        tab.goto(f"{sqlite_site.url}/ui/datasets")
        assert "/ui/sign-in" in tab.url
    finally:
        context.close()


def pages_of(site: Site) -> list[tuple[str, str, str]]:
    """(screenshot name, path, text the page must show) for every page."""
    sc = site.scenario
    return [
        ("preprod-evals", "/ui/preprod-evals", "v1.5.0-rc1"),
        ("preprod-run", f"/ui/preprod-evals/{sc.worse_run}", "completed with regressions"),
        ("preprod-run-errors", f"/ui/preprod-evals/{sc.flaky_run}", "errored"),
        ("preprod-run-runner", f"/ui/preprod-evals/{sc.runner_v1}", "Model not recorded"),
        ("preprod-new", "/ui/preprod-evals/new", "Version label"),
        (
            "compare",
            f"/ui/compare?runs={sc.good_run}&runs={sc.worse_run}&runs={sc.flaky_run}"
            f"&baseline={sc.good_run}",
            "Prompt by prompt",
        ),
        (
            "compare-trajectory",
            f"/ui/compare/trajectory?run={sc.runner_v2}&baseline={sc.runner_v1}"
            f"&item={sc.item_ids[0]}",
            "lookup_order",
        ),
        ("datasets", "/ui/datasets", "golden v2"),
        ("dataset", f"/ui/datasets/{sc.dataset_id}", "Make v1 golden"),
        (
            "dataset-items",
            f"/ui/datasets/{sc.dataset_id}/versions/{sc.version_id}",
            "Where is order 17?",
        ),
        ("sessions", "/ui/sessions", "support-session-1"),
        ("session", f"/ui/sessions/{sc.session_id}", "lookup_order"),
        ("insights", "/ui/insights", "regression"),
    ]


def test_every_page_renders_its_data_within_1280_px(
    page: Any, sqlite_site: Site, screenshots: Path
) -> None:
    for name, path, text in pages_of(sqlite_site):
        page.goto(sqlite_site.url + path)
        assert text in page.inner_text("main"), f"{path} does not show {text!r}"
        no_sideways_scroll(page)
        page.screenshot(path=str(screenshots / f"{name}.png"))


def test_expanded_rows_show_the_answer_beside_the_expected_output(
    page: Any, sqlite_site: Site, screenshots: Path
) -> None:
    sc = sqlite_site.scenario
    page.goto(f"{sqlite_site.url}/ui/preprod-evals/{sc.worse_run}")
    row = page.locator("tr", has_text="Can I return shoes?")
    row.locator("summary").click()
    assert "Returns are never accepted." in row.inner_text()
    assert "Yes, within 30 days." in row.inner_text()
    no_sideways_scroll(page)
    row.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "preprod-run-expanded.png"))

    page.goto(
        f"{sqlite_site.url}/ui/compare?runs={sc.good_run}&runs={sc.flaky_run}"
        f"&baseline={sc.good_run}"
    )
    for summary in page.locator("table.grid summary").all():
        summary.click()
    assert "no output captured" in page.inner_text("table.grid")
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / "compare-expanded.png"), full_page=True)

    page.goto(f"{sqlite_site.url}/ui/sessions/{sc.session_id}")
    for summary in page.locator("table.spans td.tree > details > summary").all():
        summary.click()
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / "session-expanded.png"), full_page=True)


def focus_walk(tab: Any, presses: int) -> list[str]:
    """What keyboard focus lands on, Tab after Tab: tag, name or id, and text."""
    seen = []
    for _ in range(presses):
        tab.keyboard.press("Tab")
        seen.append(
            tab.evaluate(
                """() => { const e = document.activeElement;
                   return [e.tagName.toLowerCase(), e.name || e.id || '',
                           (e.innerText || e.value || '').trim().slice(0, 40)].join('|'); }"""
            )
        )
    return seen


def test_keyboard_focus_reaches_the_controls(page: Any, sqlite_site: Site) -> None:
    sc = sqlite_site.scenario
    page.goto(f"{sqlite_site.url}/ui/preprod-evals/{sc.worse_run}")
    seen = focus_walk(page, 40)
    assert seen[0].startswith("a||Skip to content")
    for label in ("Pre-prod Evals", "Compare Versions", "Datasets", "Sessions", "Insights"):
        assert any(s.startswith("a||") and s.endswith(label) for s in seen), (label, seen)
    assert any(s.startswith("button||Sign out") for s in seen)
    assert any(s.startswith("summary|") for s in seen), seen
    page.evaluate("document.activeElement.blur()")
    page.focus("table.run-items summary")
    page.keyboard.press("Enter")
    assert page.evaluate("document.querySelector('table.run-items details').open")

    page.goto(f"{sqlite_site.url}/ui/preprod-evals/new")
    assert page.evaluate("document.activeElement.id") == "version_label"
    seen = focus_walk(page, 30)
    for control in ("name", "dataset", "runner_mode", "agent_connection_id", "judge", "baseline"):
        assert any(s.split("|")[1] == control for s in seen), (control, seen)
    for control in ("max_regressions", "min_pass_rate", "max_avg_usd", "max_delta_pct"):
        assert any(s.split("|")[1] == control for s in seen), (control, seen)
    assert any(s.startswith("button||Start run") for s in seen)


async def _start_slow_run(site: Site, url: str) -> str:
    async with httpx.AsyncClient(base_url=site.url, timeout=30) as client:
        conn = await connection(client, site.admin, url, name="slow agent", model="slow-model")
        r = await client.post(
            "/preprod-evals",
            json={
                "dataset_id": site.scenario.dataset_id,
                "version_label": "live-follow",
                "runner_mode": "push",
                "agent_connection_id": conn,
            },
            headers=auth(site.admin),
        )
        assert r.status_code == 201, r.text
        return str(r.json()["id"])


def test_a_running_run_updates_on_its_page_without_a_reload(
    page: Any, sqlite_site: Site, screenshots: Path
) -> None:
    agent = Agent(GOOD, latency_s=3.0)
    with serve(agent) as server:
        run_id = run_async(_start_slow_run(sqlite_site, server.url(agent.path)))
        page.goto(f"{sqlite_site.url}/ui/preprod-evals/{run_id}")
        status = page.locator("#run-live [role=status]")
        assert "completed" not in status.inner_text()
        assert page.locator("#run-live").get_attribute("data-terminal") == "false"
        page.screenshot(path=str(screenshots / "preprod-run-live.png"))
        page.evaluate("window.neverReloaded = true")
        page.locator("#run-live[data-terminal=true]").wait_for(timeout=30_000)
    assert "completed" in status.inner_text()
    assert page.evaluate("window.neverReloaded === true"), "the page was reloaded"
    assert page.locator("button", has_text="Cancel run").count() == 1  # outside the live part
    no_sideways_scroll(page)


async def _plant(site: Site) -> Planted:
    async with httpx.AsyncClient(base_url=site.url, timeout=30) as client:
        return await plant_markup(client, site.admin)


def test_stored_markup_shows_as_text_and_never_runs(page: Any, sqlite_site: Site) -> None:
    planted = run_async(_plant(sqlite_site))
    for path in (
        "/ui/datasets",
        f"/ui/datasets/{planted.dataset_id}/versions/{planted.version_id}",
        f"/ui/preprod-evals/{planted.run_id}",
        "/ui/preprod-evals",
        f"/ui/compare?runs={planted.run_id}",
        f"/ui/sessions/{planted.session_id}",
        "/ui/sessions",
        "/ui/preprod-evals/new",
    ):
        page.goto(sqlite_site.url + path)
        for summary in page.locator("main summary").all()[:20]:
            summary.click()
        assert MARKUP in page.inner_text("main") or path.endswith("/new"), path
        assert page.locator("main img").count() == 0, path
    # the `page` fixture fails the test if any alert() ran
