"""The HTTP client that calls agent endpoints: aiohttp behind the destination policy.

Push runs and sweeps make one call per item per run, thousands at a time, so the client's own
cost per call is what a run pays on top of the endpoint's latency. httpx's connection pool
checks every idle connection with several system calls on each request and on each release,
about 7 ms of CPU per call at 32 connections on a 2-core machine; aiohttp's pool costs about
0.35 ms (`bench/push_run.py` prints both loops). Judges and sinks, a few calls per run, keep
the httpx client in `destinations.guarded_client`.

A pooled connection the endpoint's server has already closed (its keep-alive ran out: 5 s for
uvicorn and Node, 2 s for gunicorn) is the one failure a call does not own. aiohttp reuses the
longest-idle connection first and learns of the server's close only when its event loop reads
it, so on a busy worker a request goes out on a closed connection and fails before any reply
("Can not write request body", "Server disconnected"). Two things keep that from costing an
item: idle connections are dropped after `KEEPALIVE_S`, below those servers' limits, and a
request that fails that way on a *reused* connection is sent again (at most
`STALE_CONNECTION_RETRIES` times; aiohttp resends only idempotent methods itself). A request
that fails on a new connection, or after the reply began, is never sent again.

The policy is the one `destinations` describes, enforced here in two places: a host written as
an address is checked before the request, and a name is checked when it is resolved (aiohttp
then connects to the checked address itself, so a name re-pointed a moment later changes
nothing). Redirects are never followed, cookies are never kept (one endpoint's cookie must not
reach another), and the proxy environment variables are ignored.
"""

from __future__ import annotations

import ipaddress
import socket
from types import SimpleNamespace, TracebackType
from typing import Final

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from multidict import CIMultiDict

from neens.engine.destinations import DestinationRefused, check_destination, resolve_allowed

USER_AGENT = "neens"
KEEPALIVE_S: Final = 1.0
"""How long an idle pooled connection is kept: below the keep-alive of the usual servers."""
STALE_CONNECTION_RETRIES: Final = 2
"""How many times a request that failed on a reused connection before any reply is sent again."""


class ResponseTooLarge(Exception):
    """The reply's body is larger than the cap; `size` is how much was seen (or declared)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"response is larger than the cap (at least {size:,} bytes)")
        self.size = size


class _GuardedResolver(AbstractResolver):
    """Resolves a name and refuses it when any address it resolves to is not allowed."""

    def __init__(self, *, allow_private: bool) -> None:
        self.allow_private = allow_private

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        address = await resolve_allowed(host, port, allow_private=self.allow_private)
        ip = ipaddress.ip_address(address)
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        return None


class AgentClient:
    """One connection pool for every agent call of a worker; use as an async context."""

    def __init__(self, *, allow_private: bool) -> None:
        self.allow_private = allow_private
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AgentClient:
        connector = aiohttp.TCPConnector(
            limit=0,  # the run's own concurrency bounds the calls in flight
            resolver=_GuardedResolver(allow_private=self.allow_private),
            keepalive_timeout=KEEPALIVE_S,
        )
        reuse = aiohttp.TraceConfig()
        reuse.on_connection_reuseconn.append(_mark_reused)
        self._session = aiohttp.ClientSession(
            connector=connector,
            trace_configs=[reuse],
            timeout=aiohttp.ClientTimeout(total=None),  # the caller bounds the whole exchange
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            headers={"User-Agent": USER_AGENT},
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post_json(
        self, url: str, body: bytes, headers: dict[str, str], *, max_bytes: int
    ) -> tuple[int, bytes]:
        """POST a JSON body and read the whole reply, at most `max_bytes` of it.

        Raises `DestinationRefused` (nothing sent), `ResponseTooLarge`, or `aiohttp.ClientError`
        for anything that went wrong on the wire."""
        if self._session is None:
            raise RuntimeError("AgentClient is used outside `async with`")
        check_destination(url, allow_private=self.allow_private)
        sent = CIMultiDict({"Content-Type": "application/json"})
        sent.update(headers)
        for retries_left in range(STALE_CONNECTION_RETRIES, -1, -1):
            attempt = SimpleNamespace(reused=False)
            try:
                reply = await self._session.post(
                    url, data=body, headers=sent, allow_redirects=False, trace_request_ctx=attempt
                )
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                stale = attempt.reused and not isinstance(exc, aiohttp.ClientConnectorError)
                if stale and retries_left:
                    continue  # the server had closed the pooled connection: send it again
                raise
            break
        async with reply:
            declared = reply.content_length
            if declared is not None and declared > max_bytes:
                raise ResponseTooLarge(declared)
            chunks: list[bytes] = []
            size = 0
            async for chunk in reply.content.iter_any():
                size += len(chunk)
                if size > max_bytes:
                    raise ResponseTooLarge(size)
                chunks.append(chunk)
            return reply.status, b"".join(chunks)


async def _mark_reused(
    session: aiohttp.ClientSession,
    context: SimpleNamespace,
    params: aiohttp.TraceConnectionReuseconnParams,
) -> None:
    """Note on the request's attempt that it went out on a pooled connection."""
    context.trace_request_ctx.reused = True


def refused(exc: BaseException) -> DestinationRefused | None:
    """The policy's refusal behind an aiohttp error, when that is what it is."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DestinationRefused):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
