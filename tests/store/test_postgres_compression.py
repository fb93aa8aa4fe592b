"""On PostgreSQL, large span and session values are compressed with lz4 (migration 0020), which
costs the database server a fraction of pglz's CPU on every ingested span."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import text

from neens.store import migrate
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.conftest import auth
from tests.support.otlp import agent_trace, export_request

PROTO = {"Content-Type": "application/x-protobuf"}


async def test_span_attributes_are_stored_with_lz4(
    client: httpx.AsyncClient,
    db: Database,
    ingest_key: CreatedKey,
    dialect: str,
    database_url: str,
) -> None:
    if dialect != "postgresql":
        pytest.skip("SQLite does not compress values")
    prompt = "Where is order 17? " + "the same words again " * 2_000
    tid, spans = agent_trace(prompt=prompt, answer="It shipped.")
    body = export_request(spans).SerializeToString()
    r = await client.post("/v1/traces", content=body, headers={**auth(ingest_key), **PROTO})
    assert r.status_code == 200
    query = text(
        "SELECT pg_column_compression(spans.attributes) FROM spans "
        "JOIN sessions ON sessions.pk = spans.session_pk "
        "WHERE sessions.trace_id = :t AND spans.name = 'agent.run'"
    )
    async with db.read() as s:
        assert (await s.execute(query, {"t": tid.hex()})).scalar_one() == "lz4"
        columns = await s.execute(
            text(
                "SELECT attname, attcompression FROM pg_attribute "
                "WHERE attrelid = 'spans'::regclass AND attname IN ('attributes', 'events')"
            )
        )
        assert dict(columns.all()) == {"attributes": "l", "events": "l"}
    await migrate.downgrade(database_url, "0019")
    async with db.read() as s:
        method = await s.execute(
            text(
                "SELECT attcompression FROM pg_attribute "
                "WHERE attrelid = 'spans'::regclass AND attname = 'attributes'"
            )
        )
        assert method.scalar_one() == ""  # the server's default again
    await migrate.upgrade(database_url)
