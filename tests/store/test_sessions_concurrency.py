"""Writers in separate processes (here: separate engines) adding spans to one trace at once."""

from __future__ import annotations

import asyncio
import os

from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.session_reads import get_session
from neens.store.sessions import write_spans
from tests.support.spans import step_span


async def test_three_servers_writing_one_trace_at_once_make_one_session_with_everystep_span(
    database_url: str, ingest_key: CreatedKey
) -> None:
    trace_id = os.urandom(16).hex()
    servers = [Database(database_url) for _ in range(3)]
    try:
        await asyncio.gather(
            *(
                write_spans(
                    servers[n % 3], ingest_key.project_id, [step_span(trace_id, n)], source="otlp"
                )
                for n in range(9)
            )
        )
        stored = await get_session(servers[0], ingest_key.project_id, trace_id)
    finally:
        for server in servers:
            await server.dispose()
    assert stored.summary.span_count == 9
    assert stored.summary.step_count == 8
    assert stored.summary.agent_name == "refund-agent"
    assert sorted(s.span_id for s in stored.spans) == sorted(f"s{n}" for n in range(9))
