"""`neens mcp`: the MCP tools over stdio, for a coding agent that starts Neens as a subprocess.

The process works on the configured database directly, as the key in `NEENS_API_KEY` (its
project and role). The key is checked before serving, and again on each call, so a key revoked
while the agent runs stops working within the key memo's lifetime. The process runs no job
workers: a sweep it starts is run by `neens serve` (or `neens worker`) on the same database,
which picks the work up by polling.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from neens.errors import NotAuthenticated
from neens.mcp.server import build_server
from neens.mcp.tools import Caller
from neens.secrets import load_secret_box
from neens.settings import Settings
from neens.store import migrate
from neens.store.db import Database
from neens.store.keys import Principal, resolve_key

REVOKED = "the API key in NEENS_API_KEY is unknown or revoked: create one with `neens keys create`"


def _no_wake() -> None:
    """The workers are in another process; they find new work by polling."""


async def check_key(settings: Settings, key: str) -> Principal | None:
    """The principal of `key` on the configured database, or None (the database migrated
    first when the settings say so, as `neens serve` does)."""
    if settings.migrate_on_start:
        await migrate.upgrade(settings.resolved_database_url())
    db = Database(settings.resolved_database_url())
    try:
        return await resolve_key(db, key)
    finally:
        await db.dispose()


async def serve_stdio(settings: Settings, key: str) -> None:
    """Serve MCP on stdin/stdout until the client closes them."""
    db = Database(settings.resolved_database_url())
    db.secrets = load_secret_box(settings)

    async def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
        principal = await resolve_key(db, key)
        if principal is None:
            raise NotAuthenticated(REVOKED, field="NEENS_API_KEY")
        return Caller(db, settings, principal, _no_wake)

    server = build_server(caller_of)
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await db.dispose()
