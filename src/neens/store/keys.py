"""Companies, projects and the `nk_live_…` keys that resolve to them."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import delete, select

from neens.store.db import Database, upsert_insert
from neens.store.ids import new_id
from neens.store.models import ApiKey, Company, PageSignOut, Project
from neens.store.types import utcnow

Role = Literal["ingest", "admin"]
ROLES: tuple[Role, ...] = ("ingest", "admin")
KEY_PREFIX = "nk_live_"


def hash_key(key: str) -> str:
    """SHA-256 of the key. Keys carry 192 random bits, so a fast unsalted hash is enough."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: what a key resolves to."""

    key_id: str
    company_id: str
    project_id: str
    role: Role


@dataclass(frozen=True, slots=True)
class CreatedKey:
    key: str
    key_id: str
    company_id: str
    project_id: str
    role: Role
    new_project: bool = False
    """Whether the project was made for this key (no project had its name in the company)."""


@dataclass(frozen=True, slots=True)
class KeyInfo:
    key_id: str
    display_prefix: str
    company: str
    project: str
    role: str
    created_at: datetime
    revoked_at: datetime | None


async def create_key(db: Database, *, company: str, project: str, role: Role) -> CreatedKey:
    """Create the company and project when missing, then a new key for the project."""
    key = KEY_PREFIX + secrets.token_urlsafe(24)
    async with db.write() as s:
        company_row = await s.scalar(select(Company).where(Company.name == company))
        if company_row is None:
            company_row = Company(id=new_id("co_"), name=company)
            s.add(company_row)
            await s.flush()
        project_row = await s.scalar(
            select(Project).where(Project.company_id == company_row.id, Project.name == project)
        )
        new_project = project_row is None
        if project_row is None:
            project_row = Project(id=new_id("prj_"), company_id=company_row.id, name=project)
            s.add(project_row)
            await s.flush()
        key_row = ApiKey(
            id=new_id("key_"),
            project_id=project_row.id,
            role=role,
            key_hash=hash_key(key),
            display_prefix=key[: len(KEY_PREFIX) + 4] + "…",
        )
        s.add(key_row)
    return CreatedKey(key, key_row.id, company_row.id, project_row.id, role, new_project)


async def list_keys(db: Database) -> list[KeyInfo]:
    async with db.read() as s:
        rows = await s.execute(
            select(ApiKey, Project.name, Company.name)
            .join(Project, Project.id == ApiKey.project_id)
            .join(Company, Company.id == Project.company_id)
            .order_by(ApiKey.created_at)
        )
        return [
            KeyInfo(k.id, k.display_prefix, c, p, k.role, k.created_at, k.revoked_at)
            for k, p, c in rows.all()
        ]


async def keys_matching(db: Database, text: str) -> list[str]:
    """The ids of the keys `text` names: the key whose id it is, else every key whose id starts
    with it (so `keys revoke` takes the first characters `keys list` shows, when unique)."""
    text = text.strip()
    if not text:
        return []
    async with db.read() as s:
        exact = await s.scalar(select(ApiKey.id).where(ApiKey.id == text))
        if exact is not None:
            return [exact]
        rows = await s.scalars(
            select(ApiKey.id)
            .where(ApiKey.id.startswith(text, autoescape=True))
            .order_by(ApiKey.created_at)
        )
        return list(rows)


async def revoke_key(db: Database, key_id: str) -> bool:
    """Revoke a key by id; False when there is no such key. Revoking twice keeps the first time.

    A server that checked the key in the last `KEY_MEMO_SECONDS` still remembers it: the key
    stops working there within that many seconds (at once in this process)."""
    async with db.write() as s:
        row = await s.get(ApiKey, key_id)
        if row is None:
            return False
        if row.revoked_at is None:
            row.revoked_at = utcnow()
        db.memo_forget("key", row.key_hash)
        return True


KEY_MEMO_SECONDS = 5.0
"""How long a server process remembers a resolved key. `neens keys revoke` runs in its own
process, so a running server stops accepting a revoked key within this many seconds."""


async def resolve_key(db: Database, key: str) -> Principal | None:
    """The principal behind a key, or None for an unknown or revoked key."""
    digest = hash_key(key)
    remembered = db.memo_get("key", digest, ttl_s=KEY_MEMO_SECONDS)
    if remembered is not None:
        assert isinstance(remembered, Principal)
        return remembered
    async with db.read() as s:
        row = (
            await s.execute(
                select(ApiKey.id, ApiKey.role, Project.id, Project.company_id)
                .join(Project, Project.id == ApiKey.project_id)
                .where(ApiKey.key_hash == digest, ApiKey.revoked_at.is_(None))
            )
        ).first()
    if row is None:
        return None
    key_id, role, project_id, company_id = row
    if role not in ROLES:
        raise ValueError(f"key {key_id} has an unknown role {role!r} in the database")
    principal = Principal(key_id, company_id, project_id, role)
    db.memo_set("key", digest, principal)
    return principal


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A key as the pages show who is signed in: its principal, names and printable prefix."""

    principal: Principal
    company: str
    project: str
    display_prefix: str


def session_hash(form_token: str) -> str:
    """What is stored of a signed-out page session: the SHA-256 of its form token."""
    return hashlib.sha256(form_token.encode()).hexdigest()


async def signed_in(db: Database, key_id: str, form_token: str | None = None) -> SignedIn | None:
    """The key with id `key_id` while it is valid; None once it is revoked (or never existed),
    or once the page session whose form token is `form_token` was signed out.

    Read from the database on every call, without `resolve_key`'s memory: a page session ends
    on the first request after its key is revoked or it is signed out, in any process."""
    query = (
        select(ApiKey, Project, Company.name)
        .join(Project, Project.id == ApiKey.project_id)
        .join(Company, Company.id == Project.company_id)
        .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
    )
    if form_token is not None:
        signed_out = select(PageSignOut.session_hash).where(
            PageSignOut.session_hash == session_hash(form_token)
        )
        query = query.where(~signed_out.exists())
    async with db.read() as s:
        row = (await s.execute(query)).first()
    if row is None:
        return None
    key, project, company = row
    if key.role not in ROLES:
        raise ValueError(f"key {key.id} has an unknown role {key.role!r} in the database")
    principal = Principal(key.id, project.company_id, project.id, key.role)
    return SignedIn(principal, company, project.name, key.display_prefix)


async def sign_out(db: Database, key_id: str, form_token: str, expires_at: datetime) -> None:
    """Remember that the page session with `form_token` is over, until it would have expired
    anyway; sign-outs already past that are forgotten on the way."""
    async with db.write() as s:
        await s.execute(delete(PageSignOut).where(PageSignOut.expires_at < utcnow()))
        await s.execute(
            upsert_insert(s, PageSignOut)
            .values(session_hash=session_hash(form_token), key_id=key_id, expires_at=expires_at)
            .on_conflict_do_nothing(index_elements=["session_hash"])
        )
