"""`POST /v1/logs` with a record nested deeper than the parsers take: that record is refused in
the OTLP partial success and the rest are kept, in both encodings, plain or gzip, as
`/v1/traces` does for spans (no JSON depth guard in front of it refuses the whole body)."""

from __future__ import annotations

import gzip
import json
import os

import httpx
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from sqlalchemy import func, select

from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import LogEvent
from tests.conftest import auth
from tests.ingest.test_otlp_logs import QUESTION, model_call
from tests.ingest.test_otlp_logs_depth import (
    DEEP_REASON,
    SPAN_ID,
    TRACE_ID,
    USER,
    good_json_record,
    json_record,
    protobuf_record,
    protobuf_request,
)


def _ours(raw: bytes, tid: bytes, chat: bytes) -> bytes:
    """An encoded record from the unit tests' helpers, naming this test's span instead."""
    return raw.replace(TRACE_ID, tid).replace(SPAN_ID, chat)


def _json_body(tid: bytes, chat: bytes) -> bytes:
    """A record nesting 200 levels in its body, then a good content event."""
    records = [json_record(USER, where="body"), good_json_record()]
    for record in records:
        record.update(traceId=tid.hex(), spanId=chat.hex())
    return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}).encode()


def _protobuf_body(tid: bytes, chat: bytes) -> bytes:
    """A record nesting 200 levels in an attribute, then a good content event."""
    deep = protobuf_record(USER, where="attributes")
    good = protobuf_record(USER, body=QUESTION)
    return protobuf_request([_ours(deep, tid, chat), _ours(good, tid, chat)])


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("encoding", ["json", "protobuf"])
async def test_a_log_record_too_deep_is_refused_alone_and_the_good_event_attached(
    client: httpx.AsyncClient, ingest_key: CreatedKey, db: Database, encoding: str, gzipped: bool
) -> None:
    tid, root, chat = os.urandom(16), os.urandom(8), os.urandom(8)
    headers = {**auth(ingest_key), "Content-Type": "application/x-protobuf"}
    r = await client.post("/v1/traces", content=model_call(tid, root, chat), headers=headers)
    assert r.status_code == 200, r.text
    if encoding == "json":
        body = _json_body(tid, chat)
        headers["Content-Type"] = "application/json"
    else:
        body = _protobuf_body(tid, chat)
    if gzipped:
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"

    r = await client.post("/v1/logs", content=body, headers=headers)

    assert r.status_code == 200, r.text
    message = f"1 log record rejected: log record '{USER}' {DEEP_REASON}"
    if encoding == "json":
        assert r.headers["content-type"] == "application/json"
        partial = r.json()["partialSuccess"]
        assert partial == {"rejectedLogRecords": "1", "errorMessage": message}
    else:
        assert r.headers["content-type"] == "application/x-protobuf"
        response = ExportLogsServiceResponse.FromString(r.content).partial_success
        assert (response.rejected_log_records, response.error_message) == (1, message)
    async with db.read() as s:
        assert await s.scalar(select(func.count()).select_from(LogEvent)) == 1
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    [agent] = session["spans"]
    [call] = agent["children"]
    assert [(e["name"], e["body"]) for e in call["events"]] == [(USER, {"content": QUESTION})]
    assert session["input"] == QUESTION
