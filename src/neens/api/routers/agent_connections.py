"""`/agent-connections`: the agent endpoints Neens calls in push mode."""

from __future__ import annotations

from fastapi import APIRouter

from neens.api.deps import AdminKey, DbDep, SettingsDep
from neens.api.schemas.agent_connections import (
    ConnectionCreate,
    ConnectionList,
    ConnectionOut,
    ConnectionUpdate,
    ConnectionUpdated,
)
from neens.engine.destinations import check_url
from neens.store import connections as store

router = APIRouter(prefix="/agent-connections", tags=["agent-connections"])


def connection_out(info: store.ConnectionInfo) -> ConnectionOut:
    return ConnectionOut(
        id=info.id,
        name=info.name,
        url=info.url,
        model=info.model,
        provider=info.provider,
        request_format=info.request_format,
        answer_path=info.answer_path,
        header_names=info.header_names,
        created_at=info.created_at,
        updated_at=info.updated_at,
    )


@router.post("", status_code=201, operation_id="agent_connections-create")
async def create_connection(
    body: ConnectionCreate, principal: AdminKey, db: DbDep, settings: SettingsDep
) -> ConnectionOut:
    check_url(str(body.url), allow_private=settings.allow_private_destinations, field="url")
    info = await store.create_connection(
        db,
        principal.project_id,
        name=body.name,
        url=str(body.url),
        model=body.model,
        provider=body.provider,
        request_format=body.request_format,
        answer_path=body.answer_path,
        headers=body.headers,
    )
    return connection_out(info)


@router.get("", operation_id="agent_connections-list")
async def list_connections(principal: AdminKey, db: DbDep) -> ConnectionList:
    infos = await store.list_connections(db, principal.project_id)
    return ConnectionList(agent_connections=[connection_out(i) for i in infos])


@router.get("/{connection_id}", operation_id="agent_connections-get")
async def get_connection(connection_id: str, principal: AdminKey, db: DbDep) -> ConnectionOut:
    return connection_out(await store.get_connection(db, principal.project_id, connection_id))


@router.patch("/{connection_id}", operation_id="agent_connections-update")
async def update_connection(
    connection_id: str,
    body: ConnectionUpdate,
    principal: AdminKey,
    db: DbDep,
    settings: SettingsDep,
) -> ConnectionUpdated:
    """Change a connection. Runs already created keep the model and provider they copied. A new
    `url` without `headers` drops the stored headers (listed in `droppedHeaderNames`)."""
    fields = body.model_dump(exclude_unset=True)
    if "url" in fields:
        fields["url"] = str(fields["url"])
        check_url(fields["url"], allow_private=settings.allow_private_destinations, field="url")
    info = await store.update_connection(db, principal.project_id, connection_id, **fields)
    return ConnectionUpdated(
        **connection_out(info).model_dump(), dropped_header_names=info.dropped_header_names
    )
