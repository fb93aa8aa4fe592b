"""Who may use the MCP server: `/mcp` refuses a request without a key or with a bad one exactly
as every route does; `neens mcp` refuses to start without a valid key (exit 2), and stops
answering when its key is revoked."""

from __future__ import annotations

import asyncio
import subprocess

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from neens.store.db import Database
from neens.store.keys import KEY_MEMO_SECONDS, CreatedKey, revoke_key
from tests.mcp.conftest import NEENS, over_http, over_stdio, stdio_env, structured, tool_error
from tests.support.live import LiveServer
from tests.support.sqlite_only import sqlite_only

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer nk_live_madeup", "Basic dXNlcjpwYXNz", "Bearer"],
    ids=["no-key", "unknown-key", "not-bearer", "bearer-without-key"],
)
@sqlite_only(
    "the subject is the MCP transport; tests/api/test_auth.py checks keys on both databases"
)
async def test_mcp_over_http_refuses_a_request_as_every_route_does(
    live_server: LiveServer, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
        r = await client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
        route = await client.get("/model-sweeps", headers=headers)
    assert r.status_code == route.status_code == 401
    assert r.json() == route.json()
    assert r.json()["error"]["code"] == "not_authenticated"
    assert r.json()["error"]["field"] == "Authorization"


@sqlite_only(
    "the subject is the MCP transport; tests/api/test_auth.py checks keys on both databases"
)
async def test_the_sdk_client_with_a_bad_key_gets_no_session(live_server: LiveServer) -> None:
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    http = httpx2.AsyncClient(
        headers={"Authorization": "Bearer nk_live_madeup"}, event_hooks={"response": [record]}
    )
    with pytest.raises(ExceptionGroup) as raised:
        async with (
            http,
            streamable_http_client(f"{live_server.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write, read_timeout_seconds=30) as session,
        ):
            await session.initialize()
    assert raised.group_contains(MCPError, match="error response", depth=2)
    assert statuses == [401]


@sqlite_only(
    "the subject is the MCP transport; tests/api/test_auth.py checks keys on both databases"
)
async def test_an_ingest_key_uses_the_tools_over_http(
    live_server: LiveServer, ingest_key: CreatedKey
) -> None:
    async with over_http(live_server.url, ingest_key.key) as session:
        page = structured(await session.call_tool("sweep_list", {}))
    assert page == {"sweeps": [], "nextCursor": None}


def _run_mcp(database_url: str, key: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NEENS, "mcp"],
        env=stdio_env(database_url, key),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@sqlite_only("refused before the database is opened")
async def test_neens_mcp_refuses_to_start_without_a_key(database_url: str) -> None:
    done = await asyncio.to_thread(_run_mcp, database_url, None)
    assert done.returncode == 2
    assert "NEENS_API_KEY is not set" in done.stderr
    assert done.stdout == "", "nothing on the MCP wire"


@sqlite_only(
    "the subject is `neens mcp` starting; tests/api/test_auth.py checks keys on both databases"
)
async def test_neens_mcp_refuses_to_start_with_an_unknown_key(database_url: str) -> None:
    done = await asyncio.to_thread(_run_mcp, database_url, "nk_live_madeup")
    assert done.returncode == 2
    assert "unknown or revoked" in done.stderr
    assert done.stdout == ""


@sqlite_only(
    "the subject is `neens mcp` noticing; tests/api/test_auth.py revokes on both databases"
)
async def test_a_key_revoked_while_neens_mcp_runs_stops_working(
    database_url: str, db: Database, admin_key: CreatedKey
) -> None:
    async with over_stdio(database_url, admin_key.key) as session:
        assert structured(await session.call_tool("sweep_list", {}))["sweeps"] == []
        assert await revoke_key(db, admin_key.key_id)
        await asyncio.sleep(KEY_MEMO_SECONDS + 0.5)
        error = tool_error(await session.call_tool("sweep_list", {}))
    assert error["error"]["code"] == "not_authenticated"
    assert error["error"]["field"] == "NEENS_API_KEY"


@sqlite_only("the subject is the protocol version; tests/api/test_sweeps.py stores sweeps on both")
async def test_a_client_of_the_stateless_2026_protocol_gets_the_same_answers(
    live_server: LiveServer, ingest_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    """A client that skips the initialize handshake (each request self-contained) reaches the
    same tools, with the same answers, for keys of either project."""
    answers = []
    for key in (ingest_key, other_project_key):
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key.key}"})
        async with (
            http,
            Client(streamable_http_client(f"{live_server.url}/mcp", http_client=http)) as client,
        ):
            assert client.protocol_version == "2026-07-28"
            assert {t.name for t in (await client.list_tools()).tools} >= {"sweep_get"}
            missing = await client.call_tool("sweep_get", {"sweepId": "msw-nothing"})
            answers.append(tool_error(missing))
            assert structured(await client.call_tool("sweep_list", {}))["sweeps"] == []
    assert answers[0] == answers[1]
    assert answers[0]["error"]["code"] == "not_found"


async def test_neens_mcp_takes_the_database_from_the_flag(
    database_url: str, ingest_key: CreatedKey
) -> None:
    async with over_stdio(database_url, ingest_key.key, by_flag=True) as session:
        page = structured(await session.call_tool("sweep_list", {}))
    assert page == {"sweeps": [], "nextCursor": None}


@sqlite_only("the subject is the MCP transport, not the database")
async def test_a_get_of_mcp_is_refused_rather_than_held_open(
    live_server: LiveServer, admin_key: CreatedKey
) -> None:
    """A stateless server has nothing to send on an event stream: a GET that opened one would
    hold a connection for nothing, for as long as the client likes."""
    headers = {"Authorization": f"Bearer {admin_key.key}", "Accept": "text/event-stream"}
    async with httpx.AsyncClient(base_url=live_server.url, timeout=5) as client:
        r = await client.get("/mcp", headers=headers)
        anonymous = await client.get("/mcp", headers={"Accept": "text/event-stream"})
    assert r.status_code == 405 and r.headers["allow"] == "POST", r.text
    assert r.json()["error"]["code"] == "method_not_allowed"
    assert anonymous.status_code == 401, "the key is checked first"
