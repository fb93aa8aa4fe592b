"""Decoding OTLP/HTTP trace exports (protobuf and JSON) into `SpanRecord`s.

This module is pure: bytes in, records out. Content types, gzip and HTTP status codes belong to
the router. Two kinds of failure are kept apart on purpose:

- a body that cannot be decoded at all (corrupt protobuf, invalid JSON, an id that is not hex)
  raises `InvalidInput`, because nothing in it can be trusted;
- a single span that is unusable (no trace id, text PostgreSQL cannot store, attributes nested
  more than `MAX_NESTING` levels) becomes a `Rejection`, and the rest of the batch is kept, which
  is exactly what OTLP's partial success exists for. Nothing is repaired silently: a span is
  stored as sent or refused with a reason.

Nesting is bounded twice. Our own limit (`MAX_NESTING` levels of arrays and key/value lists in an
attribute) names the attribute. The parsers have limits of their own (upb's 100 message levels,
`ParseDict`'s recursion depth): when a request trips one, it is decoded again span by span, so
the span that is too deep is refused alone instead of failing the request.

Protobuf decoding and its span-by-span fallback for requests deeper than the parser takes share
the per-span checks; OTLP/JSON's own preparation is in `otlp_json`, and what the traces and logs
receivers share (attribute values, times, depth-limited parsing) in `otlp_common`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from neens.domain.spans import AttributeValue, Rejection, SpanRecord
from neens.domain.storable import MAX_NESTING, record_unstorable_reason, safe_label
from neens.errors import InvalidInput
from neens.ingest.otlp_common import (
    TOO_DEEP,
    ShallowRequest,
    ShallowSpanName,
    Undecodable,
    encodable,
    first_of,
    is_too_deep,
    json_too_deep,
    parse_dict,
    parse_part,
    read_attributes,
    read_time,
    serialize_response,
)
from neens.ingest.otlp_json import (
    json_items,
    json_lists,
    load_json_object,
    prepare_json_document,
)
from neens.ingest.records import DecodedBatch

__all__ = [
    "decode_json",
    "decode_protobuf",
    "encode_response",
    "rejections_message",
]

_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
_SPAN_KIND_PREFIX: Final = "SPAN_KIND_"
_TRACE_ID_BYTES: Final = 16
_SPAN_ID_BYTES: Final = 8


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------


def decode_protobuf(body: bytes) -> DecodedBatch:
    """Decode an `application/x-protobuf` ExportTraceServiceRequest (already decompressed).

    Protobuf itself refuses strings that are not valid UTF-8, so lone surrogates cannot arrive
    this way; NUL characters can, and are rejected per span.
    """
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        if TOO_DEEP in str(exc):
            return _decode_protobuf_span_by_span(body, exc)
        raise InvalidInput(
            f"request body is not a valid OTLP ExportTraceServiceRequest protobuf: {exc}"
        ) from exc
    return _decode_request(request, [])


def decode_json(body: bytes) -> DecodedBatch:
    """Decode an `application/json` ExportTraceServiceRequest (already decompressed).

    OTLP/JSON differs from protobuf's canonical JSON mapping in one way that matters here: trace
    and span ids are hex strings, not base64. They are converted before handing the document to
    `json_format.ParseDict`, which then takes care of lowerCamelCase or snake_case keys, int or
    string enums, int64 as string or number, and (with `ignore_unknown_fields`) fields from newer
    OTLP versions. Spans containing lone surrogates (legal in JSON as `\\udXXX` escapes, refused
    by protobuf) are taken out first and rejected one by one, so they do not sink the batch.
    """
    document = load_json_object(body)
    # Valid UTF-8 cannot carry a surrogate, so only a `\uD800`-`\uDFFF` escape can produce one;
    # most bodies have none and skip the per-span scan.
    scan = _SURROGATE_ESCAPE.search(body) is not None
    rejections = prepare_json_document(document, scan_surrogates=scan)
    request = ExportTraceServiceRequest()
    try:
        parse_dict(document, request, _JSON_REQUEST_DEPTH)
    except json_format.ParseError as exc:
        if not is_too_deep(exc):
            raise _invalid_json(exc) from exc
        _drop_deep_json_spans(document, rejections)
        request = ExportTraceServiceRequest()
        try:
            parse_dict(document, request, _JSON_REQUEST_DEPTH)
        except (json_format.ParseError, RecursionError, ValueError, TypeError) as retry:
            raise _invalid_json(retry) from retry
    except (RecursionError, ValueError, TypeError) as exc:
        raise _invalid_json(exc) from exc
    return _decode_request(request, rejections)


def encode_response(rejected: int, message: str, *, json: bool) -> bytes:
    """The ExportTraceServiceResponse body, as protobuf or OTLP/JSON.

    `partial_success` is set only when there is something to say: spans were rejected, or (with
    `rejected` 0) stored spans were flagged, which OTLP defines as a warning. An empty response
    reads as full success. The message is made encodable first (it may quote refused text).
    """
    if rejected < 0:
        raise ValueError(f"rejected must be >= 0, got {rejected}")
    response = ExportTraceServiceResponse()
    if rejected > 0 or message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = encodable(message)
    return serialize_response(response, json=json)


def rejections_message(
    rejections: Sequence[Rejection], flagged: Sequence[str] = (), *, limit: int = 5
) -> str:
    """One human-readable line for `partial_success.error_message`.

    Rejections first, then the dubious values that were stored but flagged. The first `limit`
    of each are quoted and the rest counted, so a batch of ten thousand bad spans does not
    produce a megabyte of response.
    """
    parts = []
    if rejections:
        noun = "span" if len(rejections) == 1 else "spans"
        reasons = [rejection.reason for rejection in rejections]
        parts.append(f"{len(rejections)} {noun} rejected: {first_of(reasons, limit)}")
    if flagged:
        noun = "warning" if len(flagged) == 1 else "warnings"
        parts.append(f"{len(flagged)} {noun} on stored spans: {first_of(flagged, limit)}")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# Requests deeper than a parser accepts: span by span
# ---------------------------------------------------------------------------------------------

_JSON_REQUEST_DEPTH: Final = 8 + 3 * (MAX_NESTING + 1)
"""`ParseDict`'s message depth for a whole request: request, resource spans, scope spans,
span, event, key/value, value, then three per nested key/value list, so an attribute one level
deeper than `MAX_NESTING` still parses and is refused by name."""
_JSON_SPAN_DEPTH: Final = _JSON_REQUEST_DEPTH - 3
_DEEP_REASON: Final = (
    f"nests attributes or events deeper than OTLP decoding allows (Neens keeps at most "
    f"{MAX_NESTING} levels of arrays and key/value lists); flatten them or send them as JSON text"
)


def _invalid_json(exc: Exception) -> InvalidInput:
    return InvalidInput(
        f"request body is not a valid OTLP/JSON ExportTraceServiceRequest: {encodable(str(exc))}"
    )


def _drop_deep_json_spans(document: dict[str, Any], rejections: list[Rejection]) -> None:
    """Take out (and reject) every span, scope or resource too deep for `ParseDict`."""
    for _, resource_spans in json_items(document, "resourceSpans", "resource_spans"):
        deep_resource = json_too_deep(
            resource_spans.get("resource"), Resource, _JSON_REQUEST_DEPTH - 2
        )
        for _, group in json_items(resource_spans, "scopeSpans", "scope_spans"):
            deep_scope = deep_resource or json_too_deep(
                group.get("scope"), InstrumentationScope, _JSON_SPAN_DEPTH
            )
            for key, spans in json_lists(group, "spans", "spans"):
                kept = []
                for span in spans:
                    if isinstance(span, dict) and (
                        deep_scope or json_too_deep(span, Span, _JSON_SPAN_DEPTH)
                    ):
                        name = span.get("name")
                        label = safe_label(name if isinstance(name, str) else "")
                        where = (
                            "its resource " if deep_resource else "its scope " if deep_scope else ""
                        )
                        rejections.append(Rejection(f"span {label} {where}{_DEEP_REASON}"))
                    else:
                        kept.append(span)
                group[key] = kept
            if deep_scope and not deep_resource:
                group.pop("scope", None)
        if deep_resource:
            resource_spans.pop("resource", None)


def _decode_protobuf_span_by_span(body: bytes, original: Exception) -> DecodedBatch:
    """Decode a request too deep for upb one span at a time; see the module docstring."""
    shallow = ShallowRequest()
    try:
        shallow.ParseFromString(body)
    except DecodeError as exc:
        raise InvalidInput(
            f"request body is not a valid OTLP ExportTraceServiceRequest protobuf: {original}"
        ) from exc
    request = ExportTraceServiceRequest()
    rejections: list[Rejection] = []
    for shallow_resource in shallow.resource_spans:  # type: ignore[attr-defined]
        resource = parse_part(Resource, shallow_resource.resource)
        target = request.resource_spans.add()
        if resource is not None:
            target.resource.CopyFrom(resource)
        for shallow_scope in shallow_resource.scope_spans:
            scope = parse_part(InstrumentationScope, shallow_scope.scope)
            group = target.scope_spans.add()
            if scope is not None:
                group.scope.CopyFrom(scope)
            where = "its resource " if resource is None else "its scope " if scope is None else ""
            for raw in shallow_scope.spans:
                span = parse_part(Span, raw) if not where else None
                if span is None:
                    label = safe_label(_span_name(raw))
                    rejections.append(Rejection(f"span {label} {where}{_DEEP_REASON}"))
                else:
                    group.spans.append(span)
    return _decode_request(request, rejections)


def _span_name(raw: bytes) -> str:
    name = ShallowSpanName()
    try:
        name.ParseFromString(raw)
    except DecodeError:
        return ""
    return str(name.name)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# From protobuf messages to records
# ---------------------------------------------------------------------------------------------


def _decode_request(
    request: ExportTraceServiceRequest, rejections: list[Rejection]
) -> DecodedBatch:
    spans: list[SpanRecord] = []
    for resource_spans in request.resource_spans:
        resource_problem: str | None = None
        resource_attributes: dict[str, AttributeValue] = {}
        try:
            resource_attributes = read_attributes(
                resource_spans.resource.attributes, "resource attribute"
            )
        except Undecodable as exc:
            resource_problem = exc.reason
        for scope_spans in resource_spans.scope_spans:
            scope_name = scope_spans.scope.name or None
            for span in scope_spans.spans:
                if resource_problem is not None:
                    label = safe_label(span.name)
                    rejections.append(Rejection(f"span {label} {resource_problem}"))
                    continue
                decoded = _decode_span(span, resource_attributes, scope_name)
                if isinstance(decoded, Rejection):
                    rejections.append(decoded)
                else:
                    spans.append(decoded)
    return DecodedBatch(spans=spans, rejections=rejections)


def _decode_span(
    span: Span, resource_attributes: dict[str, AttributeValue], scope_name: str | None
) -> SpanRecord | Rejection:
    name = span.name
    trace_id = span.trace_id
    if not trace_id.strip(b"\x00"):
        return _rejection(name, "has no trace id")
    if len(trace_id) != _TRACE_ID_BYTES:
        return _rejection(
            name, f"has a malformed trace id: {len(trace_id)} bytes, expected {_TRACE_ID_BYTES}"
        )
    span_id = span.span_id
    if not span_id.strip(b"\x00"):
        return _rejection(name, "has no span id")
    if len(span_id) != _SPAN_ID_BYTES:
        return _rejection(
            name, f"has a malformed span id: {len(span_id)} bytes, expected {_SPAN_ID_BYTES}"
        )
    parent = span.parent_span_id
    has_parent = bool(parent.strip(b"\x00"))
    if has_parent and len(parent) != _SPAN_ID_BYTES:
        return _rejection(
            name,
            f"has a malformed parent span id: {len(parent)} bytes, expected {_SPAN_ID_BYTES}",
        )
    try:
        own_attributes = read_attributes(span.attributes, "attribute")
        events = [_event(event, index) for index, event in enumerate(span.events)]
    except Undecodable as exc:
        return _rejection(name, exc.reason)
    status = span.status
    record = SpanRecord(
        trace_id=trace_id.hex(),
        span_id=span_id.hex(),
        parent_span_id=parent.hex() if has_parent else None,
        name=name,
        kind=_SPAN_KIND_NAMES.get(span.kind),
        start_time=read_time(span.start_time_unix_nano),
        end_time=read_time(span.end_time_unix_nano),
        status_code=_STATUS_CODES.get(status.code),
        status_message=status.message or None,
        attributes={**resource_attributes, **own_attributes},
        # One dict for every span of the resource: never changed, and encoded once (`storable`).
        resource_attributes=resource_attributes,
        events=events,
        scope_name=scope_name,
    )
    reason = record_unstorable_reason(record)
    return Rejection(reason) if reason is not None else record


def _rejection(span_name: str, reason: str) -> Rejection:
    """A refused span; its label is built only here, as accepted spans never need one."""
    return Rejection(f"span {safe_label(span_name)} {reason}")


def _event(event: Span.Event, index: int) -> dict[str, Any]:
    try:
        attributes = read_attributes(event.attributes, "attribute")
    except Undecodable as exc:
        raise Undecodable(f"event {index} {exc.reason}") from None
    time = read_time(event.time_unix_nano)
    return {
        "name": event.name,
        "time": time.isoformat() if time is not None else None,
        "attributes": attributes,
    }


_SPAN_KIND_NAMES: Final[Mapping[int, str]] = {
    number: name.removeprefix(_SPAN_KIND_PREFIX).lower()
    for name, number in Span.SpanKind.items()
    if number != Span.SpanKind.SPAN_KIND_UNSPECIFIED
}
"""SpanKind number → "server", "client", ...; unspecified and kinds from newer OTLP versions are
absent (unknown, not guessed). A dict, as the enum wrapper's lookups cost more than the rest of
reading a span's header."""
_STATUS_CODES: Final[Mapping[int, str]] = {
    Status.StatusCode.STATUS_CODE_OK: "ok",
    Status.StatusCode.STATUS_CODE_ERROR: "error",
}
"""Status code number → "ok" or "error"; unset (and unknown) codes are absent."""
