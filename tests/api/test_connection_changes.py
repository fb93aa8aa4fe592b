"""Changing agent connections and judges: a bad PATCH never breaks the resource, a rename onto
a taken name is a conflict, an ingest key cannot redirect a connection, and a new URL does not
take the old destination's headers along."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from neens.store.keys import CreatedKey
from tests.conftest import auth
from tests.support.live import serve_in_thread
from tests.support.preprod import create_run, golden_dataset, items_of, wait_for_run


@contextmanager
def header_recorder() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A `neens`-format agent on loopback recording the headers of each call."""
    seen: list[dict[str, str]] = []

    async def agent(request: Request) -> Response:
        seen.append(dict(request.headers))
        return JSONResponse({"output": "ok"})

    with serve_in_thread(Starlette(routes=[Route("/agent", agent, methods=["POST"])])) as server:
        yield f"{server.url}/agent", seen


async def _connection(client: httpx.AsyncClient, key: CreatedKey, **body: Any) -> dict[str, Any]:
    body = {"name": "support", "url": "http://127.0.0.1:9/agent", **body}
    r = await client.post("/agent-connections", json=body, headers=auth(key))
    assert r.status_code == 201, r.text
    result: dict[str, Any] = r.json()
    return result


async def _reads_fine(client: httpx.AsyncClient, key: CreatedKey, conn_id: str) -> None:
    h = auth(key)
    assert (await client.get(f"/agent-connections/{conn_id}", headers=h)).status_code == 200
    assert (await client.get("/agent-connections", headers=h)).status_code == 200
    r = await client.patch(f"/agent-connections/{conn_id}", json={"model": "m2"}, headers=h)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("field", ["name", "url", "requestFormat", "provider", "headers"])
