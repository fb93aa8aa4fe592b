"""A `neens serve` process killed (SIGKILL) in the middle of steady trace ingest loses no span it
acknowledged: a 200 from `/v1/traces` means the spans are committed. On SQLite the write-ahead log
is being checkpointed on its own thread meanwhile (`store.wal_checkpoint`), so the kill also lands
during checkpoints; the file must come out whole and take writes again."""

from __future__ import annotations

import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from neens.store.db import Database
from neens.store.keys import create_key
from tests.support.live import free_port
from tests.support.otlp import agent_trace, export_request
from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.e2e

TRACES_PER_REQUEST = 10
SPANS_PER_TRACE = 5
IN_FLIGHT = 6
KILL_AFTER = 60
"""Acknowledged requests before the kill: about 10 MB of spans, several background checkpoints."""


def _body(padding: int) -> tuple[list[str], bytes]:
    trace_ids, spans = [], []
    for _ in range(TRACES_PER_REQUEST):
        trace_id, trace = agent_trace(prompt="Where is my order? " + "x" * padding)
        trace_ids.append(trace_id.hex())
        spans.extend(trace)
    return trace_ids, export_request(spans).SerializeToString()


@pytest.mark.parametrize("dialect", ["sqlite"])
async def test_a_server_killed_mid_ingest_keeps_every_span_it_acknowledged(
    database_url: str, tmp_path: Path
) -> None:
    db = Database(database_url)
    key = await create_key(db, company="Acme", project="Support agent", role="ingest")
    await db.dispose()
    server = ServerProcess(database_url, free_port(), tmp_path / "serve.log")
    server.start()
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def send(worker: int) -> None:
        headers = {"Authorization": f"Bearer {key.key}", "Content-Type": "application/x-protobuf"}
        with httpx.Client(base_url=server.url, headers=headers) as client:
            while not stop.is_set():
                trace_ids, body = _body(padding=2_000 + worker)
                try:
                    response = client.post("/v1/traces", content=body, timeout=30)
                except httpx.TransportError:
                    return  # the server is gone: this request was never acknowledged
                assert response.status_code == 200, response.text
                assert response.content == b"", response.content  # no span rejected
                with lock:
                    acknowledged.extend(trace_ids)

    try:
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            senders = [pool.submit(send, n) for n in range(IN_FLIGHT)]
            deadline = time.monotonic() + 120
            while len(acknowledged) < KILL_AFTER * TRACES_PER_REQUEST:
                assert time.monotonic() < deadline, "ingest too slow to reach the kill"
                assert not any(s.done() for s in senders), [s.result() for s in senders]
                time.sleep(0.02)
            server.kill()  # requests in flight
            stop.set()
            for sender in senders:
                sender.result()
    finally:
        stop.set()
        server.stop()

    path = database_url.split(":///", 1)[1]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.execute("CREATE TEMP TABLE acked (trace_id TEXT PRIMARY KEY)")
        conn.executemany("INSERT INTO acked VALUES (?)", [(t,) for t in acknowledged])
        stored_sessions, stored_spans = conn.execute(
            "SELECT count(DISTINCT s.pk), count(sp.pk) FROM acked "
            "JOIN sessions s ON s.trace_id = acked.trace_id "
            "JOIN spans sp ON sp.session_pk = s.pk"
        ).fetchone()
    assert stored_sessions == len(acknowledged)
    assert stored_spans == len(acknowledged) * SPANS_PER_TRACE

    # The file takes writes again: a restarted server stores and answers a new trace.
    server.start()
    try:
        trace_ids, body = _body(padding=10)
        headers = {"Authorization": f"Bearer {key.key}", "Content-Type": "application/x-protobuf"}
        response = httpx.post(f"{server.url}/v1/traces", content=body, headers=headers, timeout=30)
        assert response.status_code == 200 and response.content == b""
        with sqlite3.connect(path) as conn:
            (count,) = conn.execute(
                "SELECT count(*) FROM sessions WHERE trace_id = ?", (trace_ids[0],)
            ).fetchone()
        assert count == 1
    finally:
        server.stop()
