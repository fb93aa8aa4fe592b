"""Building OTLP ExportTraceServiceRequests the way instrumented agents send them."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

T0 = 1_764_489_600_000_000_000  # 2025-11-30T08:00:00Z in Unix nanoseconds


def any_value(value: object) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[any_value(item) for item in value]))
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=key_values(value)))
    raise TypeError(value)


def key_values(attributes: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in attributes.items()]


def span(
    trace_id: bytes,
    span_id: bytes,
    name: str,
    *,
    parent: bytes = b"",
    start_ms: int = 0,
    end_ms: int = 10,
    **attributes: Any,
) -> Span:
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_time_unix_nano=T0 + start_ms * 1_000_000,
        end_time_unix_nano=T0 + end_ms * 1_000_000,
        attributes=key_values(attributes),
    )


def agent_trace(
    trace_id: bytes | None = None,
    *,
    agent: str = "refund-agent",
    model: str = "gpt-4o",
    prompt: str = "Where is order 17?",
    answer: str = "It shipped yesterday.",
    input_tokens: int = 1000,
    output_tokens: int = 200,
) -> tuple[bytes, list[Span]]:
    """A root agent span, an LLM span with usage (GenAI conventions) and two tool spans."""
    tid = trace_id or os.urandom(16)
    root, llm, tool1, tool2, llm2 = (os.urandom(8) for _ in range(5))
    spans = [
        span(
            tid,
            root,
            "agent.run",
            start_ms=0,
            end_ms=900,
            **{
                "openinference.span.kind": "AGENT",
                "gen_ai.agent.name": agent,
                "input.value": prompt,
                "output.value": answer,
            },
        ),
        span(
            tid,
            llm,
            "chat",
            parent=root,
            start_ms=10,
            end_ms=300,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.usage.input_tokens": input_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
            },
        ),
        span(
            tid,
            tool1,
            "lookup_order",
            parent=root,
            start_ms=310,
            end_ms=400,
            **{"openinference.span.kind": "TOOL"},
        ),
        span(
            tid,
            tool2,
            "send_email",
            parent=root,
            start_ms=410,
            end_ms=500,
            **{"gen_ai.operation.name": "execute_tool"},
        ),
        span(
            tid,
            llm2,
            "llm",
            parent=root,
            start_ms=510,
            end_ms=890,
            **{
                "openinference.span.kind": "LLM",
                "llm.model_name": model,
                "llm.token_count.prompt": input_tokens,
                "llm.token_count.completion": output_tokens,
            },
        ),
    ]
    return tid, spans


def export_request(
    spans: list[Span], resource: dict[str, Any] | None = None
) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=key_values(resource or {"service.name": "support"})),
                scope_spans=[ScopeSpans(spans=spans)],
            )
        ]
    )
