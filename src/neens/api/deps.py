"""Typed dependencies: the database, the settings and the caller's principal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from neens.engine.ingest import SpanWriter
from neens.errors import Forbidden, NotAuthenticated
from neens.queue.worker import Worker
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import Principal, Role, resolve_key


async def get_db(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_span_writer(request: Request) -> SpanWriter:
    writer: SpanWriter = request.app.state.span_writer
    return writer


async def get_worker(request: Request) -> Worker:
    worker: Worker = request.app.state.worker
    return worker


DbDep = Annotated[Database, Depends(get_db)]
SpanWriterDep = Annotated[SpanWriter, Depends(get_span_writer)]
WorkerDep = Annotated[Worker, Depends(get_worker)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


async def bearer_key(request: Request) -> str:
    headers = request.headers.getlist("authorization")
    if len(headers) > 1:
        # Which one a proxy or client meant is not for the server to guess.
        raise NotAuthenticated(
            f"{len(headers)} Authorization headers: send exactly one, "
            "'Authorization: Bearer nk_live_…'",
            field="Authorization",
        )
    header = headers[0] if headers else None
    if not header:
        raise NotAuthenticated(
            "missing Authorization header: send 'Authorization: Bearer nk_live_…'",
            field="Authorization",
        )
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise NotAuthenticated("Authorization header must be 'Bearer <key>'", field="Authorization")
    return key.strip()


async def authenticate(request: Request, db: DbDep) -> Principal:
    principal = await resolve_key(db, await bearer_key(request))
    if principal is None:
        raise NotAuthenticated(
            "unknown or revoked API key: create one with `neens keys create`",
            field="Authorization",
        )
    return principal


class RequireRole:
    """A dependency that admits only keys with one of `roles`. A class rather than a closure, so
    that which roles a route admits can be read off its dependencies (`api.access`)."""

    def __init__(self, *roles: Role) -> None:
        self.roles = roles

    def refusal(self, role: Role) -> Forbidden | None:
        if role in self.roles:
            return None
        return Forbidden(
            f"this route needs a key with role {' or '.join(self.roles)}; this key's role is {role}"
        )

    async def __call__(self, principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if (refusal := self.refusal(principal.role)) is not None:
            raise refusal
        return principal


require_role = RequireRole


AnyKey = Annotated[Principal, Depends(authenticate)]
AdminKey = Annotated[Principal, Depends(require_role("admin"))]


@dataclass(frozen=True, slots=True)
class Ingest:
    """What a trace receiver needs: the caller (any role), the span writer, the job worker to
    wake and the settings."""

    principal: Principal
    writer: SpanWriter
    worker: Worker
    settings: Settings


async def ingest_context(request: Request) -> Ingest:
    """The `Ingest` context as one dependency.

    The receiver is the busiest route, and FastAPI's per-dependency machinery cost more than
    reading four attributes: one dependency instead of five (the key's, the database's and the
    three above) is measurably cheaper per request. The key is still checked before the route's
    body runs, with the same errors as `AnyKey`.
    """
    state = request.app.state
    principal = await authenticate(request, state.db)
    return Ingest(principal, state.span_writer, state.worker, state.settings)


IngestDep = Annotated[Ingest, Depends(ingest_context)]
