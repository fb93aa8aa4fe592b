"""A push run's answers are its own: nothing sent through ingest replaces or links to them."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from neens.domain.conventions import is_push_trace_id
from neens.engine.push import push_trace_id
from neens.settings import Settings
from neens.store.keys import CreatedKey
from tests.support.live import serve_in_thread
from tests.support.otlp import export_request, span
from tests.support.preprod import (
    auth,
    connection,
    create_run,
    golden_dataset,
    items_of,
    wait_for_run,
)


@pytest.fixture
def settings(database_url: str) -> Settings:
    """The agent call is held open while the test forges; give it time on a busy machine."""
    return Settings(database_url=database_url, migrate_on_start=False, push_timeout_s=30)


PROMPT = "Where is order 17?"
RIGHT = "Order 17 shipped on 3 June."


@contextmanager
def gated_agent() -> Iterator[tuple[str, list[dict[str, Any]], threading.Event]]:
    """An agent endpoint that answers right, but only once the gate is opened; yields its URL,
    the bodies it received and the gate."""
    received: list[dict[str, Any]] = []
    gate = threading.Event()

    async def answer(request: Request) -> Response:
        received.append(await request.json())
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return JSONResponse({"output": RIGHT})

    with serve_in_thread(Starlette(routes=[Route("/agent", answer, methods=["POST"])])) as server:
        try:
            yield f"{server.url}/agent", received, gate
        finally:
            gate.set()


async def _forge_native(
    client: httpx.AsyncClient, key: CreatedKey, trace_id: str
) -> httpx.Response:
    """A session with the push answer's id, a root that starts earlier and a wrong answer."""
    body = {
        "session": {"id": trace_id, "agent_name": "forger"},
        "spans": [
            {
                "id": "forged-root",
                "name": "agent.call",
                "kind": "agent",
                "input": PROMPT,
                "output": "Order 17 was never shipped.",
                "start_time": "2000-01-01T00:00:00Z",
                "end_time": "2000-01-01T00:00:01Z",
            },
            {"id": "agent", "name": "agent.call", "kind": "agent", "output": "forged"},
        ],
    }
    return await client.post("/sessions", json=body, headers=auth(key))


async def _forge_otlp(client: httpx.AsyncClient, key: CreatedKey, run_id: str, item_id: str) -> str:
    """An OTLP trace tagged with the push run and its item, carrying a wrong answer."""
    tid = os.urandom(16)
    root = span(
        tid,
        os.urandom(8),
        "agent.run",
        **{
            "openinference.span.kind": "AGENT",
            "input.value": PROMPT,
            "output.value": "Order 17 was never shipped.",
            "neens.eval_run_id": run_id,
            "neens.dataset_item_id": item_id,
        },
    )
    r = await client.post(
        "/v1/traces",
        content=export_request([root]).SerializeToString(),
        headers={**auth(key), "Content-Type": "application/x-protobuf"},
    )
    assert r.status_code == 200
    return tid.hex()


def test_push_trace_ids_are_in_the_reserved_namespace() -> None:
    assert is_push_trace_id(push_trace_id("ppr_0123", "dsi_4567"))
    assert not is_push_trace_id("trace-eval-001")
    assert not is_push_trace_id(os.urandom(16).hex())  # OTLP trace ids are hex: never reserved


async def test_ingest_cannot_replace_or_link_to_a_push_runs_answer(
    client: httpx.AsyncClient, ingest_key: CreatedKey, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(
        client, ingest_key, [{"input": PROMPT, "expected_output": RIGHT}]
    )
    with gated_agent() as (url, received, gate):
        conn = await connection(client, admin_key, url, name="gated")
        run = await create_run(
            client, ingest_key, dataset_id=dataset_id, runner_mode="push", agent_connection_id=conn
        )
        deadline = time.monotonic() + 20
        while not received:
            assert time.monotonic() < deadline, "the agent was never called"
            await asyncio.sleep(0.02)
        item_id = received[0]["dataset_item_id"]
        trace_id = push_trace_id(run["id"], item_id)

        # While the call is in flight: neither the answer's session id nor the run's tags work.
        r = await _forge_native(client, ingest_key, trace_id)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "session.id"
        forged_otlp = await _forge_otlp(client, ingest_key, run["id"], item_id)
        [item] = await items_of(client, ingest_key, run["id"])
        assert (item["status"], item["session_id"]) == ("pending", None)

        gate.set()
        done = await wait_for_run(client, ingest_key, run["id"])

    assert done["status"] == "completed"
    [item] = await items_of(client, ingest_key, run["id"])
    assert (item["status"], item["session_id"], item["score"]) == ("scored", trace_id, 1.0)

    # After the run: still refused, and nothing about the item moves.
    r = await _forge_native(client, ingest_key, trace_id)
    assert r.status_code == 422
    await _forge_otlp(client, ingest_key, run["id"], item_id)
    assert await items_of(client, ingest_key, run["id"]) == [item]
    session = (await client.get(f"/sessions/{trace_id}", headers=auth(ingest_key))).json()
    assert session["output"] == RIGHT
    assert session["source"] == "push"
    assert [s["spanId"] for s in session["spans"]] == ["agent"]
    # The tagged OTLP trace is stored as an ordinary session, linked to nothing.
    other = (await client.get(f"/sessions/{forged_otlp}", headers=auth(ingest_key))).json()
    assert other["evalRunId"] == run["id"]
    assert forged_otlp not in {
        i["session_id"] for i in await items_of(client, ingest_key, run["id"])
    }
