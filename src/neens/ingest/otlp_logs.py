"""Decoding OTLP/HTTP log exports (protobuf and JSON) into the GenAI content events they carry.

Instrumentations that follow the OpenTelemetry GenAI conventions can send the messages of a model
call as log records (`gen_ai.user.message`, `gen_ai.choice`, ...,
`gen_ai.client.inference.operation.details`) rather than as span attributes. Each names its span
by trace and span id, so Neens keeps it as an event of that span. Any other log record is
acknowledged and not stored: Neens is not a log store.

Pure, like `ingest.otlp`: bytes in, events out. A body that cannot be decoded raises
`InvalidInput`; one unusable content event (no span to attach to, text PostgreSQL cannot store)
is a `Rejection`, reported in the response's partial success while the rest are kept.
"""

from __future__ import annotations

import base64
import binascii
import json as jsonlib
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from neens.domain.messages import GENAI_CONTENT_EVENTS
from neens.domain.spans import Rejection, SpanLogEvent
from neens.domain.storable import safe_label, unstorable_text_reason
from neens.errors import InvalidInput
from neens.ingest.otlp import (
    _any_value,
    _attributes,
    _encodable,
    _first,
    _parse_dict,
    _serialize,
    _time,
    _Undecodable,
)
from neens.ingest.otlp_json import HEX
from neens.ingest.records import DecodedLogs

__all__ = [
    "decode_logs_json",
    "decode_logs_protobuf",
    "encode_logs_response",
    "logs_rejections_message",
]

_EVENT_NAME_KEY: Final = "event.name"
"""Where log records name their event before OTLP's own `event_name` field (proto 1.5)."""
_TRACE_ID_BYTES: Final = 16
_SPAN_ID_BYTES: Final = 8
_JSON_DEPTH: Final = 120


def decode_logs_protobuf(body: bytes) -> DecodedLogs:
    """Decode an `application/x-protobuf` ExportLogsServiceRequest (already decompressed)."""
    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise InvalidInput(
            f"request body is not a valid OTLP ExportLogsServiceRequest protobuf: {exc}"
        ) from exc
    return _decode_request(request)


def decode_logs_json(body: bytes) -> DecodedLogs:
    """Decode an `application/json` ExportLogsServiceRequest (already decompressed); trace and
    span ids are hex, as OTLP/JSON encodes them."""
    try:
        document = jsonlib.loads(body.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"request body is not UTF-8 text: {exc}") from exc
    except (jsonlib.JSONDecodeError, RecursionError) as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise InvalidInput("OTLP/JSON request body must be a JSON object")
    _hex_ids_to_base64(document)
    request = ExportLogsServiceRequest()
    try:
        _parse_dict(document, request, _JSON_DEPTH)
    except (json_format.ParseError, RecursionError, ValueError, TypeError) as exc:
        raise InvalidInput(
            "request body is not a valid OTLP/JSON ExportLogsServiceRequest: "
            f"{_encodable(str(exc))}"
        ) from exc
    return _decode_request(request)


def encode_logs_response(rejected: int, message: str, *, json: bool) -> bytes:
    """The ExportLogsServiceResponse body; `partial_success` only when there is something to
    say, as for traces."""
    response = ExportLogsServiceResponse()
    if rejected > 0 or message:
        response.partial_success.rejected_log_records = rejected
        response.partial_success.error_message = _encodable(message)
    return _serialize(response, json=json)


def logs_rejections_message(rejections: list[Rejection], *, limit: int = 5) -> str:
    """One line for `partial_success.error_message`: the first reasons quoted, the rest counted."""
    if not rejections:
        return ""
    noun = "log record" if len(rejections) == 1 else "log records"
    reasons = [rejection.reason for rejection in rejections]
    return f"{len(rejections)} {noun} rejected: {_first(reasons, limit)}"


def _decode_request(request: ExportLogsServiceRequest) -> DecodedLogs:
    events: list[SpanLogEvent] = []
    rejections: list[Rejection] = []
    ignored = 0
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                name = _event_name(record)
                if name not in GENAI_CONTENT_EVENTS:
                    ignored += 1
                    continue
                decoded = _decode_event(record, name)
                if isinstance(decoded, Rejection):
                    rejections.append(decoded)
                else:
                    events.append(decoded)
    return DecodedLogs(events=events, ignored=ignored, rejections=rejections)


def _event_name(record: LogRecord) -> str | None:
    if record.event_name:
        return record.event_name
    for key_value in record.attributes:
        if key_value.key == _EVENT_NAME_KEY and key_value.value.HasField("string_value"):
            return key_value.value.string_value
    return None


def _decode_event(record: LogRecord, name: str) -> SpanLogEvent | Rejection:
    label = f"log record {safe_label(name)}"
    for what, value, size in (
        ("trace id", record.trace_id, _TRACE_ID_BYTES),
        ("span id", record.span_id, _SPAN_ID_BYTES),
    ):
        if not value.strip(b"\x00"):
            return Rejection(f"{label} has no {what}, so it names no span to attach to")
        if len(value) != size:
            return Rejection(f"{label} has a malformed {what}: {len(value)} bytes, expected {size}")
    try:
        attributes = _attributes(record.attributes, "attribute")
        body = _any_value(record.body) if record.HasField("body") else None
    except _Undecodable as exc:
        return Rejection(f"{label} {exc.reason}")
    attributes.pop(_EVENT_NAME_KEY, None)
    time = _time(record.time_unix_nano) or _time(record.observed_time_unix_nano)
    event: dict[str, Any] = {
        "name": name,
        "time": time.isoformat() if time is not None else None,
        "attributes": attributes,
        "body": body,
    }
    if (reason := unstorable_text_reason(event)) is not None:
        return Rejection(f"{label} {reason}")
    return SpanLogEvent(trace_id=record.trace_id.hex(), span_id=record.span_id.hex(), event=event)


def _hex_ids_to_base64(document: dict[str, Any]) -> None:
    """OTLP/JSON's hex trace and span ids as the base64 `ParseDict` expects, in place."""
    for resource_logs in _items(document, "resourceLogs", "resource_logs"):
        for scope_logs in _items(resource_logs, "scopeLogs", "scope_logs"):
            for record in _items(scope_logs, "logRecords", "log_records"):
                for key in ("traceId", "trace_id", "spanId", "span_id"):
                    value = record.get(key)
                    if not isinstance(value, str):
                        continue
                    if HEX.fullmatch(value) is None:
                        raise InvalidInput(
                            f"log record {key} is not a hex string: {safe_label(value)} "
                            "(OTLP/JSON encodes trace and span ids as hex, not base64)",
                            field=key,
                        )
                    record[key] = base64.b64encode(binascii.unhexlify(value)).decode("ascii")


def _items(container: dict[str, Any], camel: str, snake: str) -> list[dict[str, Any]]:
    return [
        item
        for key in dict.fromkeys((camel, snake))
        if isinstance(container.get(key), list)
        for item in container[key]
        if isinstance(item, dict)
    ]
