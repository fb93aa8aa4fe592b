"""Decoding OTLP/HTTP log exports (protobuf and JSON) into the GenAI content events they carry.

Instrumentations that follow the OpenTelemetry GenAI conventions can send the messages of a model
call as log records (`gen_ai.user.message`, `gen_ai.choice`, ...,
`gen_ai.client.inference.operation.details`) rather than as span attributes. Each names its span
by trace and span id, so Neens keeps it as an event of that span. Any other log record is
acknowledged and not stored: Neens is not a log store.

Pure, like `ingest.otlp`: bytes in, events out. A body that cannot be decoded raises
`InvalidInput`; one unusable content event (no span to attach to, text PostgreSQL cannot store,
attributes or a body nested too deeply) is a `Rejection`, reported in the response's partial
success while the rest are kept. As for traces, a request deeper than the parsers take (upb's
100 message levels, `ParseDict`'s recursion depth) is decoded again record by record, so only
the record that is too deep is refused.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from neens.domain.messages import GENAI_CONTENT_EVENTS
from neens.domain.spans import Rejection, SpanLogEvent
from neens.domain.storable import MAX_NESTING, safe_label, unstorable_text_reason
from neens.errors import InvalidInput
from neens.ingest.otlp_common import (
    TOO_DEEP,
    ShallowRequest,
    Undecodable,
    encodable,
    first_of,
    is_too_deep,
    json_too_deep,
    parse_dict,
    parse_part,
    read_any_value,
    read_attributes,
    read_time,
    serialize_response,
)
from neens.ingest.otlp_json import HEX, json_lists, load_json_object
from neens.ingest.records import DecodedLogs

__all__ = [
    "decode_logs_json",
    "decode_logs_protobuf",
    "encode_logs_response",
    "logs_rejections_message",
]

_REQUEST: Final = "ExportLogsServiceRequest"
_EVENT_NAME_KEY: Final = "event.name"
"""Where log records name their event before OTLP's own `event_name` field (proto 1.5)."""
_TRACE_ID_BYTES: Final = 16
_SPAN_ID_BYTES: Final = 8
_JSON_DEPTH: Final = 120
"""`ParseDict`'s message depth for a whole request: request, resource logs, scope logs, record,
key/value, value, then three per nested key/value list, so an attribute (or body) one level
deeper than `MAX_NESTING` still parses and is refused by name."""
_JSON_RECORD_DEPTH: Final = _JSON_DEPTH - 3
_DEEP_REASON: Final = (
    f"nests attributes or its body deeper than OTLP decoding allows (Neens keeps at most "
    f"{MAX_NESTING} levels of arrays and key/value lists); flatten them or send them as JSON text"
)
"""Traces' reason for a span too deep for the parsers, said of a log record."""


def decode_logs_protobuf(body: bytes) -> DecodedLogs:
    """Decode an `application/x-protobuf` ExportLogsServiceRequest (already decompressed)."""
    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        if TOO_DEEP in str(exc):
            return _decode_protobuf_record_by_record(body, exc)
        raise _invalid_protobuf(exc) from exc
    return _decode_request(request, [], 0)


def decode_logs_json(body: bytes) -> DecodedLogs:
    """Decode an `application/json` ExportLogsServiceRequest (already decompressed); trace and
    span ids are hex, as OTLP/JSON encodes them."""
    document = load_json_object(body)
    _hex_ids_to_base64(document)
    request = ExportLogsServiceRequest()
    rejections: list[Rejection] = []
    ignored = 0
    try:
        parse_dict(document, request, _JSON_DEPTH)
    except json_format.ParseError as exc:
        if not is_too_deep(exc):
            raise _invalid_json(exc) from exc
        ignored = _drop_deep_json_records(document, rejections)
        request = ExportLogsServiceRequest()
        try:
            parse_dict(document, request, _JSON_DEPTH)
        except (json_format.ParseError, RecursionError, ValueError, TypeError) as retry:
            raise _invalid_json(retry) from retry
    except (RecursionError, ValueError, TypeError) as exc:
        raise _invalid_json(exc) from exc
    return _decode_request(request, rejections, ignored)


