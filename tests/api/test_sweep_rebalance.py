"""A sweep hands the calls of an arm that is done to the arms still running: a dead arm does not
leave its share of the concurrency idle. Real agent servers on loopback, the real worker, both
databases."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from sqlalchemy import select

from neens.demo.endpoints import Agent, Call, Reply, refused_url, serve
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import PreprodRun, SweepArm
from tests.api.test_sweeps import RIGHT, arm, create_sweep, wait_for_sweep
from tests.support.preprod import connection, golden_dataset

LATENCY_S = 0.3
MANY = [{"input": f"question {n}", "expected_output": f"answer {n}"} for n in range(16)]
ANSWERS = {item["input"]: item["expected_output"] for item in MANY} | RIGHT


class Timed(Agent):
    """An agent that notes when each call arrived: with a fixed latency, the calls that arrived
    within one latency of each other were in flight together."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.arrivals: list[float] = []

    def respond(self, call: Call) -> Reply:
        self.arrivals.append(time.monotonic())
        return super().respond(call)

    def most_in_flight(self) -> int:
        times = sorted(self.arrivals)
        return max(
            (sum(1 for t in times if start <= t < start + self.latency_s * 0.9) for start in times),
            default=0,
        )


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Four calls in flight for the whole sweep: two per arm while both run."""
    return Settings(
        database_url=database_url, migrate_on_start=False, push_timeout_s=3.0, push_concurrency=4
    )


async def test_a_dead_arms_share_goes_to_the_arm_still_running(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    live = Timed(ANSWERS, path="/live", latency_s=LATENCY_S)
    with serve(live) as agents:
        tag = uuid.uuid4().hex[:8]
        dataset_id, _ = await golden_dataset(client, admin_key, MANY, name=f"golden-{tag}")
        dead = await connection(client, admin_key, refused_url("/dead"), name=f"dead-{tag}")
        alive = await connection(client, admin_key, agents.url("/live"), name=f"live-{tag}")
        sweep = await create_sweep(
            client,
            admin_key,
            datasetId=dataset_id,
            passK=1,
            arms=[
                {"label": "live", "agentConnectionId": alive},
                {"label": "dead", "agentConnectionId": dead},
            ],
        )
        done = await wait_for_sweep(client, admin_key, sweep["id"])
    assert arm(done, "dead")["status"] == "failed"
    assert arm(done, "live")["passed"] is True
    async with db.read() as s:
        shares = {
            row.label: row.concurrency
            for row in await s.scalars(select(SweepArm).where(SweepArm.sweep_id == sweep["id"]))
        }
        (run_id,) = arm(done, "live")["runIds"]
        run_share = await s.scalar(
            select(PreprodRun.push_concurrency).where(PreprodRun.id == run_id)
        )
    assert shares == {"live": 4, "dead": 0}, "the total stays 4: the dead arm's 2 went to live"
    assert run_share == 4
    # The live arm started with 2 calls in flight; its push job took the new share mid-run.
    most = live.most_in_flight()
    assert 3 <= most <= 4, f"at most the sweep's 4 in flight, and more than the first 2: {most}"
    assert live.call_count == len(MANY)


async def test_an_arm_that_finishes_its_k_runs_first_hands_its_share_over_and_no_more(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    """A fast arm runs its two runs at its own share of 2 while the slow arm runs (never more:
    the total is 4); once it is done, the slow arm goes on with all 4."""
    fast = Timed(ANSWERS, path="/fast", latency_s=0.05)
    slow = Timed(ANSWERS, path="/slow", latency_s=LATENCY_S)
    with serve(fast, slow) as agents:
        tag = uuid.uuid4().hex[:8]
        dataset_id, _ = await golden_dataset(client, admin_key, MANY, name=f"golden-{tag}")
        a = await connection(client, admin_key, agents.url("/fast"), name=f"fast-{tag}")
        b = await connection(client, admin_key, agents.url("/slow"), name=f"slow-{tag}")
        sweep = await create_sweep(
            client,
            admin_key,
            datasetId=dataset_id,
            passK=2,
            arms=[
                {"label": "fast", "agentConnectionId": a},
                {"label": "slow", "agentConnectionId": b},
            ],
        )
        done = await wait_for_sweep(client, admin_key, sweep["id"])
    assert done["status"] == "completed"
    assert fast.most_in_flight() <= 2, "its share while the other arm runs"
    assert 3 <= slow.most_in_flight() <= 4
    async with db.read() as s:
        shares = {
            row.label: row.concurrency
            for row in await s.scalars(select(SweepArm).where(SweepArm.sweep_id == sweep["id"]))
        }
    assert shares == {"fast": 0, "slow": 4}
