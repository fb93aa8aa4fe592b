"""A database that is busy or out of reach answers 503 with `Retry-After`, which clients (the
OpenTelemetry exporters among them: they retry 429, 502, 503 and 504 only) retry; a 500 made
an exporter drop the spans it had sent."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from neens.api.app import create_app
from neens.settings import Settings
from neens.store import db as db_module
from neens.store.db import Database
from neens.store.keys import create_key
from tests.conftest import _pg_admin, auth
from tests.support.otlp import agent_trace, export_request

PROTO = {"Content-Type": "application/x-protobuf"}


@asynccontextmanager
async def _client(db: Database, url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(database_url=url, migrate_on_start=False), database=db)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            yield c


@pytest.mark.parametrize("dialect", ["sqlite"])
async def test_a_write_locked_out_past_the_busy_timeout_is_503_and_its_retry_stores_it(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_module, "SQLITE_BUSY_TIMEOUT_MS", 300)
    db = Database(database_url)
    try:
        key = await create_key(db, company="Acme", project="Support agent", role="ingest")
        trace_id, spans = agent_trace()
        body = export_request(spans).SerializeToString()
        holder = sqlite3.connect(database_url.split(":///", 1)[1], isolation_level=None)
        async with _client(db, database_url) as client:
            holder.execute("BEGIN EXCLUSIVE")
            try:
                r = await client.post("/v1/traces", content=body, headers={**auth(key), **PROTO})
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            assert r.status_code == 503, r.text
            assert r.headers["retry-after"] == "1"
            error = r.json()["error"]
            assert error["code"] == "unavailable"
            assert "database is locked" in error["message"]
            assert "errorId" not in error

            r = await client.post("/v1/traces", content=body, headers={**auth(key), **PROTO})
            assert r.status_code == 200, r.text
            r = await client.get(f"/sessions/{trace_id.hex()}", headers=auth(key))
            assert r.status_code == 200 and r.json()["stepCount"] == 4, r.text
    finally:
        await db.dispose()


@pytest.mark.parametrize("dialect", ["postgresql"])
async def test_a_postgresql_database_refusing_connections_is_503_on_every_route(
    database_url: str,
) -> None:
    """Its connections cut and new ones refused (as while PostgreSQL restarts): routes answer
    503 with `Retry-After`, and work again once it is back."""
    db = Database(database_url)
    name = database_url.rsplit("/", 1)[1]
    admin = _pg_admin()
    try:
        key = await create_key(db, company="Acme", project="Support agent", role="ingest")
        async with _client(db, database_url) as client:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            try:
                for path in ("/sessions", "/datasets"):
                    r = await client.get(path, headers=auth(key))
                    assert r.status_code == 503, r.text
                    assert r.headers["retry-after"] == "1"
                    assert r.json()["error"]["code"] == "unavailable"
            finally:
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            r = await client.get("/sessions", headers=auth(key))
            assert r.status_code == 200, r.text
    finally:
        admin.close()
        await db.dispose()


def test_a_database_error_that_retrying_would_not_mend_stays_a_500() -> None:
    from sqlalchemy.exc import OperationalError

    from neens.store.busy import busy_database_reason

    missing = OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: runs"))
    locked = OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
    assert busy_database_reason(missing) is None
    assert busy_database_reason(locked) == "database is locked"
    try:
        raise RuntimeError("while writing") from locked
    except RuntimeError as wrapped:
        assert busy_database_reason(wrapped) == "database is locked"
