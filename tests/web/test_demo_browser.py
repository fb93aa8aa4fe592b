"""The worked example in headless chromium: the demo seeded once into a server on loopback by the
function `neens demo` uses (`neens.demo.seed.seed`, against the simulated endpoints), then walked
as its printed instructions say — open Compare arms, sign in with the admin key — through the
sweeps list, the sweep, Compare arms, the frontier chart and where an arm breaks. What each page
must show is read from the story the catalog predicts (`neens.demo.story.predicted`), never
from a run, so the test fails when the pages tell another story than the docs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from neens.api.app import create_app
from neens.demo import catalog, story
from neens.demo.endpoints import serve
from neens.demo.seed import Endpoints, Seeded, seed
from neens.demo.simulated import endpoints
from neens.domain.decision_types import SweepComparison
from neens.web import formats
from tests.support.live import serve_in_thread
from tests.web.conftest import (
    chromium,
    fresh_database,
    make_key,
    no_sideways_scroll,
    signed_in_tab,
    site_settings,
)

# Seeds a whole sweep against timed endpoints, as tests/demo/test_seed.py: run alone. In CI
# (`make test`) it runs with the other `alone` tests, with the browser required.
pytestmark = [pytest.mark.e2e, pytest.mark.alone]


class Quiet:
    """Seeding's progress, dropped."""

    def step(self, text: str) -> None:
        pass

    def sweep(self, done: int, total: int, detail: str) -> None:
        pass


@dataclass(frozen=True)
class Demo:
    url: str
    admin_key: str
    seeded: Seeded


@pytest.fixture(scope="module")
def demo(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Demo]:
    """The worked example on a server of its own (SQLite), seeded once for the module."""
    tmp = tmp_path_factory.mktemp("demo")
    with fresh_database("sqlite", request, tmp) as database_url:
        settings = site_settings(database_url, tmp / "home")
        with serve_in_thread(create_app(settings)) as live:
            admin = make_key(database_url, "admin", project=catalog.PROJECT)
            ingest = make_key(database_url, "ingest", project=catalog.PROJECT)
            models, agent, judge = endpoints()
            with serve(*models, agent, judge) as server:
                where = Endpoints(
                    base_url=server.base_url,
                    models={e.model.label: e.url for e in models},
                    agent=agent.url,
                    judge_base_url=judge.base_url,
                )
                seeded = seed(
                    live.url,
                    admin_key=admin.key,
                    ingest_key=ingest.key,
                    endpoints=where,
                    progress=Quiet(),
                )
            assert story.differences(seeded.comparison) == [], "the seeded demo tells its story"
            yield Demo(live.url, admin.key, seeded)


@pytest.fixture(scope="module")
def expected() -> SweepComparison:
    """The comparison the catalog predicts, arm ids being the arm labels."""
    return story.predicted()


@pytest.fixture(scope="module")
def demo_browser(demo: Demo) -> Iterator[Any]:
    with chromium() as browser:
        yield browser


def board_order(comparison: SweepComparison) -> list[str]:
    """The leaderboard as the page lists it: ranked arms first, then the rest in arm order."""
    ranked = list(comparison.leaderboard)
    return ranked + [arm.label for arm in comparison.arms if arm.label not in ranked]


def cell_text(row: Any, field: str) -> str:
    return " ".join(row.locator(f"[data-field='{field}']").first.inner_text().split())


def test_the_worked_example_reads_as_its_story_in_the_browser(
    demo: Demo, demo_browser: Any, expected: SweepComparison, screenshots: Path
) -> None:
    sweep_id = demo.seeded.sweep_id
    arms_by_label = {arm.label: arm for arm in expected.arms}
    ids = {arm["label"]: arm["id"] for arm in demo.seeded.sweep["arms"]}
    # As printed: open Compare arms, sign in with the admin key, land on it.
    compare = f"/ui/sweeps/{sweep_id}/compare"
    with signed_in_tab(demo_browser, demo.url, demo.admin_key, then=compare) as tab:
        assert "Compare arms" in tab.inner_text("h1")

        tab.goto(f"{demo.url}/ui/sweeps")
        listed = tab.locator(f"tr[data-sweep='{sweep_id}']")
        assert catalog.SWEEP in listed.inner_text()
        assert "completed" in cell_text(listed, "status")
        no_sideways_scroll(tab)

        listed.locator("a", has_text=catalog.SWEEP).click()
        tab.wait_for_url(f"**/ui/sweeps/{sweep_id}")
        rows = tab.locator("table.arms tbody tr")
        assert [r.get_attribute("data-arm") for r in rows.all()] == [
            ids[model.label] for model in catalog.MODELS
        ]
        for row, model in zip(rows.all(), catalog.MODELS, strict=True):
            text = " ".join(row.inner_text().split())
            assert text.startswith(model.label) and model.model in text
            assert "simulated" in text, f"{model.label} is labelled simulated"
            assert "completed" in cell_text(row, "status")
            passed = row.locator("[data-field=passed]").get_attribute("data-value")
            assert passed == ("true" if arms_by_label[model.label].passed else "false")
        no_sideways_scroll(tab)

        tab.click("a:has-text('Compare arms')")
        tab.wait_for_url(f"**{compare}")
        check_compare_arms(tab, expected, ids)
        no_sideways_scroll(tab)
        tab.screenshot(path=str(screenshots / "demo-compare.png"), full_page=True)

        chart = tab.locator("section.frontier img")
        chart.scroll_into_view_if_needed()
        assert tab.evaluate("document.querySelector('section.frontier img').naturalWidth") > 0
        assert tab.evaluate("document.querySelector('section.frontier img').complete")

        check_drill_down(tab, expected, ids, screenshots)