def encode_logs_response(rejected: int, message: str, *, json: bool) -> bytes:
    """The ExportLogsServiceResponse body; `partial_success` only when there is something to
    say, as for traces."""
    response = ExportLogsServiceResponse()
    if rejected > 0 or message:
        response.partial_success.rejected_log_records = rejected
        response.partial_success.error_message = encodable(message)
    return serialize_response(response, json=json)


def logs_rejections_message(rejections: list[Rejection], *, limit: int = 5) -> str:
    """One line for `partial_success.error_message`: the first reasons quoted, the rest counted."""
    if not rejections:
        return ""
    noun = "log record" if len(rejections) == 1 else "log records"
    reasons = [rejection.reason for rejection in rejections]
    return f"{len(rejections)} {noun} rejected: {first_of(reasons, limit)}"


def _invalid_protobuf(exc: Exception) -> InvalidInput:
    return InvalidInput(
        f"request body is not a valid OTLP ExportLogsServiceRequest protobuf: {exc}"
    )


def _invalid_json(exc: Exception) -> InvalidInput:
    return InvalidInput(
        f"request body is not a valid OTLP/JSON ExportLogsServiceRequest: {encodable(str(exc))}"
    )


# ---------------------------------------------------------------------------------------------
# Requests deeper than a parser accepts: record by record
#
# A record too deep to decode is refused alone, with `_DEEP_REASON`, when its event name (read
# without decoding the rest) is a GenAI content event. Any other record too deep is counted as
# ignored, not rejected: Neens would not have stored it however shallow it were (`_decode_request`
# never looks inside other records, so one holding NUL or nested past `MAX_NESTING` is ignored
# too), and refusing it would make exporters report failures for logs Neens never meant to keep.
#
# Nothing of a log's resource or scope is kept either (only its records are read), so a resource
# or scope too deep for the parser is left out and costs its records nothing.
# ---------------------------------------------------------------------------------------------


def _deep_record(name: str | None, rejections: list[Rejection]) -> int:
    """Refuse a too-deep record named `name` if it is a content event; 1 if it is ignored."""
    if name is None or name not in GENAI_CONTENT_EVENTS:
        return 1
    rejections.append(Rejection(f"log record {safe_label(name)} {_DEEP_REASON}"))
    return 0


def _drop_deep_json_records(document: dict[str, Any], rejections: list[Rejection]) -> int:
    """Take out every record too deep for `ParseDict` (rejecting content events) and every
    resource or scope too deep; the number of records ignored."""
    ignored = 0
    for resource_logs in _items(document, "resourceLogs", "resource_logs"):
        if json_too_deep(resource_logs.get("resource"), Resource, _JSON_DEPTH - 2):
            resource_logs.pop("resource")
        for scope_logs in _items(resource_logs, "scopeLogs", "scope_logs"):
            if json_too_deep(scope_logs.get("scope"), InstrumentationScope, _JSON_RECORD_DEPTH):
                scope_logs.pop("scope")
            for key, records in json_lists(scope_logs, "logRecords", "log_records"):
                kept = []
                for record in records:
                    if isinstance(record, dict) and json_too_deep(
                        record, LogRecord, _JSON_RECORD_DEPTH
                    ):
                        ignored += _deep_record(_json_event_name(record), rejections)
                    else:
                        kept.append(record)
                scope_logs[key] = kept
    return ignored


def _json_event_name(record: dict[str, Any]) -> str | None:
    """`_event_name` of a raw OTLP/JSON record."""
    for key in ("eventName", "event_name"):
        if isinstance(name := record.get(key), str) and name:
            return name
    for _, attributes in json_lists(record, "attributes", "attributes"):
        for item in attributes:
            if isinstance(item, dict) and item.get("key") == _EVENT_NAME_KEY:
                value = item.get("value")
                for kind in ("stringValue", "string_value"):
                    if isinstance(value, dict) and isinstance(name := value.get(kind), str):
                        return name
    return None


