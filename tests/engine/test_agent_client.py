"""The agent client and connections the endpoint's server closed: a request that goes out on a
pooled connection the server had already closed is sent again on another, and nothing else is.

The server here is a real HTTP/1.1 server on loopback (asyncio streams) whose connections answer
a set number of requests and then close on the next one without a reply: what a server whose
keep-alive ran out looks like to a client that sent on the connection before it read the close.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
import pytest

from neens.engine import agent_client
from neens.engine.agent_client import STALE_CONNECTION_RETRIES, AgentClient


@dataclass
class DroppingServer:
    """Each connection answers `answers_per_connection` requests, then reads the next request and
    closes without answering."""

    answers_per_connection: int
    connections: int = 0
    requests: int = 0
    answered: int = 0
    url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                self.requests += 1
                if served == self.answers_per_connection:
                    return  # closes without a reply
                served += 1
                self.answered += 1
                body = b'{"output":"ok"}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


@asynccontextmanager
async def dropping(answers_per_connection: int) -> AsyncIterator[DroppingServer]:
    server = DroppingServer(answers_per_connection)
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    server.url = f"http://127.0.0.1:{port}/agent"
    try:
        yield server
    finally:
        listening.close()
        await listening.wait_closed()


async def post(client: AgentClient, url: str) -> tuple[int, bytes]:
    return await client.post_json(url, b'{"input":"x"}', {}, max_bytes=1024)


async def test_a_request_on_a_connection_the_server_closed_is_sent_again_on_a_new_one() -> None:
    async with (
        dropping(answers_per_connection=1) as server,
        AgentClient(allow_private=True) as client,
    ):
        assert await post(client, server.url) == (200, b'{"output":"ok"}')
        # The pooled connection is reused; the server reads the request and closes it.
        assert await post(client, server.url) == (200, b'{"output":"ok"}')
    assert (server.connections, server.requests, server.answered) == (2, 3, 2)


async def test_a_request_that_fails_on_a_new_connection_is_not_sent_again() -> None:
    async with (
        dropping(answers_per_connection=0) as server,
        AgentClient(allow_private=True) as client,
    ):
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await post(client, server.url)
    assert (server.connections, server.requests) == (1, 1)


async def test_a_request_is_sent_again_at_most_the_set_number_of_times() -> None:
    """Connections that each answer once, all pooled: a request meets closed connections one after
    the other and gives up after the retries, never sending more than 1 + retries times."""
    pooled = STALE_CONNECTION_RETRIES + 2
    async with (
        dropping(answers_per_connection=1) as server,
        AgentClient(allow_private=True) as client,
    ):
        # Open `pooled` connections at once; each answers its one request and goes to the pool.
        await asyncio.gather(*(post(client, server.url) for _ in range(pooled)))
        assert server.connections == pooled
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            await post(client, server.url)
    assert server.requests == pooled + 1 + STALE_CONNECTION_RETRIES
    assert server.connections == pooled  # every attempt went out on a closed pooled connection


async def test_idle_connections_are_dropped_before_a_server_would_close_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(agent_client, "KEEPALIVE_S", 0.05)
    async with (
        dropping(answers_per_connection=5) as server,
        AgentClient(allow_private=True) as client,
    ):
        await post(client, server.url)
        await asyncio.sleep(0.2)
        await post(client, server.url)
    assert (server.connections, server.requests) == (2, 2)
