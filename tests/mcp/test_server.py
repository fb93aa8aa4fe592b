"""The MCP server's own behaviour, in process: a tool's unexpected failure is an error quoting
the id its traceback is logged under; an unknown tool is a protocol error naming the tools."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from neens.mcp.server import build_server
from neens.mcp.tools import Caller, Toolbox, ToolSpec, all_tools
from tests.mcp.conftest import tool_error


class Nothing(BaseModel):
    pass


async def _fails(caller: Caller, body: Nothing) -> BaseModel:
    raise RuntimeError("disk on fire")


async def _anyone(ctx: Any) -> Caller:
    return Caller(db=None, settings=None, principal=None, wake_worker=lambda: None)  # type: ignore[arg-type]


async def test_an_unexpected_failure_quotes_the_logged_error_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    toolbox = Toolbox()
    toolbox.add(ToolSpec("boom", "Boom", "Fails.", Nothing, Nothing, _fails, read_only=True))
    with caplog.at_level(logging.ERROR, logger="neens.mcp"):
        async with Client(build_server(_anyone, toolbox)) as client:
            error = tool_error(await client.call_tool("boom", {}))
    assert error["error"]["code"] == "internal_error"
    error_id = error["error"]["errorId"]
    assert error_id.startswith("err_") and error_id in error["error"]["message"]
    assert "disk on fire" not in error["error"]["message"], "internals stay in the log"
    [record] = [r for r in caplog.records if error_id in r.getMessage()]
    assert record.exc_info is not None and "disk on fire" in str(record.exc_info[1])


async def test_an_unknown_tool_is_a_protocol_error_naming_the_tools() -> None:
    async with Client(build_server(_anyone)) as client:
        with pytest.raises(MCPError, match="unknown tool 'sweep_decide'.*sweep_preview"):
            await client.call_tool("sweep_decide", {})


def test_every_tool_has_an_object_schema_for_its_input_and_output() -> None:
    for spec in all_tools().tools.values():
        tool = spec.tool()
        assert tool.input_schema["type"] == "object", spec.name
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
