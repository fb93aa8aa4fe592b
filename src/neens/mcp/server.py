"""The MCP server: lists the tools and runs a call, over whichever transport serves it.

A call's arguments are validated by the tool's input model; a refusal comes back as an MCP tool
error (`isError: true`) whose text is the API's own error body, `{"error": {"code", "message",
"field"?}}`, so an agent reads the same message and field a `curl` would. An unexpected failure
is logged under an error id that the tool error quotes, as the API's 500 does.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from neens import __version__
from neens.api.errors import error_body, problems_body
from neens.api.middleware import new_error_id
from neens.errors import NeensError
from neens.mcp.tools import HONESTY, Caller, Toolbox, all_tools

log = logging.getLogger("neens.mcp")

CallerOf = Callable[[ServerRequestContext[Any, Any]], Awaitable[Caller]]
"""Who is calling, from a request's context (the transport decides how: the HTTP request's key,
or the key the stdio process was started with). Raises `NotAuthenticated` for a key that is no
longer valid."""

INSTRUCTIONS = f"""\
Neens evaluates LLM agents. These tools run model sweeps: one frozen golden dataset replayed \
against several models (one arm per agent connection), k times each, under pinned conditions. \
Preview the cost with `sweep_preview`, start with `sweep_start`, poll with `sweep_get` until \
the status is terminal, and list with `sweep_list`. Read which model to ship, at what bar and \
cost, with `sweep_decision`: report its verdict as it says it, never re-ranked. Every tool acts \
in the project of the API key it was given.

{HONESTY}"""


def _tool_error(body: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(body, ensure_ascii=False))], is_error=True
    )


def _located_under_body(error: ValidationError) -> list[Any]:
    return [{**err, "loc": ("body", *err["loc"])} for err in error.errors()]


def _as_argument(model: type[BaseModel], field: str | None) -> str | None:
    """A field the routes' code named (`sweep_id`) as the tool's argument is spelled
    (`sweepId`): an agent passes the name back as it reads it."""
    if field is None:
        return None
    head = re.match(r"[A-Za-z_][A-Za-z0-9_]*", field)
    if head is None or (info := model.model_fields.get(head.group())) is None or not info.alias:
        return field
    return info.alias + field[head.end() :]


def build_server(caller_of: CallerOf, toolbox: Toolbox | None = None) -> Server[Any]:
    """The MCP server of `toolbox` (default: every Neens tool)."""
    tools = toolbox if toolbox is not None else all_tools()

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[spec.tool() for spec in tools.tools.values()])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = tools.tools.get(params.name)
        if spec is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {params.name!r}; the tools are {', '.join(tools.tools)}",
            )
        arguments = params.arguments or {}
        try:
            caller = await caller_of(ctx)
            try:
                body = spec.input_model.model_validate(arguments)
            except ValidationError as exc:
                return _tool_error(problems_body(_located_under_body(exc), arguments))
            out = await spec.run(caller, body)
        except NeensError as exc:
            field = _as_argument(spec.input_model, exc.field)
            return _tool_error(error_body(exc.code, exc.message, field))
        except Exception:
            error_id = new_error_id()
            log.exception("MCP tool %s failed (%s)", spec.name, error_id)
            failure = error_body(
                "internal_error",
                f"the tool failed unexpectedly; quote {error_id} when reporting it",
            )
            failure["error"]["errorId"] = error_id
            return _tool_error(failure)
        structured = out.model_dump(mode="json", by_alias=True)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(structured, ensure_ascii=False))],
            structured_content=structured,
        )

    return Server(
        "neens",
        version=__version__,
        title="Neens",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
