"""What the receivers decode a request into before it is stored.

Every span becomes a `neens.domain.spans.SpanRecord`; a span that cannot be accepted becomes a
`Rejection` carrying its reason, so one bad span never costs the rest of the request.
"""

from __future__ import annotations

from dataclasses import dataclass

from neens.domain.spans import Rejection, SpanLogEvent, SpanRecord


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    spans: list[SpanRecord]
    rejections: list[Rejection]


@dataclass(frozen=True, slots=True)
class DecodedLogs:
    events: list[SpanLogEvent]
    """The GenAI content events, to attach to their spans."""
    ignored: int
    """Other log records: acknowledged, not stored."""
    rejections: list[Rejection]
