"""What the two OTLP/HTTP receivers (`ingest.otlp` for traces, `ingest.otlp_logs` for logs)
share: reading attribute values and times, parsing with the parsers' depth limits, splitting a
request too deep to parse whole into its parts, and writing the Export*ServiceResponse.
"""

from __future__ import annotations

import json as jsonlib
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from neens.domain.spans import AttributeValue
from neens.domain.storable import MAX_NESTING, safe_label
from neens.errors import InvalidInput

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


class Undecodable(Exception):
    """A value a decoder cannot represent faithfully; the span or record carrying it is
    rejected."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def encodable(text: str) -> str:
    """`text` with lone surrogates escaped, so protobuf can encode it as UTF-8."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def serialize_response(response: Message, *, json: bool) -> bytes:
    """An Export*ServiceResponse as protobuf or compact OTLP/JSON."""
    if json:
        payload = json_format.MessageToDict(response, use_integers_for_enums=True)
        return jsonlib.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return response.SerializeToString()


def first_of(lines: Sequence[str], limit: int) -> str:
    """The first `limit` lines joined, and how many more there are: a response's message stays
    short however many spans or records were refused."""
    hidden = len(lines) - limit
    more = f"; and {hidden} more" if hidden > 0 else ""
    return "; ".join(lines[:limit]) + more


TOO_DEEP: Final = "MaxDepth"
"""upb's DecodeError for nesting beyond its limit says "Exceeded upb_DecodeOptions_MaxDepth"."""


def parse_dict(document: dict[str, Any], message: Message, depth: int) -> None:
    """`document` into `message`, ignoring fields of newer OTLP versions, at most `depth`
    messages deep."""
    json_format.ParseDict(document, message, ignore_unknown_fields=True, max_recursion_depth=depth)


def is_too_deep(exc: json_format.ParseError) -> bool:
    """Whether `ParseDict` failed on its depth limit (not on a bad value)."""
    return "too deep" in str(exc)


def json_too_deep(value: object, message: type[Message], depth: int) -> bool:
    """Whether `value` is deeper than `ParseDict` accepts; any other problem is left for the
    whole-request parse to report."""
    if not isinstance(value, dict):
        return False
    try:
        parse_dict(value, message(), depth)
    except json_format.ParseError as exc:
        return is_too_deep(exc)
    except (RecursionError, ValueError, TypeError):
        return False
    return False


def _shallow_messages() -> tuple[type[Message], type[Message]]:
    """Messages with the wire layout of ExportTraceServiceRequest down to its spans, and of a
    span's name, that keep each span (resource, scope) as undecoded bytes.

    Protobuf's wire format lets a length-delimited sub-message be read as `bytes`, so a request
    whose one span nests too deeply can still be split into its spans, each then decoded (and
    refused) on its own.
    """
    proto = descriptor_pb2.FileDescriptorProto(
        name="neens/shallow_otlp.proto", package="neens.shallow", syntax="proto3"
    )
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    repeated = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    as_bytes = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    as_string = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
    as_message = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
    shapes: list[tuple[str, list[tuple[str, int, int, int, str]]]] = [
        (
            "ScopeSpans",
            [("scope", 1, optional, as_bytes, ""), ("spans", 2, repeated, as_bytes, "")],
        ),
        (
            "ResourceSpans",
            [
                ("resource", 1, optional, as_bytes, ""),
                ("scope_spans", 2, repeated, as_message, ".neens.shallow.ScopeSpans"),
            ],
        ),
        (
            "Request",
            [("resource_spans", 1, repeated, as_message, ".neens.shallow.ResourceSpans")],
        ),
        ("SpanName", [("name", 5, optional, as_string, "")]),
    ]
    for name, fields in shapes:
        message = proto.message_type.add(name=name)
        for field_name, number, label, kind, type_name in fields:
            field = message.field.add(name=field_name, number=number, label=label, type=kind)
            if type_name:
                field.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    classes = message_factory.GetMessages([proto], pool=pool)
    return classes["neens.shallow.Request"], classes["neens.shallow.SpanName"]


ShallowRequest, ShallowSpanName = _shallow_messages()
_M = TypeVar("_M", bound=Message)


def parse_part(
    message: type[_M], raw: bytes, request: str = "ExportTraceServiceRequest"
) -> _M | None:
    """`raw` decoded as `message`, or None when it is too deep; corrupt bytes are a 400 that
    names the `request` they were part of."""
    part = message()
    try:
        part.ParseFromString(raw)
    except DecodeError as exc:
        if TOO_DEEP in str(exc):
            return None
        raise InvalidInput(f"request body is not a valid OTLP {request} protobuf: {exc}") from exc
    return part


def read_attributes(
    key_values: Iterable[KeyValue], source: str, depth: int = 0
) -> dict[str, AttributeValue]:
    """Key/value pairs as a dict; a repeated key keeps its last value, as OTel SDKs do.

    Strings, ints and doubles (nearly every attribute) are read here; the other kinds go
    through `read_any_value`."""
    result: dict[str, AttributeValue] = {}
    for key_value in key_values:
        key = key_value.key
        if not key and key_value.key_strindex:
            raise Undecodable(
                f"has a {source} keyed by key_strindex, which only the profiles signal defines"
            )
        value = key_value.value
        which = value.WhichOneof("value")
        if which == "string_value":
            result[key] = value.string_value
        elif which == "int_value":
            result[key] = value.int_value
        elif which == "double_value":
            result[key] = value.double_value
        else:
            try:
                result[key] = read_any_value(value, depth)
            except Undecodable as exc:
                raise Undecodable(f"{source} {safe_label(key)} {exc.reason}") from None
    return result


def read_any_value(value: AnyValue, depth: int = 0) -> AttributeValue:
    """An AnyValue as plain Python: bytes become lower-case hex so every value is JSON-storable.

    `depth` counts the arrays and key/value lists around `value`; past `MAX_NESTING` the span
    is refused (the recursion itself is bounded by the parsers' own depth limits)."""
    match value.WhichOneof("value"):
        case None:
            return None
        case "string_value":
            return value.string_value
        case "bool_value":
            return value.bool_value
        case "int_value":
            return value.int_value
        case "double_value":
            return value.double_value
        case "bytes_value":
            return value.bytes_value.hex()
        case "array_value":
            _check_depth(depth)
            return [read_any_value(item, depth + 1) for item in value.array_value.values]
        case "kvlist_value":
            _check_depth(depth)
            return read_attributes(value.kvlist_value.values, "key", depth + 1)
        case other:
            raise Undecodable(f"uses {other}, which only the profiles signal defines")


def _check_depth(depth: int) -> None:
    if depth >= MAX_NESTING:
        raise Undecodable(
            f"is nested more than {MAX_NESTING} levels deep; flatten it or send it as JSON text"
        )


def read_time(unix_nanos: int) -> datetime | None:
    """Unix nanoseconds as an aware UTC datetime; 0 means "not set" in OTLP.

    Integer arithmetic, not a float division, so microseconds are exact (nanoseconds are cut,
    as `datetime` cannot hold them).
    """
    if unix_nanos == 0:
        return None
    return _EPOCH + timedelta(0, 0, unix_nanos // 1000)  # positional: half the cost of keywords
