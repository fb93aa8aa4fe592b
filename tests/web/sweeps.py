"""Sweeps for the sweep pages' tests, run for real through the API against simulated agent
endpoints on loopback: a priced one with a regressing arm, an unpriced arm and per-agent answers,
and a void one (a child run's version label altered in the database, as a read then finds);
and a slow one to follow or cancel while it runs."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import uuid4

import httpx
from sqlalchemy import text

from neens.demo.endpoints import PRICED_MODEL, UNPRICED_MODEL, Agent, serve
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.api.test_sweep_decisions import AGENTS, sweep_of
from tests.api.test_sweeps import ITEMS, RIGHT
from tests.support.preprod import auth, connection, golden_dataset

BIG = {"prompt_tokens": 20_000, "completion_tokens": 4_000}
SMALL = {"prompt_tokens": 1000, "completion_tokens": 200}
SIMULATED = {"requestFormat": "chat", "provider": "simulated"}


@dataclass(frozen=True)
class Sweeps:
    priced: str
    """Four arms: incumbent (dear), mini (cheap, clears), broken (regresses on two items),
    self-host (unpriced); gate min_pass_rate 0.5; connections of provider `simulated`."""
    arms: dict[str, str]
    """The priced sweep's arm ids by label."""
    void: str
    """Two arms; void."""


def _wrong_on_two(prompt: str) -> str:
    return "wrong" if prompt in ("question 1", "question 2") else RIGHT[prompt]


async def seed_sweeps(client: httpx.AsyncClient, key: CreatedKey, database_url: str) -> Sweeps:
    agents_ = (
        Agent(RIGHT, wire="chat", path="/inc", model="gpt-4o", usage=BIG, agent_name=AGENTS.get),
        Agent(RIGHT, wire="chat", path="/mini", model=PRICED_MODEL, usage=SMALL,
              agent_name=AGENTS.get),
        Agent(_wrong_on_two, wire="chat", path="/broken", model=PRICED_MODEL, usage=SMALL,
              agent_name=AGENTS.get),
        Agent(RIGHT, wire="chat", path="/self", model=UNPRICED_MODEL, usage=SMALL,
              agent_name=AGENTS.get),
        Agent(RIGHT, path="/a"),
        Agent(RIGHT, path="/b"),
    )  # fmt: skip
    with serve(*agents_) as agents:
        priced = await sweep_of(
            client,
            key,
            [
                ("incumbent", agents.url("/inc"), {**SIMULATED, "model": "gpt-4o"}),
                ("mini", agents.url("/mini"), {**SIMULATED, "model": PRICED_MODEL}),
                ("broken", agents.url("/broken"), {**SIMULATED, "model": PRICED_MODEL}),
                ("self-host", agents.url("/self"), {**SIMULATED, "model": UNPRICED_MODEL}),
            ],
            gate={"min_pass_rate": 0.5},
            name="Model selection",
        )
        void = await sweep_of(
            client,
            key,
            [("a", agents.url("/a"), {}), ("b", agents.url("/b"), {})],
            name="Altered afterwards",
        )
    db = Database(database_url)
    try:
        async with db.write() as s:
            await s.execute(
                text("UPDATE preprod_runs SET version_label = :v WHERE id = :id"),
                {"v": "something else", "id": void["arms"][1]["runIds"][0]},
            )
    finally:
        await db.dispose()
    r = await client.get(f"/model-sweeps/{void['id']}", headers=auth(key))
    assert r.json()["status"] == "void", r.text
    return Sweeps(
        priced=priced["id"], arms={a["label"]: a["id"] for a in priced["arms"]}, void=void["id"]
    )


async def enable_sharing(client: httpx.AsyncClient, key: CreatedKey, enabled: bool) -> None:
    r = await client.put("/share-links/settings", json={"enabled": enabled}, headers=auth(key))
    assert r.status_code == 200, r.text


async def slow_sweep(client: httpx.AsyncClient, key: CreatedKey, url: str) -> str:
    """A sweep of two arms, k=1, on the agent at `url` (each arm its own query string): as slow
    as that agent answers, so a test can watch it run or cancel it."""
    dataset_id, _ = await golden_dataset(client, key, ITEMS, name=f"slow-golden {uuid4().hex[:8]}")
    conns = [
        await connection(client, key, f"{url}?arm={n}", name=f"slow {n} {uuid4().hex[:8]}")
        for n in range(2)
    ]
    r = await client.post(
        "/model-sweeps",
        json={
            "name": "Followed live",
            "versionLabel": "live",
            "datasetId": dataset_id,
            "passK": 1,
            "arms": [{"label": f"arm {n}", "agentConnectionId": c} for n, c in enumerate(conns)],
        },
        headers=auth(key),
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])
