"""Steps shared by the pre-prod tests: a golden dataset, a connection, a run, waiting for it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from neens.demo.endpoints import agent_suite, serve
from neens.store.keys import CreatedKey

TERMINAL = {"completed", "completed_with_regressions", "failed", "cancelled"}


def auth(key: CreatedKey) -> dict[str, str]:
    return {"Authorization": f"Bearer {key.key}"}


async def golden_dataset(
    client: httpx.AsyncClient, key: CreatedKey, items: list[dict[str, Any]], name: str = "golden"
) -> tuple[str, str]:
    """A dataset whose golden version holds `items`; returns (dataset id, version id)."""
    r = await client.post("/datasets", json={"name": name}, headers=auth(key))
    assert r.status_code == 201, r.text
    dataset_id = r.json()["id"]
    r = await client.post(
        f"/datasets/{dataset_id}/versions",
        json={"items": items, "golden": True},
        headers=auth(key),
    )
    assert r.status_code == 201, r.text
    return dataset_id, r.json()["id"]


async def connection(client: httpx.AsyncClient, key: CreatedKey, url: str, **fields: Any) -> str:
    body = {"name": fields.pop("name", url), "url": url, "requestFormat": "neens", **fields}
    r = await client.post("/agent-connections", json=body, headers=auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def create_run(client: httpx.AsyncClient, key: CreatedKey, **body: Any) -> dict[str, Any]:
    body.setdefault("version_label", "candidate")
    r = await client.post("/preprod-evals", json=body, headers=auth(key))
    assert r.status_code == 201, r.text
    run: dict[str, Any] = r.json()
    return run


async def wait_for_run(
    client: httpx.AsyncClient, key: CreatedKey, run_id: str, *, timeout_s: float = 30.0
) -> dict[str, Any]:
    """Poll the run until it is terminal (bounded in time)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = await client.get(f"/preprod-evals/{run_id}", headers=auth(key))
        assert r.status_code == 200, r.text
        run: dict[str, Any] = r.json()
        if run["status"] in TERMINAL:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {run['status']} after {timeout_s}s: {run}")
        await asyncio.sleep(0.05)


async def items_of(client: httpx.AsyncClient, key: CreatedKey, run_id: str) -> list[dict[str, Any]]:
    r = await client.get(f"/preprod-evals/{run_id}/items", headers=auth(key))
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


async def push_through(
    client: httpx.AsyncClient,
    key: CreatedKey,
    dataset_id: str,
    url: str,
    *,
    connection_fields: dict[str, Any] | None = None,
    **body: Any,
) -> dict[str, Any]:
    """A push-mode run against the endpoint at `url`, waited for; returns the finished run."""
    conn = await connection(client, key, url, **(connection_fields or {}))
    run = await create_run(
        client, key, dataset_id=dataset_id, runner_mode="push", agent_connection_id=conn, **body
    )
    return await wait_for_run(client, key, run["id"])


async def push_run(
    client: httpx.AsyncClient,
    key: CreatedKey,
    dataset_id: str,
    answers: dict[str, str],
    *,
    usage: dict[str, int] | None = None,
    model: str | None = None,
    **body: Any,
) -> dict[str, Any]:
    """A push-mode run against a fresh agent server answering `answers`, waited for. With
    `usage`, the agent speaks the chat format and reports that token usage."""
    fields: dict[str, Any] = {"name": f"conn-{time.monotonic_ns()}"}
    if model is not None:
        fields["model"] = model
    if usage is not None:
        fields["requestFormat"] = "chat"
    with serve(*agent_suite(answers, usage=usage)) as agents:
        url = agents.url("/chat" if usage is not None else "/neens")
        return await push_through(client, key, dataset_id, url, connection_fields=fields, **body)
