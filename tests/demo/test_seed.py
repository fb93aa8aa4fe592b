"""Seeding the worked example into a live server on each database: the story holds on SQLite and
on PostgreSQL, and a seeding that cannot finish says why instead of showing a story."""

from __future__ import annotations

import asyncio

import pytest

from neens.demo import catalog, story
from neens.demo.endpoints import refused_url, serve
from neens.demo.seed import Endpoints, SeedError, seed
from neens.demo.simulated import endpoints
from neens.store.db import Database
from neens.store.keys import create_key
from tests.support.live import LiveServer

pytestmark = pytest.mark.alone  # seeds a whole sweep against timed endpoints: run alone (Makefile)


class Steps:
    def __init__(self) -> None:
        self.steps: list[str] = []
        self.sweep_seen: list[tuple[int, int]] = []

    def step(self, text: str) -> None:
        self.steps.append(text)

    def sweep(self, done: int, total: int, detail: str) -> None:
        self.sweep_seen.append((done, total))


def keys(database_url: str) -> tuple[str, str]:
    async def make() -> tuple[str, str]:
        db = Database(database_url)
        try:
            admin = await create_key(db, company="Acme", project="Support agent", role="admin")
            ingest = await create_key(db, company="Acme", project="Support agent", role="ingest")
        finally:
            await db.dispose()
        return admin.key, ingest.key

    return asyncio.run(make())


def test_the_seeded_sweep_tells_the_predicted_story(
    live_server: LiveServer, database_url: str
) -> None:
    admin, ingest = keys(database_url)
    models, agent, judge = endpoints()
    steps = Steps()
    with serve(*models, agent, judge) as server:
        where = Endpoints(
            base_url=server.base_url,
            models={e.model.label: e.url for e in models},
            agent=agent.url,
            judge_base_url=judge.base_url,
        )
        seeded = seed(
            live_server.url, admin_key=admin, ingest_key=ingest, endpoints=where, progress=steps
        )
    assert story.differences(seeded.comparison) == []
    assert seeded.sweep["status"] == "completed"
    runs = seeded.preprod_runs
    assert seeded.run_statuses == {
        runs["v41"]: "completed",
        runs["v42"]: "completed_with_regressions",
    }
    # Each model's endpoint answered its k runs of every item once; the agent both runs.
    items = len(catalog.ITEMS)
    assert [m.call_count for m in models] == [catalog.PASS_K * items] * len(models)
    assert agent.call_count == 2 * items
    # Two rubrics per answer (sweep and runs), one per production session.
    assert judge.call_count == 2 * (len(models) * catalog.PASS_K + 2) * items + 35
    assert seeded.estimate["partial"] is True and seeded.estimate["wouldRefuse"] is False
    assert steps.sweep_seen[-1] == (540, 540)
    assert len(steps.steps) == 7


@pytest.mark.parametrize("dialect", ["sqlite"], indirect=True)
def test_seeding_that_cannot_finish_fails_with_the_reason(
    live_server: LiveServer, database_url: str
) -> None:
    admin, ingest = keys(database_url)
    models, agent, judge = endpoints()
    with serve(judge):
        dead = Endpoints(
            base_url="",
            models={m.model.label: refused_url(f"/models/{m.model.model}") for m in models},
            agent=refused_url("/agents/support-agent"),
            judge_base_url=judge.base_url,
        )
        with pytest.raises(SeedError) as raised:
            seed(
                live_server.url, admin_key=admin, ingest_key=ingest, endpoints=dead,
                progress=Steps(), timeout_s=120,
            )  # fmt: skip
    message = str(raised.value)
    assert message.startswith("the pre-prod run of v41 ended failed: "), message
    assert "could not reach http://127.0.0.1:" in message
