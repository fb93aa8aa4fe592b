"""`/mcp` made on its first request (`neens.mcp.on_demand`): only inside the app's lifespan."""

from __future__ import annotations

import pytest
from starlette.types import Message

from neens.mcp.on_demand import McpOnDemand


async def receive() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def send(message: Message) -> None:
    raise AssertionError(f"nothing is sent outside the lifespan, got {message['type']}")


async def test_a_request_outside_the_apps_lifespan_is_refused() -> None:
    mcp = McpOnDemand()
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
    with pytest.raises(RuntimeError, match="outside the app's lifespan"):
        await mcp(scope, receive, send)
    async with mcp.running():
        pass
    with pytest.raises(RuntimeError, match="outside the app's lifespan"):
        await mcp(scope, receive, send)
