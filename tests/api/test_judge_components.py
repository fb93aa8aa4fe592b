"""A composite's components over HTTP: weights of any size, and the same rules for its
components whether the composite is created or changed, and for disabling a component."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from neens.demo.endpoints import agent_suite, serve
from neens.store.keys import CreatedKey
from tests.support.preprod import auth, golden_dataset, items_of, push_through

ITEMS = [{"input": "Where is order 17?", "expected_output": "Order 17 shipped on 3 June."}]
RIGHT = {ITEMS[0]["input"]: ITEMS[0]["expected_output"]}


async def _create(client: httpx.AsyncClient, key: CreatedKey, body: dict[str, Any]) -> str:
    r = await client.post("/judges", json=body, headers=auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _managed(
    client: httpx.AsyncClient, key: CreatedKey, name: str, value: str, *, enabled: bool = True
) -> str:
    body = {
        "name": name,
        "type": "managed",
        "check": "contains",
        "config": {"value": value},
        "enabled": enabled,
    }
    return await _create(client, key, body)


async def _composite(
    client: httpx.AsyncClient, key: CreatedKey, name: str, *ids: str, enabled: bool = True
) -> str:
    components = [{"judgeId": judge_id} for judge_id in ids]
    body = {"name": name, "type": "composite", "components": components, "enabled": enabled}
    return await _create(client, key, body)


async def test_a_composite_with_huge_weights_scores_a_run(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    """Weights near the largest float used to overflow the weighted sum on every item."""
    shipped = await _managed(client, admin_key, "mentions-shipped", "shipped")
    refund = await _managed(client, admin_key, "mentions-refund", "refund")
    r = await client.post(
        "/judges",
        json={
            "name": "big",
            "type": "composite",
            "components": [
                {"judgeId": shipped, "weight": 1e308},
                {"judgeId": refund, "weight": 1e308},
            ],
        },
        headers=auth(admin_key),
    )
    assert r.status_code == 201, r.text
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    with serve(*agent_suite(RIGHT)) as agents:
        run = await push_through(
            client,
            admin_key,
            dataset_id,
            agents.url("/neens"),
            judge_deployment_ids=[r.json()["id"]],
        )
    [item] = await items_of(client, admin_key, run["id"])
    assert item["score"] == 0.5, item
    assert run["status"] != "failed", run


@pytest.mark.parametrize(
    "weight",
    [
        b"0",
        b"-1",
        b"-0.0",
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"1e999",
        b"true",
        b'"2"',
        b"null",
    ],
)
async def test_a_weight_that_is_not_a_finite_positive_number_is_refused(
    client: httpx.AsyncClient, admin_key: CreatedKey, weight: bytes
) -> None:
    judge_id = (await client.get("/judges", headers=auth(admin_key))).json()["judges"][0]["id"]
    components = b'[{"judgeId": "%s", "weight": 1}, {"judgeId": "%s", "weight": %s}]' % (
        judge_id.encode(),
        judge_id.encode(),
        weight,
    )
    created = await client.post(
        "/judges",
        content=b'{"name": "w", "type": "composite", "components": %s}' % components,
        headers={**auth(admin_key), "Content-Type": "application/json"},
    )
    assert created.status_code == 422, created.text
    assert created.json()["error"]["field"] == "components[1].weight", created.text
    primary = next(
        j
        for j in (await client.get("/judges", headers=auth(admin_key))).json()["judges"]
        if j["isPrimary"]
    )
    changed = await client.patch(
        f"/judges/{primary['id']}",
        content=b'{"components": %s}' % components,
        headers={**auth(admin_key), "Content-Type": "application/json"},
    )
    assert changed.status_code == 422, changed.text
    assert changed.json()["error"]["field"] == "components[1].weight", changed.text


async def test_the_smallest_weights_are_accepted_and_score(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    shipped = await _managed(client, admin_key, "mentions-shipped", "shipped")
    r = await client.post(
        "/judges",
        json={
            "name": "tiny",
            "type": "composite",
            "components": [{"judgeId": shipped, "weight": 5e-324}],
        },
        headers=auth(admin_key),
    )
    assert r.status_code == 201, r.text
    assert r.json()["config"]["components"] == [{"judgeId": shipped, "weight": 5e-324}]


async def _refusals(
    client: httpx.AsyncClient, key: CreatedKey, components: list[dict[str, Any]]
) -> tuple[httpx.Response, httpx.Response]:
    """The same components given to a new composite, and to an existing one (PATCH)."""
    suffix = uuid.uuid4().hex[:8]
    created = await client.post(
        "/judges",
        json={"name": f"new-{suffix}", "type": "composite", "components": components},
        headers=auth(key),
    )
    anchor = await _managed(client, key, f"anchor-{suffix}", "x")
    existing = await _composite(client, key, f"existing-{suffix}", anchor)
    changed = await client.patch(
        f"/judges/{existing}", json={"components": components}, headers=auth(key)
    )
    return created, changed


async def test_a_disabled_component_is_refused_on_create_and_on_change(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    on = await _managed(client, admin_key, "on", "a")
    off = await _managed(client, admin_key, "off", "b", enabled=False)
    for r in await _refusals(client, admin_key, [{"judgeId": on}, {"judgeId": off, "weight": 2}]):
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "components[1].judgeId", r.text
        assert "'off' is disabled" in r.json()["error"]["message"], r.text


async def test_a_component_listed_twice_is_refused_on_create_and_on_change(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    a = await _managed(client, admin_key, "a", "a")
    b = await _managed(client, admin_key, "b", "b")
    components = [{"judgeId": a}, {"judgeId": b}, {"judgeId": a, "weight": 3}]
    for r in await _refusals(client, admin_key, components):
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "components[2].judgeId", r.text
        assert "components[0]" in r.json()["error"]["message"], r.text


async def test_a_classifier_or_unknown_component_is_refused_on_change_as_on_create(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    classifier = await _create(
        client,
        admin_key,
        {
            "name": "topic",
            "type": "classifier",
            "template": "{output}",
            "labels": ["a", "b"],
            "endpoint": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m"},
        },
    )
    for r in await _refusals(client, admin_key, [{"judgeId": classifier}]):
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "components[0].judgeId", r.text
    for r in await _refusals(client, admin_key, [{"judgeId": "jdg_nope"}]):
        assert r.status_code == 404, r.text
        assert r.json()["error"]["field"] == "components[0].judgeId", r.text


async def test_a_composite_cannot_be_its_own_component(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    a = await _managed(client, admin_key, "a", "a")
    outer = await _composite(client, admin_key, "outer", a)
    r = await client.patch(
        f"/judges/{outer}",
        json={"components": [{"judgeId": a}, {"judgeId": outer}]},
        headers=auth(admin_key),
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "components[1].judgeId", r.text
    assert "its own component" in r.json()["error"]["message"], r.text


async def _set_enabled(
    client: httpx.AsyncClient, key: CreatedKey, judge_id: str, enabled: bool
) -> httpx.Response:
    return await client.patch(f"/judges/{judge_id}", json={"enabled": enabled}, headers=auth(key))


async def test_a_judge_an_enabled_composite_uses_cannot_be_disabled(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    """Disabling a component would not stop it scoring through the composite: refused, naming
    the composites, until they are disabled or no longer use it."""
    a = await _managed(client, admin_key, "a", "a")
    inner = await _composite(client, admin_key, "inner", a)
    outer = await _composite(client, admin_key, "outer", inner)
    r = await _set_enabled(client, admin_key, a, False)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["field"] == "enabled", r.text
    assert "'inner'" in r.json()["error"]["message"], r.text
    assert "'outer'" not in r.json()["error"]["message"], r.text
    r = await _set_enabled(client, admin_key, inner, False)
    assert r.status_code == 409, r.text
    assert "'outer'" in r.json()["error"]["message"], r.text
    for judge_id in (outer, inner, a):
        r = await _set_enabled(client, admin_key, judge_id, False)
        assert r.status_code == 200, r.text
        assert r.json()["enabled"] is False
    # A composite is enabled again only once its components are.
    r = await _set_enabled(client, admin_key, outer, True)
    assert r.status_code == 409, r.text
    assert "'inner' is disabled" in r.json()["error"]["message"], r.text
    for judge_id in (a, inner, outer):
        r = await _set_enabled(client, admin_key, judge_id, True)
        assert r.status_code == 200, r.text


async def test_the_primary_scores_component_cannot_be_disabled_while_it_is_used(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    judges = (await client.get("/judges", headers=auth(admin_key))).json()["judges"]
    primary = next(j for j in judges if j["isPrimary"])
    [component] = primary["config"]["components"]
    r = await _set_enabled(client, admin_key, component["judgeId"], False)
    assert r.status_code == 409, r.text
    assert "'Primary Score'" in r.json()["error"]["message"], r.text
    # Swapping the component out first, then disabling it, works.
    other = await _managed(client, admin_key, "other", "x")
    r = await client.patch(
        f"/judges/{primary['id']}",
        json={"components": [{"judgeId": other}]},
        headers=auth(admin_key),
    )
    assert r.status_code == 200, r.text
    r = await _set_enabled(client, admin_key, component["judgeId"], False)
    assert r.status_code == 200, r.text


async def test_the_primary_score_itself_cannot_be_disabled(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    """Runs and sweeps that name no judge use it: disabled, a run would be created on a judge
    the explicit pick refuses, and a sweep would start only to fail."""
    judges = (await client.get("/judges", headers=auth(admin_key))).json()["judges"]
    primary = next(j for j in judges if j["isPrimary"])
    r = await _set_enabled(client, admin_key, primary["id"], False)
    assert r.status_code == 409, r.text
    error = r.json()["error"]
    assert error["field"] == "enabled" and "is the Primary Score" in error["message"]
    again = (await client.get(f"/judges/{primary['id']}", headers=auth(admin_key))).json()
    assert again["enabled"] is True


async def test_a_disabled_composite_and_its_components_change_together(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    """A disabled composite may be given disabled components only if it stays disabled: the
    rule is the one for creating it, whatever its own state."""
    off = await _managed(client, admin_key, "off", "b", enabled=False)
    r = await client.post(
        "/judges",
        json={
            "name": "dormant",
            "type": "composite",
            "enabled": False,
            "components": [{"judgeId": off}],
        },
        headers=auth(admin_key),
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "components[0].judgeId", r.text
