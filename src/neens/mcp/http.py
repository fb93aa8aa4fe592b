"""`/mcp` on the server: the MCP tools over streamable HTTP, behind the API's Bearer key.

Every request is authenticated like every route (`Authorization: Bearer nk_live_…`; 401 in the
API's error shape without a key or with a bad one) before the MCP transport sees it, and each
tool call acts as the key of the request that carries it. The transport is stateless and
answers JSON (no session to pin to one server process, no stream left open), so any server
process behind a load balancer can answer any request. Its session manager runs in the app's
lifespan (`McpEndpoint.running`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from neens.api.deps import authenticate
from neens.api.errors import error_body
from neens.api.middleware import send_error
from neens.errors import NeensError, NotAuthenticated
from neens.mcp.server import build_server
from neens.mcp.tools import Caller
from neens.store.keys import Principal

_PRINCIPAL = "neens.principal"
"""The scope key under which the endpoint leaves the request's principal for the tools."""


async def _caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
    request = ctx.request
    principal = request.scope.get(_PRINCIPAL) if isinstance(request, Request) else None
    if not isinstance(request, Request) or not isinstance(principal, Principal):
        # Never so: every request passed the endpoint's key check before the transport saw it.
        raise NotAuthenticated("this MCP request carried no checked API key", field="Authorization")
    state = request.app.state
    return Caller(state.db, state.settings, principal, state.worker.notify)


class McpEndpoint:
    """The ASGI app behind `/mcp`."""

    def __init__(self) -> None:
        self._server = build_server(_caller_of)
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve MCP requests for the duration of the block (the app's lifespan).

        The session manager runs in a task of its own: its task group is entered and left in
        that one task, whichever tasks enter and leave the lifespan (a test's fixtures set up
        and tear down in different tasks)."""
        manager = StreamableHTTPSessionManager(app=self._server, json_response=True, stateless=True)
        ready, stop = asyncio.Event(), asyncio.Event()

        async def serve() -> None:
            async with manager.run():
                self._manager = manager
                ready.set()
                try:
                    await stop.wait()
                finally:
                    self._manager = None

        task = asyncio.create_task(serve(), name="neens-mcp")
        waiting = asyncio.create_task(ready.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            waiting.cancel()
            await task  # raises why the session manager did not start
        try:
            yield
        finally:
            stop.set()
            await task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            principal = await authenticate(request, request.app.state.db)
        except NeensError as exc:
            await send_error(exc, scope, receive, send)
            return
        if self._manager is None:
            raise RuntimeError("/mcp was called outside the app's lifespan")
        if scope["method"] == "GET":
            # GET would open a server-sent event stream on which a stateless server can never
            # send anything: a connection held open for nothing. The MCP transport's answer for
            # a server that offers no such stream is 405.
            response = JSONResponse(
                error_body(
                    "method_not_allowed",
                    "this MCP endpoint offers no event stream: send JSON-RPC requests with POST",
                    None,
                ),
                405,
                headers={"Allow": "POST"},
            )
            await response(scope, receive, send)
            return
        scope[_PRINCIPAL] = principal
        await self._manager.handle_request(scope, receive, send)
