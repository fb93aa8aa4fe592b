"""`POST /v1/logs`: GenAI content events attach to their span whichever arrives first; other log
records are acknowledged and not stored."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from sqlalchemy import func, select

from neens.errors import InvalidInput
from neens.ingest.otlp_logs import decode_logs_json, decode_logs_protobuf
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import LogEvent
from tests.conftest import auth
from tests.support.otlp import T0, any_value, export_request, key_values, span

PROTO = {"Content-Type": "application/x-protobuf"}
QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris."


def log_record(
    trace_id: bytes, span_id: bytes, name: str, body: Any = None, **attributes: Any
) -> LogRecord:
    record = LogRecord(
        time_unix_nano=T0,
        trace_id=trace_id,
        span_id=span_id,
        event_name=name,
        attributes=key_values(attributes),
    )
    if body is not None:
        record.body.CopyFrom(any_value(body))
    return record


def logs_request(records: list[LogRecord]) -> ExportLogsServiceRequest:
    return ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=records)])]
    )


def model_call(
    tid: bytes, root: bytes, chat: bytes, root_attributes: dict[str, Any] | None = None
) -> bytes:
    """An agent span (with `root_attributes`, by default its GenAI operation) and a model call
    that carries no content, only usage."""
    if root_attributes is None:
        root_attributes = {"gen_ai.operation.name": "invoke_agent"}
    spans = [
        span(tid, root, "invoke_agent weather-agent", end_ms=100, **root_attributes),
        span(
            tid,
            chat,
            "chat gpt-4o",
            parent=root,
            start_ms=10,
            end_ms=90,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 100,
                "gen_ai.usage.output_tokens": 10,
            },
        ),
    ]
    return export_request(spans).SerializeToString()


def content_events(tid: bytes, chat: bytes) -> list[LogRecord]:
    return [
        log_record(tid, chat, "gen_ai.system.message", {"content": "Answer briefly."}),
        log_record(tid, chat, "gen_ai.user.message", {"content": QUESTION}),
        log_record(
            tid,
            chat,
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"content": ANSWER}},
        ),
    ]


async def _post(
    client: httpx.AsyncClient, key: CreatedKey, path: str, body: bytes, **headers: str
) -> httpx.Response:
    return await client.post(path, content=body, headers={**auth(key), **PROTO, **headers})


@pytest.mark.parametrize("logs_first", [False, True], ids=["span-first", "logs-first"])
async def test_content_events_attach_to_their_span_whichever_arrives_first(
    client: httpx.AsyncClient, ingest_key: CreatedKey, logs_first: bool
) -> None:
    tid, root, chat = os.urandom(16), os.urandom(8), os.urandom(8)
    logs = logs_request(content_events(tid, chat)).SerializeToString()
    sends = [("/v1/traces", model_call(tid, root, chat)), ("/v1/logs", logs)]
    for path, body in reversed(sends) if logs_first else sends:
        r = await _post(client, ingest_key, path, body)
        assert r.status_code == 200, r.text
        if path == "/v1/logs":
            assert r.headers["content-type"] == "application/x-protobuf"
            assert not ExportLogsServiceResponse.FromString(r.content).HasField("partial_success")

    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()

    assert (session["input"], session["output"]) == (QUESTION, ANSWER)
    assert session["agentName"] == "weather-agent"
    [agent] = session["spans"]
    [call] = agent["children"]
    assert [e["name"] for e in call["events"]] == [
        "gen_ai.system.message",
        "gen_ai.user.message",
        "gen_ai.choice",
    ]
    assert call["events"][1]["body"] == {"content": QUESTION}


async def test_operation_details_event_in_json_with_gzip_fills_the_session(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid, root, chat = os.urandom(16), os.urandom(8), os.urandom(8)
    await _post(client, ingest_key, "/v1/traces", model_call(tid, root, chat))
    document = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": str(T0),
                                "eventName": "gen_ai.client.inference.operation.details",
                                "traceId": tid.hex(),
                                "spanId": chat.hex(),
                                "attributes": [
                                    {
                                        "key": "gen_ai.input.messages",
                                        "value": {
                                            "stringValue": json.dumps(
                                                [
                                                    {
                                                        "role": "user",
                                                        "parts": [
                                                            {"type": "text", "content": QUESTION}
                                                        ],
                                                    }
                                                ]
                                            )
                                        },
                                    },
                                    {
                                        "key": "gen_ai.output.messages",
                                        "value": {
                                            "stringValue": json.dumps(
                                                [
                                                    {
                                                        "role": "assistant",
                                                        "parts": [
                                                            {"type": "text", "content": ANSWER}
                                                        ],
                                                    }
                                                ]
                                            )
                                        },
                                    },
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }

    r = await client.post(
        "/v1/logs",
        content=gzip.compress(json.dumps(document).encode()),
        headers={
            **auth(ingest_key),
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
        },
    )

    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {}
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert (session["input"], session["output"]) == (QUESTION, ANSWER)


async def test_other_log_records_are_acknowledged_and_not_stored(
    client: httpx.AsyncClient, ingest_key: CreatedKey, db: Database
) -> None:
    tid, chat = os.urandom(16), os.urandom(8)
    plain = LogRecord(time_unix_nano=T0, trace_id=tid, span_id=chat, severity_text="INFO")
    plain.body.CopyFrom(any_value("GET /health 200"))
    named = log_record(tid, chat, "http.request")

    r = await _post(
        client, ingest_key, "/v1/logs", logs_request([plain, named]).SerializeToString()
    )

    assert r.status_code == 200
    assert not ExportLogsServiceResponse.FromString(r.content).HasField("partial_success")
    async with db.read() as s:
        assert await s.scalar(select(func.count()).select_from(LogEvent)) == 0


async def test_a_content_event_naming_no_span_is_rejected_and_the_rest_kept(
    client: httpx.AsyncClient, ingest_key: CreatedKey, db: Database
) -> None:
    tid, chat = os.urandom(16), os.urandom(8)
    orphan = log_record(b"", b"", "gen_ai.user.message", {"content": QUESTION})
    nul = log_record(tid, chat, "gen_ai.user.message", {"content": "a\x00b"})
    good = log_record(tid, chat, "gen_ai.user.message", {"content": QUESTION})

    r = await _post(
        client, ingest_key, "/v1/logs", logs_request([orphan, nul, good]).SerializeToString()
    )

    assert r.status_code == 200
    partial = ExportLogsServiceResponse.FromString(r.content).partial_success
    assert partial.rejected_log_records == 2
    assert partial.error_message.startswith("2 log records rejected: log record ")
    assert "has no trace id, so it names no span to attach to" in partial.error_message
    assert "contains a NUL character" in partial.error_message
    async with db.read() as s:
        assert await s.scalar(select(func.count()).select_from(LogEvent)) == 1


async def test_logs_need_a_key_and_an_otlp_content_type(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    body = logs_request([]).SerializeToString()

    no_key = await client.post("/v1/logs", content=body, headers=PROTO)
    text = await client.post(
        "/v1/logs", content=body, headers={**auth(ingest_key), "Content-Type": "text/plain"}
    )
    corrupt = await _post(client, ingest_key, "/v1/logs", b"\xff\xff\xff")

    assert no_key.status_code == 401
    assert text.status_code == 415
    assert corrupt.status_code == 400
    assert "ExportLogsServiceRequest" in corrupt.json()["error"]["message"]


async def test_logs_over_the_size_cap_are_refused(
    client: httpx.AsyncClient, ingest_key: CreatedKey, settings: Any
) -> None:
    body = b"\x00" * (settings.max_request_bytes + 1)

    r = await _post(client, ingest_key, "/v1/logs", body)

    assert r.status_code == 413


def test_event_name_is_read_from_the_older_event_name_attribute() -> None:
    record = LogRecord(
        trace_id=os.urandom(16),
        span_id=os.urandom(8),
        attributes=key_values({"event.name": "gen_ai.user.message"}),
    )

    decoded = decode_logs_protobuf(logs_request([record]).SerializeToString())

    [event] = decoded.events
    assert event.event["name"] == "gen_ai.user.message"
    assert event.event["attributes"] == {}


def test_json_ids_must_be_hex() -> None:
    document = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": "not-hex!"}]}]}]}

    with pytest.raises(InvalidInput, match="not a hex string"):
        decode_logs_json(json.dumps(document).encode())


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"resourceLogs": "x"},
        {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": 5}]}]}]},
        {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"stringValue": 1.5}}]}]}]},
        {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"eventName": "\ud800"}]}]}]},
    ],
    ids=["array", "not-a-list", "numeric-id", "wrong-value-type", "lone-surrogate"],
)
async def test_malformed_otlp_json_logs_are_refused_with_400(
    client: httpx.AsyncClient, ingest_key: CreatedKey, document: object
) -> None:
    r = await client.post(
        "/v1/logs",
        content=json.dumps(document).encode(),
        headers={**auth(ingest_key), "Content-Type": "application/json"},
    )

    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"]


async def test_a_short_span_id_on_a_content_event_is_rejected_not_stored(
    client: httpx.AsyncClient, ingest_key: CreatedKey, db: Database
) -> None:
    record = log_record(os.urandom(16), b"\x01", "gen_ai.choice", {"message": {"content": "x"}})

    r = await _post(client, ingest_key, "/v1/logs", logs_request([record]).SerializeToString())

    partial = ExportLogsServiceResponse.FromString(r.content).partial_success
    assert partial.rejected_log_records == 1
    assert "has a malformed span id: 1 bytes, expected 8" in partial.error_message
    async with db.read() as s:
        assert await s.scalar(select(func.count()).select_from(LogEvent)) == 0


async def test_spans_and_their_content_events_sent_at_the_same_moment_always_meet(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    traces = [(os.urandom(16), os.urandom(8), os.urandom(8)) for _ in range(12)]
    sends = []
    for tid, root, chat in traces:
        logs = logs_request(content_events(tid, chat)).SerializeToString()
        sends.append(_post(client, ingest_key, "/v1/traces", model_call(tid, root, chat)))
        sends.append(_post(client, ingest_key, "/v1/logs", logs))

    responses = await asyncio.gather(*sends)

    assert all(r.status_code == 200 for r in responses)
    for tid, _, _ in traces:
        session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
        assert (session["input"], session["output"]) == (QUESTION, ANSWER)


def test_a_json_key_given_twice_is_refused_naming_it() -> None:
    """The parser would keep the second `resourceLogs` and drop the first's content unsaid."""
    with pytest.raises(InvalidInput, match="'resourceLogs' is given twice"):
        decode_logs_json(b'{"resourceLogs": [], "resourceLogs": []}')
