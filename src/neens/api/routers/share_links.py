"""`/share-links`: turn sharing on or off, make, list and revoke links; `/share/{token}`: what a
link shows, read-only and redacted, with no key."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request

from neens.api.deps import AdminKey, AnyKey, DbDep, SettingsDep
from neens.api.errors import ErrorEnvelope
from neens.api.schemas.share import (
    ShareLinkIn,
    ShareLinkList,
    ShareLinkOut,
    ShareSettingsIn,
    ShareSettingsOut,
)
from neens.store import share_links as store
from neens.views.share import check_shareable, shared_result

router = APIRouter(tags=["share-links"])


def _out(info: store.LinkInfo, url: str | None = None) -> ShareLinkOut:
    return ShareLinkOut(
        id=info.id,
        resource_type=info.resource_type,
        resource_id=info.resource_id,
        url=url,
        created_at=info.created_at,
        expires_at=info.expires_at,
        revoked_at=info.revoked_at,
    )


@router.get("/share-links/settings", operation_id="share_links-get_settings")
async def get_settings(principal: AnyKey, db: DbDep) -> ShareSettingsOut:
    """Whether this agent's results may be shared by public link."""
    return ShareSettingsOut(enabled=await store.sharing_enabled(db, principal.project_id))


@router.put("/share-links/settings", operation_id="share_links-put_settings")
async def put_settings(body: ShareSettingsIn, principal: AdminKey, db: DbDep) -> ShareSettingsOut:
    """Turn sharing on or off (admin key). Off, no link can be made and every link stops
    working until it is turned on again."""
    await store.set_sharing(db, principal.project_id, body.enabled)
    return ShareSettingsOut(enabled=body.enabled)


@router.post("/share-links", status_code=201, operation_id="share_links-create")
async def create_link(
    body: ShareLinkIn, principal: AnyKey, db: DbDep, settings: SettingsDep, request: Request
) -> ShareLinkOut:
    """A read-only, redacted, expiring public link to one result; 403 while sharing is off."""
    await check_shareable(db, principal.project_id, body.resource_type, body.resource_id)
    made = await store.create_link(
        db,
        principal.project_id,
        body.resource_type,
        body.resource_id,
        timedelta(hours=body.ttl_hours),
    )
    base = (settings.public_url or str(request.base_url)).rstrip("/")
    return _out(made.info, f"{base}/share/{made.token}")


@router.get("/share-links", operation_id="share_links-list")
async def list_links(principal: AnyKey, db: DbDep) -> ShareLinkList:
    """The agent's links, newest first (their URLs are not stored, so not listed)."""
    return ShareLinkList(links=[_out(i) for i in await store.list_links(db, principal.project_id)])


@router.post("/share-links/{link_id}/revoke", operation_id="share_links-revoke")
async def revoke_link(link_id: str, principal: AnyKey, db: DbDep) -> ShareLinkOut:
    """Stop a link working for good (it then answers 410)."""
    return _out(await store.revoke_link(db, principal.project_id, link_id))


@router.get(
    "/share/{token}",
    operation_id="share_links-shared",
    responses={
        410: {
            "model": ErrorEnvelope,
            "description": "The link expired, was revoked, or its agent turned sharing off.",
        }
    },
)
async def shared(token: str, db: DbDep) -> dict[str, Any]:
    """What a share link shows, with no key: read-only and redacted (docs/decisions.md lists
    what is kept). 404 for a link Neens never made; 410 once expired, revoked or turned off."""
    return await shared_result(db, token)
