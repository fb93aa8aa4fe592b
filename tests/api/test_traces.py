"""`POST /v1/traces`: the OTLP/HTTP receiver, protobuf and JSON, and what a session shows."""

from __future__ import annotations

import asyncio
import gzip
import json
import os

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from neens.api.app import create_app
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.conftest import auth
from tests.support.otlp import agent_trace, export_request, span

PROTO = {"Content-Type": "application/x-protobuf"}


async def _export(
    client: httpx.AsyncClient, key: CreatedKey, body: bytes, **headers: str
) -> httpx.Response:
    return await client.post("/v1/traces", content=body, headers={**auth(key), **PROTO, **headers})


async def test_an_exported_agent_trace_becomes_a_session_with_agent_model_tokens_and_cost(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid, spans = agent_trace()
    r = await _export(client, ingest_key, export_request(spans).SerializeToString())
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/x-protobuf"
    response = ExportTraceServiceResponse.FromString(r.content)
    assert not response.HasField("partial_success")

    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert session["id"] == tid.hex()
    assert session["agentName"] == "refund-agent"
    assert session["models"] == ["gpt-4o"]
    assert session["input"] == "Where is order 17?"
    assert session["output"] == "It shipped yesterday."
    assert session["inputTokens"] == 2000
    assert session["outputTokens"] == 400
    assert session["stepCount"] == 4
    assert session["spanCount"] == 5
    assert session["latencyMs"] == pytest.approx(900.0)
    # gpt-4o at $2.50 / $10 per million tokens, two calls of 1,000 in and 200 out.
    assert session["costUsd"] == pytest.approx(2 * (1000 * 2.5 + 200 * 10) / 1e6, rel=1e-9)
    assert session["costStatus"] == "priced"
    [root] = session["spans"]
    assert root["name"] == "agent.run"
    assert root["kind"] == "agent"
    assert [c["name"] for c in root["children"]] == ["chat", "lookup_order", "send_email", "llm"]
    assert [c["kind"] for c in root["children"]] == ["llm", "tool", "tool", "llm"]
    # Resource attributes are flattened onto spans, and kept on their own too.
    assert root["attributes"]["service.name"] == "support"
    assert root["resourceAttributes"] == {"service.name": "support"}


async def test_gzip_protobuf_is_accepted(client: httpx.AsyncClient, ingest_key: CreatedKey) -> None:
    tid, spans = agent_trace()
    body = gzip.compress(export_request(spans).SerializeToString())
    r = await _export(client, ingest_key, body, **{"Content-Encoding": "gzip"})
    assert r.status_code == 200
    r = await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))
    assert r.json()["spanCount"] == 5


