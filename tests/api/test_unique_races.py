"""Requests racing for one name, on both databases: exactly one wins, and every other gets the
409 a later request for a taken name gets (same code, message and field), never a 500 from the
database's unique constraint."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.api.test_failure_modes import annotate, new_mode, new_session
from tests.conftest import auth

RACERS = 12
JUDGE = {"type": "managed", "check": "regex", "config": {"pattern": r"order \d+"}}


async def race(
    send: Callable[[int], Awaitable[httpx.Response]], count: int = RACERS
) -> list[httpx.Response]:
    """`count` requests at once, each started before any has answered."""
    return list(await asyncio.gather(*(send(i) for i in range(count))))


def one_wins_the_rest_conflict(
    responses: list[httpx.Response], later: httpx.Response, won: int
) -> dict[str, Any]:
    """Exactly one `won`, every other answered exactly like `later` (a request for the name
    after the race: the sequential 409); returns the winner's body."""
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [won] + [409] * (len(responses) - 1), [r.text for r in responses]
    assert later.status_code == 409 and later.json()["error"]["field"] == "name", later.text
    assert later.json()["error"]["code"] == "conflict"
    for r in responses:
        if r.status_code == 409:
            assert r.json() == later.json()
    winner: dict[str, Any] = next(r for r in responses if r.status_code == won).json()
    return winner


async def test_creating_one_dataset_name_at_once_makes_one_dataset(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    def send(_: int) -> Awaitable[httpx.Response]:
        return client.post("/datasets", json={"name": "golden"}, headers=auth(admin_key))

    responses = await race(send)
    winner = one_wins_the_rest_conflict(responses, await send(0), 201)
    listed = (await client.get("/datasets", headers=auth(admin_key))).json()["datasets"]
    assert [d["id"] for d in listed] == [winner["id"]]


async def test_creating_one_judge_name_at_once_in_a_new_project_makes_one_judge(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    # The project has no judges yet: each request also creates its Primary Score.
    def send(_: int) -> Awaitable[httpx.Response]:
        return client.post(
            "/judges", json={"name": "has-order-id", **JUDGE}, headers=auth(admin_key)
        )

    responses = await race(send)
    winner = one_wins_the_rest_conflict(responses, await send(0), 201)
    listed = (await client.get("/judges", headers=auth(admin_key))).json()["judges"]
    assert [j["id"] for j in listed if j["name"] == "has-order-id"] == [winner["id"]]
    assert len([j for j in listed if j["isPrimary"]]) == 1


async def test_listing_judges_at_once_in_a_new_project_makes_one_primary_score(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    responses = await race(lambda _: client.get("/judges", headers=auth(admin_key)))
    assert [r.status_code for r in responses] == [200] * RACERS, [r.text for r in responses]
    listed = responses[0].json()["judges"]
    assert all(r.json()["judges"] == listed for r in responses)
    assert len([j for j in listed if j["isPrimary"]]) == 1


@pytest.mark.parametrize(
    ("path", "listed_as"),
    [("/agent-connections", "agentConnections"), ("/notification-sinks", "notificationSinks")],
)
async def test_creating_one_connection_or_sink_name_at_once_makes_one(
    client: httpx.AsyncClient, admin_key: CreatedKey, path: str, listed_as: str
) -> None:
    def send(i: int) -> Awaitable[httpx.Response]:
        body = {"name": "support", "url": f"http://127.0.0.1:9/agent{i}"}
        return client.post(path, json=body, headers=auth(admin_key))

    responses = await race(send)
    winner = one_wins_the_rest_conflict(responses, await send(0), 201)
    listed = (await client.get(path, headers=auth(admin_key))).json()
    assert [c["id"] for c in listed[listed_as]] == [winner["id"]]


async def test_renaming_connections_onto_one_name_at_once_renames_one(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    ids = []
    for i in range(RACERS):
        body = {"name": f"c{i}", "url": "http://127.0.0.1:9/agent"}
        r = await client.post("/agent-connections", json=body, headers=auth(admin_key))
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])

    def send(i: int) -> Awaitable[httpx.Response]:
        return client.patch(
            f"/agent-connections/{ids[i]}", json={"name": "support"}, headers=auth(admin_key)
        )

    responses = await race(send)
    loser = next(i for i, r in enumerate(responses) if r.status_code != 200)
    winner = one_wins_the_rest_conflict(responses, await send(loser), 200)
    listed = (await client.get("/agent-connections", headers=auth(admin_key))).json()
    names = sorted(c["name"] for c in listed["agentConnections"])
    assert names.count("support") == 1 and winner["name"] == "support"


async def test_building_one_stress_suite_name_at_once_makes_one_suite(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    refund = (await new_mode(client, admin_key, "wrong refund amount"))["id"]
    await new_session(client, admin_key, "s-1", "Refund order 9")
    assert (await annotate(client, admin_key, "s-1", refund)).status_code == 200

    def send(_: int) -> Awaitable[httpx.Response]:
        body = {"name": "Q3 incidents", "failureModeIds": [refund]}
        return client.post("/stress-test-suites", json=body, headers=auth(admin_key))

    responses = await race(send)
    winner = one_wins_the_rest_conflict(responses, await send(0), 201)
    listed = (await client.get("/datasets", headers=auth(admin_key))).json()["datasets"]
    assert [d["id"] for d in listed] == [winner["datasetId"]]


async def test_turning_sharing_on_at_once_in_a_new_project_answers_every_request(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    # The project has no sharing settings yet: each request would insert its row.
    responses = await race(
        lambda _: client.put(
            "/share-links/settings", json={"enabled": True}, headers=auth(admin_key)
        )
    )
    assert [r.status_code for r in responses] == [200] * RACERS, [r.text for r in responses]
    settings = await client.get("/share-links/settings", headers=auth(admin_key))
    assert settings.json() == {"enabled": True}