async def test_a_null_for_a_connection_field_that_cannot_be_empty_is_422_and_changes_nothing(
    client: httpx.AsyncClient, admin_key: CreatedKey, field: str
) -> None:
    conn = await _connection(client, admin_key, headers={"Authorization": "Bearer s"})
    r = await client.patch(
        f"/agent-connections/{conn['id']}", json={field: None}, headers=auth(admin_key)
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    assert "cannot be null" in r.json()["error"]["message"]
    await _reads_fine(client, admin_key, conn["id"])
    r = await client.get(f"/agent-connections/{conn['id']}", headers=auth(admin_key))
    assert r.json()["headerNames"] == ["Authorization"]


async def test_null_clears_the_nullable_connection_fields(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    conn = await _connection(client, admin_key, model="m", answerPath="data.answer")
    r = await client.patch(
        f"/agent-connections/{conn['id']}",
        json={"model": None, "answerPath": None},
        headers=auth(admin_key),
    )
    assert r.status_code == 200, r.text
    assert (r.json()["model"], r.json()["answerPath"]) == (None, None)


async def test_renaming_a_connection_onto_a_taken_name_is_409(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    await _connection(client, admin_key, name="first")
    second = await _connection(client, admin_key, name="second")
    r = await client.patch(
        f"/agent-connections/{second['id']}", json={"name": "first"}, headers=auth(admin_key)
    )
    assert r.status_code == 409, r.text
    assert r.json()["error"]["field"] == "name"
    await _reads_fine(client, admin_key, second["id"])
    r = await client.patch(
        f"/agent-connections/{second['id']}", json={"name": "second"}, headers=auth(admin_key)
    )
    assert r.status_code == 200, "keeping its own name is not a conflict"


@pytest.mark.parametrize("field", ["enabled", "scoreProduction", "components"])
async def test_a_null_for_a_judge_field_is_422_and_the_judge_still_reads(
    client: httpx.AsyncClient, admin_key: CreatedKey, field: str
) -> None:
    h = auth(admin_key)
    judges = (await client.get("/judges", headers=h)).json()["judges"]
    [primary] = [j for j in judges if j["isPrimary"]]
    r = await client.patch(f"/judges/{primary['id']}", json={field: None}, headers=h)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    after = await client.get(f"/judges/{primary['id']}", headers=h)
    assert after.status_code == 200
    assert after.json() == primary
    assert (await client.get("/judges", headers=h)).status_code == 200


async def test_an_ingest_key_cannot_point_a_connection_at_its_own_url(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    conn = await _connection(client, admin_key, headers={"Authorization": "Bearer secret"})
    for body in ({"url": "http://127.0.0.1:9/thief"}, {"headers": {}}, {"name": "x"}):
        r = await client.patch(
            f"/agent-connections/{conn['id']}", json=body, headers=auth(ingest_key)
        )
        assert r.status_code == 403, r.text
    r = await client.post(
        "/judges",
        json={"name": "always-pass", "type": "managed", "check": "contains"},
        headers=auth(ingest_key),
    )
    assert r.status_code == 403
    after = await client.get(f"/agent-connections/{conn['id']}", headers=auth(admin_key))
    assert after.json()["url"] == conn["url"]


async def test_a_new_url_drops_the_stored_headers_unless_it_sets_them_again(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(
        client, ingest_key, [{"input": "q", "expected_output": "ok"}]
    )
    with header_recorder() as (url, seen):
        conn = await _connection(
            client, admin_key, url="http://127.0.0.1:9/old", requestFormat="neens",
            headers={"Authorization": "Bearer old-secret"},
        )  # fmt: skip
        r = await client.patch(
            f"/agent-connections/{conn['id']}", json={"url": url}, headers=auth(admin_key)
        )
        assert r.status_code == 200, r.text
        assert r.json()["droppedHeaderNames"] == ["Authorization"]
        assert r.json()["headerNames"] == []
        run = await create_run(
            client, ingest_key, dataset_id=dataset_id, runner_mode="push",
            agent_connection_id=conn["id"], version_label="v1",
        )  # fmt: skip
        assert (await wait_for_run(client, ingest_key, run["id"]))["status"] != "failed"
        assert [h.get("authorization") for h in seen] == [None]

        r = await client.patch(
            f"/agent-connections/{conn['id']}",
            json={"url": url + "?v=2", "headers": {"Authorization": "Bearer new"}},
            headers=auth(admin_key),
        )
        assert r.json()["droppedHeaderNames"] == []
        assert r.json()["headerNames"] == ["Authorization"]
        run = await create_run(
            client, ingest_key, dataset_id=dataset_id, runner_mode="push",
            agent_connection_id=conn["id"], version_label="v2",
        )  # fmt: skip
        await wait_for_run(client, ingest_key, run["id"])
        assert seen[-1]["authorization"] == "Bearer new"
        assert [i["status"] for i in await items_of(client, ingest_key, run["id"])] != ["error"]


@pytest.mark.parametrize("path", ["data..answer", "data.answers[x]", "a]", ""])
async def test_a_malformed_answer_path_is_422_naming_it_and_changes_nothing(
    client: httpx.AsyncClient, admin_key: CreatedKey, path: str
) -> None:
    h = auth(admin_key)
    r = await client.post(
        "/agent-connections",
        json={"name": "x", "url": "http://127.0.0.1:9/a", "answerPath": path},
        headers=h,
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "answerPath", r.text
    conn = await _connection(client, admin_key, answerPath="data.answer")
    r = await client.patch(f"/agent-connections/{conn['id']}", json={"answerPath": path}, headers=h)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "answerPath", r.text
    r = await client.get(f"/agent-connections/{conn['id']}", headers=h)
    assert r.json()["answerPath"] == "data.answer"


@pytest.mark.parametrize("path", ['data["a.b"][0].text', ".data.answer", "items[0]id", 'say"hi"'])
async def test_an_answer_path_and_a_judge_path_are_written_the_same_way(
    client: httpx.AsyncClient, admin_key: CreatedKey, path: str
) -> None:
    conn = await _connection(client, admin_key, answerPath=path)
    assert conn["answerPath"] == path
    judge = {"name": "j", "type": "managed", "check": "json_field_match", "config": {"path": path}}
    r = await client.post("/judges", json=judge, headers=auth(admin_key))
    assert r.status_code == 201, r.text
    assert r.json()["config"]["options"]["path"] == path
