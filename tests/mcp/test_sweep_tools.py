"""The sweep tools driven by the official `mcp` SDK client, over stdio (`neens mcp` as a
subprocess) and over streamable HTTP (`/mcp` of a live server), on both databases: each answers
exactly what its HTTP route answers, refusals come back as tool errors naming the field, and a
key sees its own project only."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession

from neens.demo.endpoints import serve, steady
from neens.store.keys import CreatedKey
from tests.mcp.conftest import Connect, structured, tool_error
from tests.support.live import LiveServer
from tests.support.preprod import auth, connection, golden_dataset
from tests.support.sqlite_only import sqlite_only

pytestmark = sqlite_only(
    "the tools call the routes' own functions, which tests/api/test_sweeps.py runs on both"
)

ITEMS = [{"input": f"question {n}", "expected_output": f"answer {n}"} for n in range(2)]
RIGHT = {item["input"]: item["expected_output"] for item in ITEMS}
TERMINAL = {"completed", "completed_with_failures", "failed", "cancelled", "void"}
SWEEP_TOOLS = {"sweep_preview", "sweep_start", "sweep_get", "sweep_list"}
TOOLS = SWEEP_TOOLS | {"sweep_decision"}


@pytest.fixture
async def api(live_server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
        yield client


async def sweep_body(api: httpx.AsyncClient, key: CreatedKey, first: str, second: str) -> Any:
    """A dataset and two connections (made with the admin `key`), and the body of a sweep of
    two arms on them."""
    tag = uuid.uuid4().hex[:8]
    dataset_id, _ = await golden_dataset(api, key, ITEMS, name=f"golden-{tag}")
    sonnet = await connection(api, key, first, name=f"a-{tag}", model="claude-sonnet-4-5")
    mini = await connection(api, key, second, name=f"b-{tag}", model="gpt-4o-mini")
    return {
        "name": "Q3 model selection",
        "versionLabel": "2026-07-candidate",
        "datasetId": dataset_id,
        "passK": 2,
        "arms": [
            {"label": "sonnet", "agentConnectionId": sonnet},
            {"label": "mini", "agentConnectionId": mini},
        ],
    }


async def wait_for(session: ClientSession, sweep_id: str, timeout_s: float = 60) -> Any:
    """The sweep once it ended and its end was recorded (a read may roll the arms up as ended a
    moment before the worker records `completedAt`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        sweep = structured(await session.call_tool("sweep_get", {"sweepId": sweep_id}))
        if sweep["status"] in TERMINAL and sweep["completedAt"] is not None:
            return sweep
        assert time.monotonic() < deadline, f"sweep still {sweep['status']}: {sweep}"
        await asyncio.sleep(0.1)


async def test_a_sweep_previewed_started_read_and_listed_answers_what_the_api_answers(
    connect: Connect, api: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    with serve(steady(RIGHT, path="/a"), steady(RIGHT, path="/b")) as agents:
        body = await sweep_body(api, admin_key, agents.url("/a"), agents.url("/b"))
        async with connect(admin_key.key) as session:
            listed = await session.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS

            preview = structured(await session.call_tool("sweep_preview", body))
            r = await api.post("/model-sweeps/preview", json=body, headers=auth(admin_key))
            assert r.status_code == 200, r.text
            assert preview == r.json()
            assert [a["calls"] for a in preview["arms"]] == [4, 4]  # k=2 × 2 items
            assert preview["totalCalls"] == 8

            started = structured(await session.call_tool("sweep_start", body))
            assert started["id"].startswith("msw-")
            assert started["status"] == "running"
            assert [a["label"] for a in started["arms"]] == ["sonnet", "mini"]

            done = await wait_for(session, started["id"])
            r = await api.get(f"/model-sweeps/{started['id']}", headers=auth(admin_key))
            assert done == r.json()
            assert done["status"] == "completed"
            assert [(a["passed"], a["greenRuns"]) for a in done["arms"]] == [(True, 2), (True, 2)]

            page = structured(await session.call_tool("sweep_list", {"limit": 5}))
            r = await api.get("/model-sweeps", params={"limit": 5}, headers=auth(admin_key))
            assert page == r.json()
            assert [s["id"] for s in page["sweeps"]] == [started["id"]]

            decision = structured(
                await session.call_tool("sweep_decision", {"sweepId": started["id"], "bar": 0.5})
            )
            r = await api.get(
                f"/model-sweeps/{started['id']}/comparison",
                params={"bar": 0.5},
                headers=auth(admin_key),
            )
            assert decision == r.json()
            assert decision["comparable"] is True
            assert decision["bar"] == {"value": 0.5, "source": "query"}
            refused = tool_error(
                await session.call_tool(
                    "sweep_decision", {"sweepId": started["id"], "baselineArm": "msa-nope"}
                )
            )
            assert refused["error"]["field"] == "baselineArm"


async def test_a_refused_start_is_a_tool_error_with_the_apis_message_and_field(
    connect: Connect, api: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    body = await sweep_body(api, admin_key, "http://127.0.0.1:9/a", "http://127.0.0.1:9/b")
    cases = [
        ({**body, "arms": body["arms"][:1]}, "arms"),
        ({**body, "arms": [body["arms"][0], {**body["arms"][1], "label": "sonnet"}]},
         "arms[1].label"),
        ({k: v for k, v in body.items() if k != "versionLabel"}, "versionLabel"),
        ({**body, "passK": "three"}, "passK"),
        ({**body, "pass_k": 2}, "pass_k"),
    ]  # fmt: skip
    async with connect(admin_key.key) as session:
        for refused, field in cases:
            error = tool_error(await session.call_tool("sweep_start", refused))
            r = await api.post("/model-sweeps", json=refused, headers=auth(admin_key))
            assert r.status_code == 422, r.text
            assert error == r.json()
            assert error["error"]["field"] == field, error
        page = structured(await session.call_tool("sweep_list", {}))
    assert page["sweeps"] == [], "a refused start creates nothing"


async def test_another_projects_sweep_answers_like_a_missing_one(
    connect: Connect,
    api: httpx.AsyncClient,
    admin_key: CreatedKey,
    other_project_key: CreatedKey,
) -> None:
    with serve(steady(RIGHT, path="/a", latency_s=0.2), steady(RIGHT, path="/b")) as agents:
        body = await sweep_body(api, admin_key, agents.url("/a"), agents.url("/b"))
        r = await api.post("/model-sweeps", json=body, headers=auth(admin_key))
        assert r.status_code == 201, r.text
        theirs = r.json()["id"]
        missing = "msw-" + uuid.uuid4().hex
        try:
            async with connect(other_project_key.key) as session:
                foreign = tool_error(await session.call_tool("sweep_get", {"sweepId": theirs}))
                absent = tool_error(await session.call_tool("sweep_get", {"sweepId": missing}))
                page = structured(await session.call_tool("sweep_list", {}))
            async with connect(admin_key.key) as session:
                own = structured(await session.call_tool("sweep_get", {"sweepId": theirs}))
        finally:
            await api.post(f"/model-sweeps/{theirs}/cancel", headers=auth(admin_key))
    r = await api.get(f"/model-sweeps/{theirs}", headers=auth(other_project_key))
    assert r.status_code == 404
    # The API's answer, with the field spelled as the tool's argument is.
    assert r.json()["error"]["field"] == "sweep_id"
    assert foreign == {"error": {**r.json()["error"], "field": "sweepId"}}
    assert foreign["error"]["code"] == absent["error"]["code"] == "not_found"
    unnamed = foreign["error"]["message"].replace(theirs, "ID")
    assert unnamed == absent["error"]["message"].replace(missing, "ID")
    assert page["sweeps"] == []
    assert own["id"] == theirs


async def test_an_argument_no_database_can_store_is_refused_naming_it(
    connect: Connect, admin_key: CreatedKey
) -> None:
    """As the API refuses a NUL in an id (422), not a lookup that misses. (A lone surrogate
    cannot be sent: the MCP client's JSON encoder refuses it.)"""
    async with connect(admin_key.key) as session:
        error = tool_error(await session.call_tool("sweep_get", {"sweepId": "msw-\x00"}))
    assert error["error"]["code"] == "unprocessable", error
    assert error["error"]["field"] == "sweepId", error


async def test_a_cursor_that_is_not_one_is_refused_naming_it(
    connect: Connect, admin_key: CreatedKey
) -> None:
    async with connect(admin_key.key) as session:
        error = tool_error(await session.call_tool("sweep_list", {"cursor": "nonsense"}))
        limit = tool_error(await session.call_tool("sweep_list", {"limit": 500}))
    assert error["error"]["field"] == "cursor"
    assert limit["error"]["field"] == "limit"


async def test_the_descriptions_carry_the_honesty_rules(
    connect: Connect, admin_key: CreatedKey
) -> None:
    async with connect(admin_key.key) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        init = session.initialize_result
    assert init is not None and init.instructions is not None
    # the instructions point the agent at every tool, the decision's reader included
    assert all(f"`{name}`" in init.instructions for name in tools), init.instructions
    decision = tools["sweep_decision"].description or ""
    for rule in (
        "`comparable: false` means the sweep is void: never rank its arms",
        "`costPerCaseUsd: null` means unpriced: the cost is unknown, never free",
        "`rate: null` means no data (nothing was scored), not 0%",
        "An item counts as passed only when it passed every one of its scored repeats",
    ):
        assert rule in decision
    sweep_texts = [tools[name].description or "" for name in sorted(SWEEP_TOOLS)]
    for text in [init.instructions, *sweep_texts]:
        assert "A void sweep must never be ranked, compared or called a pass" in text
        assert "`null` while fewer than k runs finished" in text
        assert "`estimatedUsd: null` (preview) means unpriced" in text
        assert "never free" in text
    assert tools["sweep_start"].annotations is not None
    assert tools["sweep_start"].annotations.read_only_hint is False
    assert all(tools[name].annotations.read_only_hint for name in TOOLS - {"sweep_start"})  # type: ignore[union-attr]
    schema = tools["sweep_preview"].input_schema
    assert {"datasetId", "passK", "arms", "budgetUsd"} <= set(schema["properties"])
