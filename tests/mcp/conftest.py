"""MCP clients for the tests: the official `mcp` SDK's client over stdio (spawning `neens mcp`)
and over streamable HTTP (`/mcp` of a live server), each yielding an initialized session."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.live import LiveServer

NEENS = str(Path(sys.executable).parent / "neens")
"""The `neens` command of the environment running the tests."""

Connect = Callable[[str], AbstractAsyncContextManager[ClientSession]]
"""An MCP session acting as the given API key."""


def stdio_env(database_url: str, key: str | None) -> dict[str, str]:
    """The environment of a `neens mcp` process: the test's own (its secret keys, its home),
    the database, and the key."""
    env = {k: v for k, v in os.environ.items() if k != "NEENS_API_KEY"}
    env["NEENS_DATABASE_URL"] = database_url
    if key is not None:
        env["NEENS_API_KEY"] = key
    return env


@asynccontextmanager
async def over_stdio(
    database_url: str, key: str, *, by_flag: bool = False
) -> AsyncIterator[ClientSession]:
    """`neens mcp` as a subprocess, given the database in NEENS_DATABASE_URL or, `by_flag`,
    by `--database-url` alone."""
    env = stdio_env(database_url, key)
    args = ["mcp"]
    if by_flag:
        del env["NEENS_DATABASE_URL"]
        args += ["--database-url", database_url]
    params = StdioServerParameters(command=NEENS, args=args, env=env)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, read_timeout_seconds=60) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def over_http(base_url: str, key: str) -> AsyncIterator[ClientSession]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    async with (
        http,
        streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=60) as session,
    ):
        await session.initialize()
        yield session


@pytest.fixture(params=["stdio", "http"])
def connect(request: pytest.FixtureRequest, live_server: LiveServer, database_url: str) -> Connect:
    """An MCP session over each transport. Both run against the live server's database; over
    stdio, that server's workers run the sweeps the `neens mcp` process starts."""
    if request.param == "stdio":
        return lambda key: over_stdio(database_url, key)
    return lambda key: over_http(live_server.url, key)


def structured(result: types.CallToolResult) -> dict[str, Any]:
    """A successful call's JSON, checked to be the same in its structured and text content."""
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    [text] = result.content
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == result.structured_content
    return result.structured_content


def tool_error(result: types.CallToolResult) -> dict[str, Any]:
    """A refused call's error body (the API's error shape)."""
    assert result.is_error, result.structured_content
    [text] = result.content
    assert isinstance(text, types.TextContent)
    body: dict[str, Any] = json.loads(text.text)
    return body
