"""The real OpenTelemetry SDK exports an agent trace to a live Neens server on loopback."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from neens.store.keys import CreatedKey
from tests.support.live import LiveServer

pytestmark = pytest.mark.e2e


def run_agent(exporter: SpanExporter, prompt: str = "Where is order 17?") -> str:
    """A small instrumented agent: a root agent span, one LLM call with usage, two tools."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": "support", "neens.version_label": "pr-482"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("support-agent")
    with tracer.start_as_current_span("invoke_agent refund-agent") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("gen_ai.agent.name", "refund-agent")
        root.set_attribute("input.value", prompt)
        with tracer.start_as_current_span("chat claude-haiku-4-5") as llm:
            llm.set_attribute("gen_ai.operation.name", "chat")
            llm.set_attribute("gen_ai.provider.name", "anthropic")
            llm.set_attribute("gen_ai.request.model", "claude-haiku-4-5")
            llm.set_attribute("gen_ai.usage.input_tokens", 1200)
            llm.set_attribute("gen_ai.usage.output_tokens", 300)
        for tool in ("lookup_order", "issue_refund"):
            with tracer.start_as_current_span(f"execute_tool {tool}") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
        root.set_attribute("output.value", "Refund issued.")
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id


def _session(server: LiveServer, key: CreatedKey, trace_id: str) -> dict[str, object]:
    r = httpx.get(
        f"{server.url}/sessions/{trace_id}", headers={"Authorization": f"Bearer {key.key}"}
    )
    assert r.status_code == 200, r.text
    body: dict[str, object] = r.json()
    return body


def _assert_agent_session(session: dict[str, object]) -> None:
    assert session["agentName"] == "refund-agent"
    assert session["models"] == ["claude-haiku-4-5"]
    assert session["inputTokens"] == 1200
    assert session["outputTokens"] == 300
    # Claude Haiku 4.5 at $1 / $5 per million tokens (genai-prices).
    assert session["costUsd"] == pytest.approx((1200 * 1 + 300 * 5) / 1e6, rel=1e-9)
    assert session["stepCount"] == 3
    assert session["spanCount"] == 4
    assert session["input"] == "Where is order 17?"
    assert session["output"] == "Refund issued."
    assert session["versionLabel"] == "pr-482"


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_otlp_protobuf_export_from_the_sdk_becomes_a_priced_session(
    live_server: LiveServer, key: CreatedKey, compression: Compression
) -> None:
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces",
        headers={"Authorization": f"Bearer {key.key}"},
        compression=compression,
    )
    trace_id = run_agent(exporter)
    _assert_agent_session(_session(live_server, key, trace_id))


@pytest.fixture
def otel_env(
    live_server: LiveServer, key: CreatedKey, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Exactly the variables docs/traces.md tells a user to set."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{live_server.url}/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"Authorization=Bearer%20{key.key}")
    yield


def test_the_documented_otel_environment_variables_are_enough(
    otel_env: None, live_server: LiveServer, key: CreatedKey
) -> None:
    trace_id = run_agent(OTLPSpanExporter())
    _assert_agent_session(_session(live_server, key, trace_id))


def _otlp_json(request_dict: dict[str, object]) -> dict[str, object]:
    """OTLP/JSON differs from protobuf's JSON mapping in one way: ids are hex, not base64."""

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for field in ("traceId", "spanId", "parentSpanId"):
                if isinstance(node.get(field), str):
                    node[field] = base64.b64decode(node[field]).hex()
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(request_dict)
    return request_dict


def test_the_same_trace_over_otlp_json_gives_the_same_session(
    live_server: LiveServer, key: CreatedKey
) -> None:
    memory = InMemorySpanExporter()
    trace_id = run_agent(memory)
    request = encode_spans(memory.get_finished_spans())
    body = _otlp_json(json_format.MessageToDict(request))
    r = httpx.post(
        f"{live_server.url}/v1/traces",
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {key.key}", "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    assert r.json() == {}
    _assert_agent_session(_session(live_server, key, trace_id))
