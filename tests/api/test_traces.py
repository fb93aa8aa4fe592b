"""`POST /v1/traces`: the OTLP/HTTP receiver, protobuf and JSON, and what a session shows."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import os

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from sqlalchemy import text

from neens.api.app import create_app
from neens.domain.span_tree import NESTED_LEVELS
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


async def test_every_member_of_a_gzip_body_is_read_and_trailing_data_is_refused(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    """RFC 1952 lets a gzip body hold several members (`cat a.gz b.gz`): each is read; zero
    padding after the last is allowed, anything else refused, so no span is acknowledged
    unread."""
    (first, spans_1), (second, spans_2) = agent_trace(), agent_trace()
    body = gzip.compress(export_request(spans_1).SerializeToString()) + gzip.compress(
        export_request(spans_2).SerializeToString()
    )
    r = await _export(client, ingest_key, body + b"\x00" * 8, **{"Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    for tid in (first, second):
        r = await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))
        assert r.status_code == 200 and r.json()["spanCount"] == 5

    third, spans_3 = agent_trace()
    one = gzip.compress(export_request(spans_3).SerializeToString())
    for trailing in (b"\x00\x01garbage", gzip.compress(b"x")[:-4]):
        r = await _export(client, ingest_key, one + trailing, **{"Content-Encoding": "gzip"})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["field"] == "Content-Encoding"
    r = await client.get(f"/sessions/{third.hex()}", headers=auth(ingest_key))
    assert r.status_code == 404


@pytest.mark.parametrize("encoding", ["gzip", "br", "deflate"])
async def test_a_json_route_refuses_an_encoded_body_instead_of_misreading_it(
    client: httpx.AsyncClient, admin_key: CreatedKey, encoding: str
) -> None:
    """Only the OTLP receivers decode a body; elsewhere a Content-Encoding is a 415 naming it,
    whether the body really is encoded (it would be read as bad JSON) or not (it would be taken
    as it is)."""
    plain = json.dumps({"name": f"encoded-{encoding}"}).encode()
    for body in (plain, gzip.compress(plain)):
        r = await client.post(
            "/datasets",
            content=body,
            headers={
                **auth(admin_key),
                "Content-Type": "application/json",
                "Content-Encoding": encoding,
            },
        )
        assert r.status_code == 415, r.text
        assert r.json()["error"]["field"] == "Content-Encoding"
    listed = await client.get("/datasets", headers=auth(admin_key))
    assert f"encoded-{encoding}" not in {d["name"] for d in listed.json()["datasets"]}
    identity = await client.post(
        "/datasets",
        content=plain,
        headers={
            **auth(admin_key),
            "Content-Type": "application/json",
            "Content-Encoding": "identity",
        },
    )
    assert identity.status_code == 201, identity.text


async def test_a_base_url_ending_in_a_slash_still_reaches_the_receiver(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    """`${NEENS_BASE_URL}/v1/traces` with `NEENS_BASE_URL=http://host/` is `//v1/traces`; an
    exporter only logs a 404, so every span would be lost. Repeated slashes are merged."""
    tid, spans = agent_trace()
    body = export_request(spans).SerializeToString()
    base = str(client.base_url).rstrip("/") + "/"  # as a user's NEENS_BASE_URL may end
    r = await client.post(f"{base}/v1/traces", content=body, headers={**auth(ingest_key), **PROTO})
    assert r.status_code == 200, r.text
    r = await client.get(f"{base}/sessions//{tid.hex()}", headers=auth(ingest_key))
    assert r.status_code == 200 and r.json()["spanCount"] == 5


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


# --- hardening: no shape of trace answers 500 -------------------------------------------------

HUGE = 2**62 + 1
"""A token count that fits 64 bits on its own but not twice over."""


def _llm_span(tid: bytes, name: str, **attributes: object) -> Span:
    return span(
        tid,
        os.urandom(8),
        name,
        **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", **attributes},
    )


def _otlp_json(spans: list[Span]) -> bytes:
    """The OTLP/JSON encoding of `spans` (hex ids), as JSON exporters send it."""
    document = json_format.MessageToDict(export_request(spans))
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for one in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in one:
                        one[key] = base64.b64decode(one[key]).hex()
    return json.dumps(document).encode()


async def _send(
    client: httpx.AsyncClient, key: CreatedKey, spans: list[Span], encoding: str
) -> ExportTraceServiceResponse:
    if encoding == "protobuf":
        r = await _export(client, key, export_request(spans).SerializeToString())
        assert r.status_code == 200, r.text
        return ExportTraceServiceResponse.FromString(r.content)
    r = await client.post(
        "/v1/traces",
        content=_otlp_json(spans),
        headers={**auth(key), "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    return json_format.ParseDict(r.json(), ExportTraceServiceResponse())


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
async def test_token_totals_beyond_64_bits_are_flagged_and_the_healthy_traces_are_stored(
    client: httpx.AsyncClient, ingest_key: CreatedKey, encoding: str
) -> None:
    bad = os.urandom(16)
    healthy, healthy_spans = agent_trace()
    overflowing = [
        _llm_span(
            bad,
            f"chat-{n}",
            **{"gen_ai.usage.input_tokens": HUGE, "gen_ai.usage.output_tokens": HUGE},
        )
        for n in range(2)
    ]
    response = await _send(client, ingest_key, [*overflowing, *healthy_spans], encoding)
    assert response.partial_success.rejected_spans == 0
    message = response.partial_success.error_message
    assert f"session '{bad.hex()}': the input token counts" in message
    assert "inputTokens is null" in message
    session = (await client.get(f"/sessions/{bad.hex()}", headers=auth(ingest_key))).json()
    assert session["spanCount"] == 2
    assert session["inputTokens"] is None  # the total is not a count any column can hold
    assert session["outputTokens"] is None
    codes = {w["code"] for w in session["warnings"]}
    assert "token_sum_overflow" in codes
    assert any("inputTokens is null" in w["message"] for w in session["warnings"])
    # Each span's own count is kept and shown.
    assert [s["inputTokens"] for s in session["spans"]] == [HUGE, HUGE]
    other = (await client.get(f"/sessions/{healthy.hex()}", headers=auth(ingest_key))).json()
    assert (other["spanCount"], other["inputTokens"], other["warnings"]) == (5, 2000, [])


async def test_token_totals_overflowing_across_requests_are_flagged_not_a_500(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid = os.urandom(16)
    for n in range(3):
        one = _llm_span(
            tid, f"chat-{n}", **{"gen_ai.usage.input_tokens": HUGE, "gen_ai.usage.output_tokens": 1}
        )
        r = await _export(client, ingest_key, export_request([one]).SerializeToString())
        assert r.status_code == 200
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert (session["spanCount"], session["inputTokens"], session["outputTokens"]) == (3, None, 3)
    listed = (await client.get("/sessions", headers=auth(ingest_key))).json()["sessions"]
    assert [w["code"] for w in listed[0]["warnings"]] == ["token_sum_overflow"]


def _chain(tid: bytes, depth: int) -> list[Span]:
    ids = [os.urandom(8) for _ in range(depth)]
    return [
        span(tid, ids[n], f"step-{n}", parent=ids[n - 1] if n else b"", start_ms=n, end_ms=n + 1)
        for n in range(depth)
    ]


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
async def test_a_chain_of_5000_spans_is_read_back_whole_and_nested_boundedly(
    client: httpx.AsyncClient, ingest_key: CreatedKey, encoding: str
) -> None:
    tid = os.urandom(16)
    spans = _chain(tid, 5000)
    response = await _send(client, ingest_key, spans, encoding)
    assert response.partial_success.rejected_spans == 0
    r = await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))
    assert r.status_code == 200
    session = r.json()
    assert session["spanCount"] == 5000
    [node] = session["spans"]
    seen = [node["name"]]
    for _ in range(NESTED_LEVELS - 1):
        [node] = node["children"]
        seen.append(node["name"])
    # Past the last nested level, the rest of the chain is listed in order, parent ids intact.
    rest = node["children"]
    seen += [child["name"] for child in rest]
    assert seen == [f"step-{n}" for n in range(5000)]
    assert all(child["children"] == [] for child in rest)
    assert rest[1]["parentSpanId"] == rest[0]["spanId"]


async def test_spans_whose_parents_form_a_cycle_are_shown_as_roots_and_flagged(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid = os.urandom(16)
    a, b, c, child = (os.urandom(8) for _ in range(4))
    spans = [
        span(tid, a, "a", parent=c),
        span(tid, b, "b", parent=a),
        span(tid, c, "c", parent=b),
        span(tid, child, "child", parent=a),
    ]
    r = await _export(client, ingest_key, export_request(spans).SerializeToString())
    assert r.status_code == 200
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert sorted(s["name"] for s in session["spans"]) == ["a", "b", "c"]
    [root_a] = [s for s in session["spans"] if s["name"] == "a"]
    assert [c["name"] for c in root_a["children"]] == ["child"]
    assert [w["code"] for w in root_a["warnings"]] == ["parent_cycle"]
    assert root_a["children"][0]["warnings"] == []
    assert [w["code"] for w in session["warnings"]] == ["parent_cycle"]
    assert "3 spans" in session["warnings"][0]["message"]


def _deep_any(depth: int) -> AnyValue:
    value = AnyValue(string_value="leaf")
    for _ in range(depth):
        value = AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="k", value=value)]))
    return value


def _deep_protobuf_request(tid: bytes, depth: int, healthy: list[Span]) -> bytes:
    """A request whose span `deep` carries an attribute nested `depth` levels, built on the
    wire (the protobuf library itself refuses to build messages nested that deep)."""

    def field(number: int, payload: bytes) -> bytes:
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    value = field(1, b"leaf")
    for _ in range(depth):
        value = field(6, field(1, field(1, b"k") + field(2, value)))
    deep = span(tid, os.urandom(8), "deep").SerializeToString()
    deep += field(9, field(1, b"deep.attr") + field(2, value))
    healthy_bytes = b"".join(field(2, s.SerializeToString()) for s in healthy)
    return field(1, field(2, field(2, deep) + healthy_bytes))


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([byte])
        out += bytes([byte | 0x80])


@pytest.mark.parametrize("depth", [33, 40, 260, 5000])
async def test_protobuf_attributes_nested_too_deep_refuse_only_their_span(
    client: httpx.AsyncClient, ingest_key: CreatedKey, depth: int
) -> None:
    tid = os.urandom(16)
    ok = span(tid, os.urandom(8), "fine", **{"x": {"a": [1, {"b": 2}]}})
    r = await _export(client, ingest_key, _deep_protobuf_request(tid, depth, [ok]))
    assert r.status_code == 200, r.text
    partial = ExportTraceServiceResponse.FromString(r.content).partial_success
    assert partial.rejected_spans == 1
    assert "'deep'" in partial.error_message
    assert "32 levels" in partial.error_message
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert [s["name"] for s in session["spans"]] == ["fine"]


def _nested_json_value(depth: int) -> str:
    return (
        '{"kvlistValue":{"values":[{"key":"k","value":' * depth
        + '{"stringValue":"leaf"}'
        + ("}]}}" * depth)
    )


@pytest.mark.parametrize("depth", [32, 33, 40, 150])
async def test_otlp_json_attributes_nested_too_deep_refuse_only_their_span(
    client: httpx.AsyncClient, ingest_key: CreatedKey, depth: int
) -> None:
    tid = os.urandom(16).hex()
    deep = (
        f'{{"traceId":"{tid}","spanId":"0102030405060708","name":"deep",'
        f'"attributes":[{{"key":"deep.attr","value":{_nested_json_value(depth)}}}]}}'
    )
    fine = f'{{"traceId":"{tid}","spanId":"0102030405060709","name":"fine"}}'
    body = f'{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{deep},{fine}]}}]}}]}}'
    r = await client.post(
        "/v1/traces", content=body, headers={**auth(ingest_key), "Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text
    session = (await client.get(f"/sessions/{tid}", headers=auth(ingest_key))).json()
    if depth <= 32:  # within the bound: stored as sent and readable back
        assert r.json() == {}
        assert sorted(s["name"] for s in session["spans"]) == ["deep", "fine"]
        return
    partial = r.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "'deep'" in partial["errorMessage"] and "32 levels" in partial["errorMessage"]
    assert [s["name"] for s in session["spans"]] == ["fine"]


async def test_otlp_json_nested_deeper_than_a_json_parser_reads_is_a_clean_400(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid = os.urandom(16).hex()
    deep = (
        f'{{"traceId":"{tid}","spanId":"0102030405060708","name":"deep",'
        f'"attributes":[{{"key":"deep.attr","value":{_nested_json_value(5000)}}}]}}'
    )
    body = f'{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{deep}]}}]}}]}}'
    r = await client.post(
        "/v1/traces", content=body, headers={**auth(ingest_key), "Content-Type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_input"


async def test_dubious_values_are_stored_flagged_and_reported_as_an_otlp_warning(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid = os.urandom(16)
    spans = [
        _llm_span(
            tid,
            "text-tokens",
            **{"gen_ai.usage.input_tokens": "120", "gen_ai.usage.output_tokens": 30},
        ),
        span(tid, os.urandom(8), "backwards", start_ms=500, end_ms=100),
        _llm_span(
            tid,
            "odd-tokens",
            **{"gen_ai.usage.input_tokens": "12.5", "gen_ai.usage.output_tokens": 3},
        ),
        span(tid, os.urandom(8), "long-model", **{"gen_ai.request.model": "m" * 600}),
    ]
    response = await _send(client, ingest_key, spans, "protobuf")
    assert response.partial_success.rejected_spans == 0
    message = response.partial_success.error_message
    assert "4 warnings on stored spans" in message
    assert "'text-tokens'" in message and "gen_ai.usage.input_tokens" in message
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    by_name = {s["name"]: s for s in session["spans"]}
    assert [w["code"] for w in by_name["text-tokens"]["warnings"]] == ["token_count_text"]
    assert by_name["text-tokens"]["inputTokens"] == 120  # parsed strictly, and flagged
    assert [w["code"] for w in by_name["backwards"]["warnings"]] == ["end_before_start"]
    assert [w["code"] for w in by_name["odd-tokens"]["warnings"]] == ["token_count_invalid"]
    assert by_name["odd-tokens"]["inputTokens"] is None
    assert [w["code"] for w in by_name["long-model"]["warnings"]] == ["value_too_long"]
    assert by_name["long-model"]["model"] is None
    assert sorted(w["code"] for w in session["warnings"]) == [
        "end_before_start",
        "token_count_invalid",
        "token_count_text",
        "value_too_long",
    ]


async def test_names_and_links_longer_than_neens_stores_are_flagged_not_a_500(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    tid = os.urandom(16)
    one = _llm_span(
        tid,
        "chat",
        **{
            "gen_ai.response.model": "m" * 501,
            "gen_ai.agent.name": "a" * 501,
            "neens.eval_run_id": "r" * 201,
            "neens.dataset_item_id": "d" * 201,
            "neens.version_label": "v" * 501,
        },
    )
    r = await _export(client, ingest_key, export_request([one]).SerializeToString())
    assert r.status_code == 200
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert session["agentName"] is None and session["evalRunId"] is None
    assert session["models"] == []
    [warning] = session["warnings"]
    assert warning["code"] == "value_too_long"
    assert "(and 4 more)" in warning["message"]


async def test_a_cost_too_large_to_represent_is_cost_overflow_not_priced_at_null(
    client: httpx.AsyncClient, ingest_key: CreatedKey, admin_key: CreatedKey
) -> None:
    r = await client.put(
        "/model-pricing/absurd-model",
        json={"inputPerMTokUsd": 1e300, "outputPerMTokUsd": 1e300},
        headers=auth(admin_key),
    )
    assert r.status_code == 200, r.text
    tid = os.urandom(16)
    spans = [
        _llm_span(
            tid,
            "chat",
            **{
                "gen_ai.request.model": "absurd-model",
                "gen_ai.usage.input_tokens": 10**18,
                "gen_ai.usage.output_tokens": 1,
            },
        )
    ]
    r = await _export(client, ingest_key, export_request(spans).SerializeToString())
    assert r.status_code == 200
    session = (await client.get(f"/sessions/{tid.hex()}", headers=auth(ingest_key))).json()
    assert session["costStatus"] == "cost_overflow"
    assert session["costUsd"] is None
    assert "more than can be represented" in session["unpricedModels"][0]
    assert "cost_overflow" in {w["code"] for w in session["warnings"]}
    [llm] = session["spans"]
    assert llm["costUsd"] is None
    assert "more than can be represented" in llm["unpricedReason"]
    assert [w["code"] for w in llm["warnings"]] == ["cost_overflow"]


async def test_a_trace_the_database_refuses_is_rejected_alone_and_the_rest_of_the_request_kept(
    client: httpx.AsyncClient, ingest_key: CreatedKey, db: Database, dialect: str
) -> None:
    """The net under the known causes: PostgreSQL refusing a value (here a trigger raising the
    SQLSTATE of an out-of-range number, as for any value a column cannot hold) costs only the
    trace holding it."""
    if dialect != "postgresql":
        pytest.skip("SQLite has no data exceptions a trigger can raise")
    async with db.write() as s:
        await s.execute(
            text(
                "CREATE FUNCTION refuse_poison() RETURNS trigger AS $$ BEGIN "
                "IF NEW.name = 'poison' THEN RAISE EXCEPTION 'out of range' "
                "USING ERRCODE = '22003'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
            )
        )
        await s.execute(
            text(
                "CREATE TRIGGER refuse_poison BEFORE INSERT ON spans "
                "FOR EACH ROW EXECUTE FUNCTION refuse_poison()"
            )
        )
    bad = os.urandom(16)
    healthy, healthy_spans = agent_trace()
    poisoned = [span(bad, os.urandom(8), "poison"), span(bad, os.urandom(8), "sibling")]
    for encoding in ("protobuf", "json"):
        response = await _send(client, ingest_key, [*poisoned, *healthy_spans], encoding)
        assert response.partial_success.rejected_spans == 2
        message = response.partial_success.error_message
        assert "span 'poison' could not be stored" in message and "error id" in message
    assert (await client.get(f"/sessions/{bad.hex()}", headers=auth(ingest_key))).status_code == 404
    stored = (await client.get(f"/sessions/{healthy.hex()}", headers=auth(ingest_key))).json()
    assert stored["spanCount"] == 5
    native = {"session": {"id": "n"}, "spans": [{"id": "a", "name": "poison"}]}
    r = await client.post("/sessions", json=native, headers=auth(ingest_key))
    assert r.status_code == 200
    assert (r.json()["acceptedSpans"], r.json()["rejectedSpans"]) == (0, 1)
