"""The group-commit span writers: every span of concurrent requests stored once, and on
PostgreSQL a trace waiting for its row does not hold up the others."""

from __future__ import annotations

import asyncio
import os
import random

import pytest
from sqlalchemy import text

from neens.domain.spans import SpanRecord
from neens.engine.ingest import POSTGRES_WRITERS, SpanWriter
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.session_reads import get_session
from tests.support.spans import step_span


async def test_concurrent_requests_splitting_traces_store_every_span_once(
    db: Database, ingest_key: CreatedKey
) -> None:
    """Eight traces of six spans, dealt out over 24 requests sent at once (some spans twice, as
    a retrying exporter does): one session per trace, holding each span once."""
    traces = [os.urandom(16).hex() for _ in range(8)]
    spans = [step_span(trace, n) for trace in traces for n in range(6)]
    rng = random.Random(7)
    requests: list[list[SpanRecord]] = [[] for _ in range(24)]
    for span in spans + rng.sample(spans, 12):
        requests[rng.randrange(24)].append(span)
    writer = SpanWriter(db)
    assert writer.writers == (POSTGRES_WRITERS if db.dialect == "postgresql" else 1)
    writer.start()
    try:
        results = await asyncio.gather(
            *(writer.write(ingest_key.project_id, r, "otlp") for r in requests if r)
        )
    finally:
        await writer.stop()
    assert all(not result.rejected for result in results)
    for trace in traces:
        stored = await get_session(db, ingest_key.project_id, trace)
        assert sorted(s.span_id for s in stored.spans) == [f"s{n}" for n in range(6)]
        assert (stored.summary.span_count, stored.summary.agent_name) == (6, "refund-agent")


async def test_on_postgresql_a_trace_waiting_for_its_row_does_not_hold_up_another(
    db: Database, ingest_key: CreatedKey
) -> None:
    if db.dialect != "postgresql":
        pytest.skip("SQLite takes one writer at a time: there, groups wait their turn")
    held, free = os.urandom(16).hex(), os.urandom(16).hex()
    writer = SpanWriter(db)
    writer.start()
    try:
        await writer.write(ingest_key.project_id, [step_span(held, 0)], "otlp")
        async with db.engine.connect() as other:
            await other.execute(
                text("SELECT pk FROM sessions WHERE trace_id = :t FOR UPDATE"), {"t": held}
            )
            waiting = asyncio.create_task(
                writer.write(ingest_key.project_id, [step_span(held, 1)], "otlp")
            )
            await asyncio.sleep(0.5)
            assert not waiting.done(), "the session row is locked: this write must wait"
            # The other writer takes the next request meanwhile.
            result = await asyncio.wait_for(
                writer.write(ingest_key.project_id, [step_span(free, 0)], "otlp"), timeout=10
            )
            assert set(result.summaries) == {free}
            assert not waiting.done()
            await other.rollback()
        await asyncio.wait_for(waiting, timeout=10)
    finally:
        await writer.stop()
    stored = await get_session(db, ingest_key.project_id, held)
    assert stored.summary.span_count == 2
