"""`/mcp` built on its first request: the `mcp` SDK and the tools take most of a second of CPU to
import, which every `neens serve` start (and every test app) would otherwise pay whether or not
an MCP client ever connects. The endpoint (`http.McpEndpoint`) is imported off the event loop and
its session manager started then, inside the app's lifespan, and stopped with it."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from neens.mcp.http import McpEndpoint


class McpOnDemand:
    """The ASGI app behind `/mcp`: the real endpoint, made on the first request."""

    def __init__(self) -> None:
        self._endpoint: McpEndpoint | None = None
        self._stack: AsyncExitStack | None = None
        self._starting = asyncio.Lock()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The app's lifespan: an endpoint started during it is stopped when it ends."""
        async with AsyncExitStack() as stack:
            self._stack = stack
            try:
                yield
            finally:
                self._stack = None
                self._endpoint = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self._endpoint or await self._start()
        await endpoint(scope, receive, send)

    async def _start(self) -> McpEndpoint:
        async with self._starting:
            if self._endpoint is None:
                http = await asyncio.to_thread(importlib.import_module, "neens.mcp.http")
                if self._stack is None:  # checked after the import: the app may have stopped
                    raise RuntimeError("/mcp was called outside the app's lifespan")
                endpoint: McpEndpoint = http.McpEndpoint()
                await self._stack.enter_async_context(endpoint.running())
                self._endpoint = endpoint
            return self._endpoint