def check_compare_arms(tab: Any, expected: SweepComparison, ids: dict[str, str]) -> None:
    verdict = tab.locator("section.verdict-box")
    assert " ".join(verdict.locator(".verdict-sentence").inner_text().split()) == " ".join(
        expected.verdict.sentence.split()
    )
    assert f"bar {formats.percent_short(expected.bar.value)}" in verdict.inner_text()
    assert "from the sweep's pinned gate" in verdict.inner_text()
    assert f"measured against {catalog.MODELS[0].label}" in verdict.inner_text()

    board = tab.locator("table.board tbody tr")
    labels = {arm_id: label for label, arm_id in ids.items()}
    shown = [labels[row.get_attribute("data-arm")] for row in board.all()]
    assert shown == board_order(expected), "all six arms, in the API's order"
    for arm in expected.arms:
        row = tab.locator(f"table.board tbody tr[data-arm='{ids[arm.label]}']")
        cost = " ".join(row.locator("[data-field=costPerCaseUsd]").inner_text().split())
        if arm.cost_per_case_usd is None:
            assert cost == "unpriced", (arm.label, cost)
        else:
            assert cost == formats.usd(arm.cost_per_case_usd), (arm.label, cost)
        rank = row.locator("[data-field=rank]").get_attribute("data-value")
        assert rank == ("null" if arm.rank is None else str(arm.rank)), arm.label
        if not arm.is_baseline:
            count = row.locator("[data-field=regressions]")
            assert count.get_attribute("data-value") == str(arm.regressions), arm.label

    blocks = tab.locator("section[aria-labelledby=agents-h] .agent-block")
    assert [b.get_attribute("data-agent") for b in blocks.all()] == [
        agent.label for agent in expected.agents
    ]
    has_unattributed = any(agent.agent_name is None for agent in expected.agents)
    assert (tab.locator(".agent-block[data-agent='Unattributed']").count() == 1) is (
        has_unattributed
    )
    for block, agent in zip(blocks.all(), expected.agents, strict=True):
        sentence = block.locator("p[data-field='verdict.sentence']").inner_text()
        assert " ".join(sentence.split()) == " ".join(agent.verdict.sentence.split())

    unpriced = [arm.label for arm in expected.arms if arm.cost_per_case_usd is None]
    frontier = tab.inner_text("section.frontier")
    assert "Unpriced — not plotted" in frontier
    assert all(label in frontier for label in unpriced)


def check_drill_down(
    tab: Any, expected: SweepComparison, ids: dict[str, str], screenshots: Path
) -> None:
    """From the regression count of the first arm that breaks, to where it breaks: the items
    the incumbent passed on every run and this arm did not."""
    arm = next(a for a in expected.arms if a.regressions)
    model = catalog.BY_LABEL[arm.label]
    row = tab.locator(f"table.board tbody tr[data-arm='{ids[arm.label]}']")
    row.locator("a[data-field=regressions]").click()
    tab.wait_for_url("**/regressions")
    main = tab.inner_text("main")
    assert f"Where {arm.label} breaks" in main
    items = tab.locator("[data-item]")
    assert len({i.get_attribute("data-item") for i in items.all()}) == arm.regressions

    def always_passes(on: catalog.Model, item: catalog.Item) -> bool:
        return all(
            catalog.passes(item, catalog.answer(on, item, run)) for run in range(catalog.PASS_K)
        )

    broken = [
        item
        for item in catalog.ITEMS
        if always_passes(catalog.MODELS[0], item) and not always_passes(model, item)
    ]
    assert len(broken) == arm.regressions
    for item in broken:
        assert item.prompt in main, item.key
    no_sideways_scroll(tab)
    tab.screenshot(path=str(screenshots / "demo-regressions.png"), full_page=True)
