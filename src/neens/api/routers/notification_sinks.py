"""`/notification-sinks`: webhooks insights are delivered to, with each delivery's record."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Query, Response

from neens.api.deps import AdminKey, DbDep, SettingsDep
from neens.api.paging import cursor_query, decode_cursor, next_cursor
from neens.api.schemas.insights import DeliveryList, DeliveryOut, SinkCreate, SinkList, SinkOut
from neens.engine.destinations import check_url
from neens.store import insights as store

router = APIRouter(prefix="/notification-sinks", tags=["notification-sinks"])

_DELIVERIES = "deliveries"
"""The tag of this list's cursors."""


@router.post("", status_code=201, operation_id="notification_sinks-create")
async def create_sink(
    body: SinkCreate, principal: AdminKey, db: DbDep, settings: SettingsDep
) -> SinkOut:
    check_url(str(body.url), allow_private=settings.allow_private_destinations, field="url")
    info = await store.create_sink(
        db, principal.project_id, name=body.name, url=str(body.url), headers=body.headers
    )
    return SinkOut(**asdict(info))


@router.get("", operation_id="notification_sinks-list")
async def list_sinks(principal: AdminKey, db: DbDep) -> SinkList:
    infos = await store.list_sinks(db, principal.project_id)
    return SinkList(notification_sinks=[SinkOut(**asdict(i)) for i in infos])


@router.delete("/{sink_id}", status_code=204, operation_id="notification_sinks-delete")
async def delete_sink(sink_id: str, principal: AdminKey, db: DbDep) -> Response:
    """Stop delivering to this sink: it and the record of its deliveries are removed, and
    insights raised from now on are not sent to it. A delivery being sent as it is removed may
    still arrive once."""
    await store.delete_sink(db, principal.project_id, sink_id)
    return Response(status_code=204)


@router.get("/{sink_id}/deliveries", operation_id="notification_sinks-deliveries")
async def list_deliveries(
    sink_id: str,
    principal: AdminKey,
    db: DbDep,
    limit: int = Query(default=100, ge=1, le=1000, description="Deliveries per page."),
    cursor: str | None = cursor_query(),
) -> DeliveryList:
    """Every delivery to this sink, oldest first: delivered, still being retried, or failed for
    good. Pass `nextCursor` back as `cursor` for the next page."""
    after = decode_cursor(_DELIVERIES, cursor, (int,), db.secrets)
    infos, end = await store.list_deliveries(
        db, principal.project_id, sink_id, limit=limit, after=after[0] if after else None
    )
    return DeliveryList(
        deliveries=[
            DeliveryOut(**{k: v for k, v in asdict(i).items() if k != "sink_id"}) for i in infos
        ],
        next_cursor=next_cursor(_DELIVERIES, None if end is None else (end,), db.secrets),
    )
