"""Decoding the native session JSON into `SpanRecord`s.

The native format is for agents that are not instrumented with OpenTelemetry: one request
carries one session (a trace) and its spans::

    {"session": {"id": "...", "agent_name": "...", "attributes": {...}},
     "spans": [{"id": "...", "parent_id": "...", "name": "...", "kind": "llm",
                "input": ..., "output": ..., "start_time": "2025-01-01T00:00:00Z",
                "end_time": 1735689601000000000, "status": "ok", "model": "gpt-4o",
                "input_tokens": 12, "output_tokens": 34, "attributes": {...}}]}

Rather than teach the rest of Neens a second vocabulary, the native fields are written into the
same attributes an OpenTelemetry GenAI instrumentation would send (`gen_ai.request.model`,
`gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`), and `conventions.span_view` reads
both formats the same way. The session id becomes every span's trace id; session attributes act
as resource attributes (overlaid by the span's own).

The API validates the shape with pydantic as well; this decoder is still defensive because it is
also the library entry point, and it names the offending field (`spans[2].id`) in every error:
`InvalidInput` when the body is not a JSON object at all, `Unprocessable` for a wrong field.
A span whose text PostgreSQL cannot store, or whose attributes nest more than `MAX_NESTING`
levels, becomes a `Rejection`, as in OTLP (session attributes that do take every span with
them).

Session ids of the form `ppr_…:…` are refused: they are where push runs record the answers
Neens captured itself, and an answer must not be replaceable from outside
(`conventions.is_push_trace_id`).

A session with zero spans is accepted and decodes to an empty batch: an agent that flushes a
session before anything happened has not made an error, and storing nothing is the honest
outcome. `"spans"` must still be present (as `[]`) so a misspelled key is not taken for that.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from neens.domain.conventions import is_push_trace_id
from neens.domain.spans import AttributeValue, Rejection, SpanRecord
from neens.domain.storable import (
    nesting_reason,
    record_unstorable_reason,
    safe_label,
    unstorable_text_reason,
)
from neens.errors import InvalidInput, Unprocessable
from neens.ingest.records import DecodedBatch

__all__ = ["decode_native"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_STATUSES: Final = frozenset({"ok", "error"})
_MODEL_KEY: Final = "gen_ai.request.model"
_INPUT_TOKENS_KEY: Final = "gen_ai.usage.input_tokens"
_OUTPUT_TOKENS_KEY: Final = "gen_ai.usage.output_tokens"


def decode_native(payload: Mapping[str, Any]) -> DecodedBatch:
    """Decode one native session into a batch of records (and rejections).

    Raises `InvalidInput` when `payload` is not an object, and `Unprocessable` (with `field` set)
    when a field has the wrong type or value, or a span id repeats within the session.
    """
    if not isinstance(payload, Mapping):
        raise InvalidInput(
            f"native session body must be a JSON object, not {type(payload).__name__}"
        )
    session = payload.get("session")
    if not isinstance(session, Mapping):
        raise Unprocessable("session must be an object", field="session")
    session_id = _required_text(session.get("id"), "session.id")
    if (reason := unstorable_text_reason(session_id)) is not None:
        raise Unprocessable(f"session.id {reason}", field="session.id")
    if is_push_trace_id(session_id):
        raise Unprocessable(
            f"session.id {safe_label(session_id)} is reserved: ids of the form "
            "<run id>:<item id> hold the answers a push run captured, which cannot be sent or "
            "changed through ingest; choose a session id that does not start with 'ppr_' "
            "and contain ':'",
            field="session.id",
        )
    agent_name = _optional_text(session.get("agent_name"), "session.agent_name")
    session_attributes = _attributes(session.get("attributes"), "session.attributes")
    session_problem = _nesting_problem(session_attributes, "session attribute")

    raw_spans = payload.get("spans")
    if raw_spans is None:
        raise Unprocessable(
            "spans is required (send [] for a session with no spans)", field="spans"
        )
    if not isinstance(raw_spans, list):
        raise Unprocessable("spans must be an array", field="spans")

    spans: list[SpanRecord] = []
    rejections: list[Rejection] = []
    first_index_of: dict[str, int] = {}
    for index, raw in enumerate(raw_spans):
        path = f"spans[{index}]"
        record = _decode_span(raw, path, session_id, agent_name, session_attributes)
        if record.span_id in first_index_of:
            raise Unprocessable(
                f"{path}.id repeats spans[{first_index_of[record.span_id]}].id "
                f"({safe_label(record.span_id)}); span ids must be unique within a session",
                field=f"{path}.id",
            )
        first_index_of[record.span_id] = index
        reason = None
        if session_problem is not None:
            reason = f"span {safe_label(record.name)} {session_problem}"
        elif (problem := _nesting_problem(raw.get("attributes"), "attribute")) is not None:
            reason = f"span {safe_label(record.name)} {problem}"
        else:
            reason = record_unstorable_reason(record)
        if reason is not None:
            rejections.append(Rejection(reason))
        else:
            spans.append(record)
    return DecodedBatch(spans=spans, rejections=rejections)


def _decode_span(
    raw: object,
    path: str,
    session_id: str,
    agent_name: str | None,
    session_attributes: Mapping[str, AttributeValue],
) -> SpanRecord:
    if not isinstance(raw, Mapping):
        raise Unprocessable(f"{path} must be an object", field=path)
    span_id = _required_text(raw.get("id"), f"{path}.id")
    parent_id = _optional_text(raw.get("parent_id"), f"{path}.parent_id") or None
    if parent_id == span_id:
        raise Unprocessable(f"{path}.parent_id names the span itself", field=f"{path}.parent_id")
    name = _required_text(raw.get("name"), f"{path}.name")

    attributes = {**session_attributes, **_attributes(raw.get("attributes"), f"{path}.attributes")}
    model = _optional_text(raw.get("model"), f"{path}.model")
    if model and _MODEL_KEY not in attributes:
        attributes[_MODEL_KEY] = model
    for field, key in (("input_tokens", _INPUT_TOKENS_KEY), ("output_tokens", _OUTPUT_TOKENS_KEY)):
        tokens = _token_count(raw.get(field), f"{path}.{field}")
        if tokens is not None and key not in attributes:
            attributes[key] = tokens

    return SpanRecord(
        trace_id=session_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=name,
        kind=_optional_text(raw.get("kind"), f"{path}.kind") or None,
        start_time=_time(raw.get("start_time"), f"{path}.start_time"),
        end_time=_time(raw.get("end_time"), f"{path}.end_time"),
        status_code=_status(raw.get("status"), f"{path}.status"),
        status_message=None,
        attributes=attributes,
        resource_attributes=dict(session_attributes),
        input=_content(raw.get("input")),
        output=_content(raw.get("output")),
        agent_name=agent_name,
    )


def _nesting_problem(attributes: object, source: str) -> str | None:
    """Which attribute nests too deeply, and how, or None."""
    if not isinstance(attributes, Mapping):
        return None
    for key, value in attributes.items():
        if (reason := nesting_reason(value)) is not None:
            return f"{source} {safe_label(key)} {reason}"
    return None


def _required_text(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise Unprocessable(f"{field} must be a non-empty string", field=field)
    return value


def _optional_text(value: object, field: str) -> str | None:
    """A string or None; "" is kept as "" and callers decide whether it means absent."""
    if value is None or isinstance(value, str):
        return value
    raise Unprocessable(f"{field} must be a string", field=field)


def _attributes(value: object, field: str) -> dict[str, AttributeValue]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise Unprocessable(f"{field} must be an object with string keys", field=field)
    return dict(value)


def _token_count(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Unprocessable(f"{field} must be a non-negative integer", field=field)
    return value


def _status(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in _STATUSES:
        raise Unprocessable(f'{field} must be "ok" or "error"', field=field)
    return value.lower()


def _time(value: object, field: str) -> datetime | None:
    """ISO 8601 text, unix nanoseconds or a datetime, as an aware UTC datetime.

    An ISO time without an offset is taken as UTC, the only zone a trace timestamp is ever
    implicitly in; 0 means unset, as in OTLP. Floats are refused: nanoseconds since 1970 do not
    fit a double exactly, so a float is already a rounded time.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise Unprocessable(f"{field} is out of range", field=field) from None
    if isinstance(value, bool):
        raise Unprocessable(f"{field} must be ISO 8601 text or unix nanoseconds", field=field)
    if isinstance(value, int):
        if value < 0:
            raise Unprocessable(f"{field} must not be negative", field=field)
        if value == 0:
            return None
        try:
            return _EPOCH + timedelta(microseconds=value // 1000)
        except OverflowError:
            raise Unprocessable(f"{field} is out of range", field=field) from None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise Unprocessable(
                f"{field} is not ISO 8601 or unix nanoseconds: {value[:64]!r}", field=field
            ) from None
        if parsed.tzinfo is None:
            return parsed.replace(tzinfo=UTC)
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise Unprocessable(f"{field} is out of range", field=field) from None
    raise Unprocessable(f"{field} must be ISO 8601 text or unix nanoseconds", field=field)


def _content(value: object) -> str | None:
    """Input or output as text: strings as sent, anything else JSON-encoded, as conventions do."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
