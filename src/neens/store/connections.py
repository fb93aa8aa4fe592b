"""Agent connections: the HTTP endpoints Neens calls in push mode."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from neens.errors import Conflict, NotFound
from neens.store.db import Database
from neens.store.ids import new_id
from neens.store.models import AgentConnection
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
    headers: dict[str, str]
    """Including secrets: for calling the endpoint only, never for responses."""
    created_at: datetime
    updated_at: datetime


def _info(row: AgentConnection) -> ConnectionInfo:
    return ConnectionInfo(
        row.id,
        row.name,
        row.url,
        row.model,
        row.provider,
        row.request_format,
        row.answer_path,
        dict(row.headers),
        row.created_at,
        row.updated_at,
    )


async def create_connection(db: Database, project_id: str, **fields: Any) -> ConnectionInfo:
    async with db.write() as s:
        exists = await s.scalar(
            select(AgentConnection.id).where(
                AgentConnection.project_id == project_id, AgentConnection.name == fields["name"]
            )
        )
        if exists is not None:
            raise Conflict(
                f"an agent connection named {fields['name']!r} already exists ({exists})",
                field="name",
            )
        row = AgentConnection(id=new_id("conn_"), project_id=project_id, **fields)
        s.add(row)
    return _info(row)


async def update_connection(
    db: Database, project_id: str, connection_id: str, **fields: Any
) -> ConnectionInfo:
    async with db.write() as s:
        row = await s.scalar(
            select(AgentConnection).where(
                AgentConnection.id == connection_id, AgentConnection.project_id == project_id
            )
        )
        if row is None:
            raise NotFound(f"no agent connection {connection_id!r}", field="connection_id")
        for name, value in fields.items():
            setattr(row, name, value)
        row.updated_at = utcnow()
    return _info(row)


async def get_connection(db: Database, project_id: str, connection_id: str) -> ConnectionInfo:
    async with db.read() as s:
        row = await s.scalar(
            select(AgentConnection).where(
                AgentConnection.id == connection_id, AgentConnection.project_id == project_id
            )
        )
    if row is None:
        raise NotFound(
            f"no agent connection {connection_id!r} in this project", field="agent_connection_id"
        )
    return _info(row)


async def list_connections(db: Database, project_id: str) -> list[ConnectionInfo]:
    async with db.read() as s:
        rows = await s.scalars(
            select(AgentConnection)
            .where(AgentConnection.project_id == project_id)
            .order_by(AgentConnection.created_at, AgentConnection.id)
        )
        return [_info(r) for r in rows]
