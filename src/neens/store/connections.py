"""Agent connections: the HTTP endpoints Neens calls in push mode."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic.alias_generators import to_camel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.errors import Conflict
from neens.store.db import Database
from neens.store.ids import new_id
from neens.store.models import AgentConnection
from neens.store.sweep_pins import CONNECTION_CONDITIONS, refuse_while_pinned, sweeps_calling
from neens.store.tenancy import CONNECTION, in_project, owned, owned_by
from neens.store.types import utcnow


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    id: str
    name: str
    url: str
    model: str | None
    provider: str
    request_format: str
    answer_path: str | None
    header_names: list[str]
    """The stored headers' names; their values are secret and stay in the store, encrypted."""
    created_at: datetime
    updated_at: datetime
    dropped_header_names: list[str] = field(default_factory=list)
    """Headers an update removed because it changed the URL without setting headers again."""


def _info(row: AgentConnection, dropped: list[str] | None = None) -> ConnectionInfo:
    return ConnectionInfo(
        row.id,
        row.name,
        row.url,
        row.model,
        row.provider,
        row.request_format,
        row.answer_path,
        sorted(row.headers),
        row.created_at,
        row.updated_at,
        dropped or [],
    )


NAME_UNIQUE = "uq_agent_connections_project_id_name"
"""The constraint that keeps connection names unique in a project (`Database.write_unique`)."""


async def _refuse_taken_name(
    s: AsyncSession, project_id: str, name: str, connection_id: str | None
) -> None:
    exists = await s.scalar(
        select(AgentConnection.id).where(
            owned_by(AgentConnection, project_id),
            AgentConnection.name == name,
            AgentConnection.id != (connection_id or ""),
        )
    )
    if exists is not None:
        raise Conflict(
            f"an agent connection named {name!r} already exists ({exists}); pick another name",
            field="name",
        )


async def create_connection(db: Database, project_id: str, **fields: Any) -> ConnectionInfo:
    """Create a connection; its header values are stored encrypted."""
    fields["headers"] = db.secrets.seal_headers(fields.get("headers") or {})

    async def work(s: AsyncSession) -> AgentConnection:
        await _refuse_taken_name(s, project_id, fields["name"], None)
        row = AgentConnection(id=new_id("conn_"), project_id=project_id, **fields)
        s.add(row)
        return row

    return _info(await db.write_unique(work, NAME_UNIQUE))


async def update_connection(
    db: Database, project_id: str, connection_id: str, **fields: Any
) -> ConnectionInfo:
    """Change a connection. A new URL without new headers drops the stored headers: they were
    meant for the old destination, and must not follow the calls to a new one."""
    if fields.get("headers") is not None:
        fields["headers"] = db.secrets.seal_headers(fields["headers"])

    async def work(s: AsyncSession) -> tuple[AgentConnection, list[str]]:
        changes = dict(fields)
        dropped: list[str] = []
        row = await owned(s, CONNECTION, project_id, connection_id)
        changing = sorted(
            name
            for name in CONNECTION_CONDITIONS & changes.keys()
            if changes[name] != getattr(row, name)
        )
        if changing:
            refuse_while_pinned(
                f"connection {row.name!r} ({to_camel(changing[0])})",
                await sweeps_calling(s, project_id, row.id),
                to_camel(changing[0]),
            )
        if "name" in changes and changes["name"] != row.name:
            await _refuse_taken_name(s, project_id, changes["name"], row.id)
        if "url" in changes and changes["url"] != row.url and "headers" not in changes:
            dropped = sorted(row.headers)
            changes["headers"] = {}
        for name, value in changes.items():
            setattr(row, name, value)
        row.updated_at = utcnow()
        return row, dropped

    row, dropped = await db.write_unique(work, NAME_UNIQUE)
    return _info(row, dropped)


async def get_connection(db: Database, project_id: str, connection_id: str) -> ConnectionInfo:
    async with db.read() as s:
        row = await owned(s, CONNECTION, project_id, connection_id)
    return _info(row)


async def list_connections(db: Database, project_id: str) -> list[ConnectionInfo]:
    async with db.read() as s:
        rows = await s.scalars(
            in_project(AgentConnection, project_id).order_by(
                AgentConnection.created_at, AgentConnection.id
            )
        )
        return [_info(r) for r in rows]
