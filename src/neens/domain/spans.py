"""A span as Neens reads it, whatever format it arrived in.

OTLP protobuf, OTLP JSON and the native session JSON are all decoded into `SpanRecord`s
(see `neens.ingest`); the conventions, the session roll-up and the stores read only this shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from neens.domain.records import hot_record

AttributeValue = Any
"""A decoded attribute value: str, bool, int, float, bytes-as-hex str, list or dict of those."""


@hot_record
class SpanJson:
    """The JSON text of a span's attributes, resource attributes and events, as the storability
    check encoded them (`json.JSONEncoder(ensure_ascii=False)`), kept so the store writes this
    text instead of encoding the same values again.

    `of` holds the three objects that were encoded: the text stands for a record only while
    the record still holds those very objects (`SpanRecord.json_text`)."""

    attributes: str
    resource_attributes: str
    events: str
    of: tuple[object, object, object]


@hot_record
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
    encoded: SpanJson | None = field(default=None, compare=False, repr=False)
    """Set by `conventions.record_unstorable_reason` when the span can be stored; else None."""

    def json_text(self) -> SpanJson | None:
        """`encoded` if it was encoded from this record's own attributes, resource attributes
        and events (not from those of a record it was copied from), else None."""
        encoded = self.encoded
        if encoded is None:
            return None
        of = encoded.of
        if of[0] is self.attributes and of[1] is self.resource_attributes and of[2] is self.events:
            return encoded
        return None


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