def _record_head() -> type[Message]:
    """A message with a log record's wire layout that reads only its event name and attributes'
    keys, leaving their values as undecoded bytes: the name of a record too deep to decode."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="neens/shallow_otlp_logs.proto", package="neens.shallow_logs", syntax="proto3"
    )
    field = descriptor_pb2.FieldDescriptorProto
    key_value = proto.message_type.add(name="KeyValue")
    key_value.field.add(name="key", number=1, label=field.LABEL_OPTIONAL, type=field.TYPE_STRING)
    key_value.field.add(name="value", number=2, label=field.LABEL_OPTIONAL, type=field.TYPE_BYTES)
    head = proto.message_type.add(name="RecordHead")
    head.field.add(
        name="attributes",
        number=6,
        label=field.LABEL_REPEATED,
        type=field.TYPE_MESSAGE,
        type_name=".neens.shallow_logs.KeyValue",
    )
    head.field.add(name="event_name", number=12, label=field.LABEL_OPTIONAL, type=field.TYPE_STRING)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessages([proto], pool=pool)["neens.shallow_logs.RecordHead"]


_RecordHead = _record_head()


def _decode_protobuf_record_by_record(body: bytes, original: Exception) -> DecodedLogs:
    """Decode a request too deep for upb one record at a time.

    ExportLogsServiceRequest has the wire layout of ExportTraceServiceRequest down to its records
    (resource 1 and scope groups 2, scope 1 and records 2), so traces' shallow request splits it.
    """
    shallow = ShallowRequest()
    try:
        shallow.ParseFromString(body)
    except DecodeError as exc:
        raise _invalid_protobuf(original) from exc
    request = ExportLogsServiceRequest()
    group = request.resource_logs.add().scope_logs.add()  # records only: nothing else is read
    rejections: list[Rejection] = []
    ignored = 0
    for shallow_resource in shallow.resource_spans:  # type: ignore[attr-defined]
        parse_part(Resource, shallow_resource.resource, _REQUEST)  # corrupt bytes are still a 400
        for shallow_scope in shallow_resource.scope_spans:
            parse_part(InstrumentationScope, shallow_scope.scope, _REQUEST)
            for raw in shallow_scope.spans:
                record = parse_part(LogRecord, raw, _REQUEST)
                if record is None:
                    ignored += _deep_record(_protobuf_event_name(raw), rejections)
                else:
                    group.log_records.append(record)
    return _decode_request(request, rejections, ignored)


def _protobuf_event_name(raw: bytes) -> str | None:
    """`_event_name` of an encoded record that is too deep to decode whole."""
    head = _RecordHead()
    try:
        head.ParseFromString(raw)
    except DecodeError:
        return None
    if head.event_name:  # type: ignore[attr-defined]
        return str(head.event_name)  # type: ignore[attr-defined]
    for key_value in head.attributes:  # type: ignore[attr-defined]
        if key_value.key != _EVENT_NAME_KEY:
            continue
        value = AnyValue()
        try:
            value.ParseFromString(key_value.value)
        except DecodeError:
            continue
        if value.HasField("string_value"):
            return value.string_value
    return None


# ---------------------------------------------------------------------------------------------
# From protobuf messages to events
# ---------------------------------------------------------------------------------------------


def _decode_request(
    request: ExportLogsServiceRequest, rejections: list[Rejection], ignored: int
) -> DecodedLogs:
    events: list[SpanLogEvent] = []
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
        attributes = read_attributes(record.attributes, "attribute")
        body = read_any_value(record.body) if record.HasField("body") else None
    except Undecodable as exc:
        return Rejection(f"{label} {exc.reason}")
    attributes.pop(_EVENT_NAME_KEY, None)
    time = read_time(record.time_unix_nano) or read_time(record.observed_time_unix_nano)
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
