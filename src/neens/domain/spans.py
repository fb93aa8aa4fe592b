"""A span as Neens reads it, whatever format it arrived in.

OTLP protobuf, OTLP JSON and the native session JSON are all decoded into `SpanRecord`s
(see `neens.ingest`); the conventions, the session roll-up and the stores read only this shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

AttributeValue = Any
"""A decoded attribute value: str, bool, int, float, bytes-as-hex str, list or dict of those."""


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One span, format-independent, with resource attributes flattened in.

    `attributes` holds the resource attributes overlaid by the span's own attributes (the span
    wins on a clash), so correlation keys can be read from either place. `resource_attributes`
    keeps the resource's own copy so nothing is lost.
    """

    trace_id: str
    """Lower-case hex for OTLP traces; the caller's own id for native sessions."""
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str | None
    """A kind given by the format itself (native `kind`, OTLP SpanKind name), before conventions."""
    start_time: datetime | None
    end_time: datetime | None
    status_code: str | None
    """"ok", "error" or None when unset."""
    status_message: str | None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    resource_attributes: dict[str, AttributeValue] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    scope_name: str | None = None
    input: str | None = None
    """An input given by the format itself (native `input`); conventions may supply one too."""
    output: str | None = None
    agent_name: str | None = None
    """An agent name given by the format itself (native `session.agent_name`)."""


@dataclass(frozen=True, slots=True)
class SpanLogEvent:
    """A GenAI content event received as an OTLP log record, for the span it names."""

    trace_id: str
    span_id: str
    event: dict[str, Any]
    """As a span event: `{"name", "time", "attributes", "body"}`."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """A span the receiver refused, with the reason reported back in partial success."""

    reason: str