async def test_otlp_json_with_hex_ids_is_accepted_and_answered_in_json(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    trace_id = os.urandom(16).hex()
    body = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "neens.eval_run_id", "value": {"stringValue": "ppr_1234"}}
                    ]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": "0102030405060708",
                                "name": "agent.run",
                                "kind": 1,
                                "startTimeUnixNano": "1764489600000000000",
                                "endTimeUnixNano": "1764489601500000000",
                                "attributes": [
                                    {
                                        "key": "gen_ai.agent.name",
                                        "value": {"stringValue": "escalation-agent"},
                                    },
                                    {"key": "input.value", "value": {"stringValue": "Refund?"}},
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    r = await client.post(
        "/v1/traces",
        content=json.dumps(body),
        headers={**auth(ingest_key), "Content-Type": "application/json"},
    )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == {}
    session = (await client.get(f"/sessions/{trace_id}", headers=auth(ingest_key))).json()
    assert session["agentName"] == "escalation-agent"
    assert session["evalRunId"] == "ppr_1234"
    assert session["latencyMs"] == pytest.approx(1500.0)
    assert session["costUsd"] is None
    assert session["costStatus"] == "no_llm_calls"


async def test_a_span_without_trace_id_is_rejected_and_counted_the_rest_kept(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid, spans = agent_trace()
    spans.append(span(b"", os.urandom(8), "orphan"))
    r = await _export(client, ingest_key, export_request(spans).SerializeToString())
    assert r.status_code == 200
    response = ExportTraceServiceResponse.FromString(r.content)
    assert response.partial_success.rejected_spans == 1
    assert "orphan" in response.partial_success.error_message
    assert "trace id" in response.partial_success.error_message
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert session["spanCount"] == 5


@pytest.mark.parametrize(
    ("content_type", "body"),
    [("application/x-protobuf", b"\xff\xff\xff not protobuf"), ("application/json", b"{nope")],
)
async def test_a_malformed_body_is_a_400_in_the_error_shape(
    client: httpx.AsyncClient, ingest_key: CreatedKey, content_type: str, body: bytes
) -> None:
    r = await client.post(
        "/v1/traces", content=body, headers={**auth(ingest_key), "Content-Type": content_type}
    )
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "invalid_input"
    assert error["message"]


async def test_an_unknown_content_type_is_a_415(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.post(
        "/v1/traces", content=b"x", headers={**auth(ingest_key), "Content-Type": "text/plain"}
    )
    assert r.status_code == 415
    assert r.json()["error"]["field"] == "Content-Type"
    r = await _export(client, ingest_key, b"x", **{"Content-Encoding": "br"})
    assert r.status_code == 415
    assert r.json()["error"]["field"] == "Content-Encoding"


async def test_corrupt_gzip_is_a_400(client: httpx.AsyncClient, ingest_key: CreatedKey) -> None:
    r = await _export(client, ingest_key, b"\x1f\x8b garbage", **{"Content-Encoding": "gzip"})
    assert r.status_code == 400


async def test_the_receiver_needs_a_key(client: httpx.AsyncClient) -> None:
    _, spans = agent_trace()
    r = await client.post(
        "/v1/traces", content=export_request(spans).SerializeToString(), headers=PROTO
    )
    assert r.status_code == 401


async def test_bodies_over_the_cap_are_413_also_after_decompression(
    settings: Settings, db: Database, ingest_key: CreatedKey
) -> None:
    small = settings.model_copy(update={"max_request_bytes": 4096})
    app = create_app(small, database=db)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            big = b"\x00" * 5000
            r = await _export(client, ingest_key, big)
            assert r.status_code == 413
            assert "NEENS_MAX_REQUEST_BYTES" in r.json()["error"]["message"]
            bomb = gzip.compress(b"\x00" * 1_000_000)
            assert len(bomb) < 4096
            r = await _export(client, ingest_key, bomb, **{"Content-Encoding": "gzip"})
            assert r.status_code == 413


async def test_spans_of_one_trace_in_several_requests_merge_into_one_session(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid, spans = agent_trace()
    for one in spans:
        r = await _export(client, ingest_key, export_request([one]).SerializeToString())
        assert r.status_code == 200
    # Re-sending a span (an exporter retry) does not count it twice.
    await _export(client, ingest_key, export_request(spans[:2]).SerializeToString())
    listed = (await client.get("/sessions", headers=auth(ingest_key))).json()["sessions"]
    assert [s["id"] for s in listed] == [tid.hex()]
    assert listed[0]["spanCount"] == 5
    assert listed[0]["inputTokens"] == 2000
    assert listed[0]["stepCount"] == 4


async def test_spans_of_one_trace_arriving_at_the_same_moment_merge(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid, spans = agent_trace()
    results = await asyncio.gather(
        *(_export(client, ingest_key, export_request([s]).SerializeToString()) for s in spans)
    )
    assert [r.status_code for r in results] == [200] * 5
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert session["spanCount"] == 5
    assert session["stepCount"] == 4
    assert session["costUsd"] == pytest.approx(0.009)


async def test_another_projects_session_is_invisible(
    client: httpx.AsyncClient, ingest_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    tid, spans = agent_trace()
    await _export(client, ingest_key, export_request(spans).SerializeToString())
    r = await client.get(f"/sessions/{tid.hex()}", headers=auth(other_project_key))
    assert r.status_code == 404
    listed = await client.get("/sessions", headers=auth(other_project_key))
    assert listed.json()["sessions"] == []


async def test_the_same_trace_id_in_two_projects_stays_two_sessions(
    client: httpx.AsyncClient, ingest_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    tid, spans = agent_trace(agent="refund-agent")
    _, theirs = agent_trace(tid, agent="billing-agent")
    await _export(client, ingest_key, export_request(spans).SerializeToString())
    await _export(client, other_project_key, export_request(theirs).SerializeToString())
    mine = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    other = (await client.get(f"/sessions/{tid.hex()}", headers=auth(other_project_key))).json()
    assert (mine["agentName"], mine["spanCount"]) == ("refund-agent", 5)
    assert (other["agentName"], other["spanCount"]) == ("billing-agent", 5)


async def test_a_token_count_too_large_for_any_database_costs_nothing_but_its_own_count(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid = os.urandom(16)
    spans = [
        span(
            tid,
            os.urandom(8),
            "chat",
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 1e23,
                "gen_ai.usage.output_tokens": 10,
            },
        )
    ]
    r = await _export(client, ingest_key, export_request(spans).SerializeToString())
    assert r.status_code == 200
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert session["inputTokens"] is None
    assert session["costUsd"] is None  # a count it cannot read leaves the span unpriced
    # Kept as sent (PostgreSQL's jsonb reads 1e+23 back as the integer it denotes).
    assert float(session["spans"][0]["attributes"]["gen_ai.usage.input_tokens"]) == 1e23
