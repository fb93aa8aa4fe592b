"""Public, read-only, expiring links to one result of a project.

A link is a random token; only its SHA-256 is stored, so the table cannot be read back into
working links. A link answers only while its project allows sharing, before it expires and
until it is revoked; after that it is gone (410), and a token Neens never made is not found.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select

from neens.errors import Forbidden, Gone, NotFound
from neens.store.db import Database, upsert_insert
from neens.store.ids import new_id
from neens.store.models import ShareLink, ShareSettings
from neens.store.tenancy import SHARE_LINK, in_project, owned, owned_by
from neens.store.types import utcnow

TOKEN_BYTES = 24
"""192 random bits per token."""


@dataclass(frozen=True, slots=True)
class LinkInfo:
    id: str
    resource_type: str
    resource_id: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class NewLink:
    info: LinkInfo
    token: str
    """Shown once, in the URL; never stored."""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _info(row: ShareLink) -> LinkInfo:
    return LinkInfo(
        row.id, row.resource_type, row.resource_id, row.created_at, row.expires_at, row.revoked_at
    )


async def sharing_enabled(db: Database, project_id: str) -> bool:
    async with db.read() as s:
        return bool(
            await s.scalar(select(ShareSettings.enabled).where(owned_by(ShareSettings, project_id)))
        )


async def set_sharing(db: Database, project_id: str, enabled: bool) -> None:
    """One statement, so two first settings of a project at once cannot both insert its row."""
    values = {"enabled": enabled, "updated_at": utcnow()}
    async with db.write() as s:
        await s.execute(
            upsert_insert(s, ShareSettings)
            .values(project_id=project_id, **values)
            .on_conflict_do_update(index_elements=["project_id"], set_=values)
        )


async def create_link(
    db: Database, project_id: str, resource_type: str, resource_id: str, ttl: timedelta
) -> NewLink:
    """A new link; refused (403) while the project does not allow sharing. The caller checks
    that the resource exists in the project."""
    if not await sharing_enabled(db, project_id):
        raise Forbidden(
            "sharing is turned off for this agent: an admin turns it on with "
            'PUT /share-links/settings {"enabled": true}'
        )
    token = secrets.token_urlsafe(TOKEN_BYTES)
    now = utcnow()
    row = ShareLink(
        id=new_id("shl_"),
        project_id=project_id,
        resource_type=resource_type,
        resource_id=resource_id,
        token_hash=_hash(token),
        created_at=now,
        expires_at=now + ttl,
    )
    async with db.write() as s:
        s.add(row)
    return NewLink(_info(row), token)


async def list_links(db: Database, project_id: str) -> list[LinkInfo]:
    """The project's links, newest first, revoked and expired ones included."""
    async with db.read() as s:
        rows = await s.scalars(
            in_project(ShareLink, project_id).order_by(
                ShareLink.created_at.desc(), ShareLink.id.desc()
            )
        )
        return [_info(row) for row in rows]


async def revoke_link(db: Database, project_id: str, link_id: str) -> LinkInfo:
    """Revoke a link (once: revoking again changes nothing)."""
    async with db.write() as s:
        row = await owned(s, SHARE_LINK, project_id, link_id, for_update=True)
        if row.revoked_at is None:
            row.revoked_at = utcnow()
        return _info(row)


@dataclass(frozen=True, slots=True)
class OpenedLink:
    project_id: str
    resource_type: str
    resource_id: str
    expires_at: datetime


async def open_link(db: Database, token: str) -> OpenedLink:
    """What a public token shows, or why it shows nothing: 404 for a token Neens never made, 410
    once it expired or was revoked or its project turned sharing off."""
    async with db.read() as s:
        row = await s.scalar(select(ShareLink).where(ShareLink.token_hash == _hash(token)))
        if row is None:
            raise NotFound("no shared result here: check the link", field="token")
        enabled = await s.scalar(
            select(ShareSettings.enabled).where(owned_by(ShareSettings, row.project_id))
        )
    if row.revoked_at is not None:
        raise Gone("this link was revoked", field="token")
    if row.expires_at <= utcnow():
        raise Gone(f"this link expired at {row.expires_at.isoformat()}", field="token")
    if not enabled:
        raise Gone("sharing was turned off for the agent this link belongs to", field="token")
    return OpenedLink(row.project_id, row.resource_type, row.resource_id, row.expires_at)
