"""Log requests nested deeper than the parsers take refuse only the record that is too deep, as
trace requests refuse only the span: the record is a rejection if it is a GenAI content event,
ignored like any other record if not; resources and scopes are never read, so one too deep costs
its records nothing. A body no JSON parser can read is still a 400."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from neens.errors import InvalidInput
from neens.ingest.otlp_logs import decode_logs_json, decode_logs_protobuf
from neens.ingest.records import DecodedLogs
from tests.ingest.test_otlp_logs import QUESTION
from tests.support.otlp import T0, key_values

TRACE_ID = bytes(range(1, 17))
SPAN_ID = bytes(range(1, 9))
DEPTH = 200
"""Key/value lists around the deep value: past upb's 100 message levels and `ParseDict`'s limit,
within what Python's `json` reads."""
USER = "gen_ai.user.message"
DEEP_REASON = (
    "nests attributes or its body deeper than OTLP decoding allows (Neens keeps at most 32 "
    "levels of arrays and key/value lists); flatten them or send them as JSON text"
)


# --- OTLP/JSON --------------------------------------------------------------------------------


def deep_json_value(depth: int, *, arrays: bool = False) -> dict[str, Any]:
    """An OTLP/JSON AnyValue nesting `depth` key/value lists (or arrays)."""
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        if arrays:
            value = {"arrayValue": {"values": [value]}}
        else:
            value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


def json_record(
    name: str,
    *,
    where: str = "",
    depth: int = DEPTH,
    arrays: bool = False,
    name_as_attribute: bool = False,
) -> dict[str, Any]:
    """A record naming `name`; `where` ("body" or "attributes") nests `depth` levels."""
    record: dict[str, Any] = {
        "timeUnixNano": str(T0),
        "traceId": TRACE_ID.hex(),
        "spanId": SPAN_ID.hex(),
        "attributes": [],
        "body": {"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": "x"}}]}},
    }
    if name_as_attribute:
        record["attributes"].append({"key": "event.name", "value": {"stringValue": name}})
    else:
        record["eventName"] = name
    if where == "body":
        record["body"] = deep_json_value(depth, arrays=arrays)
    elif where == "attributes":
        value = deep_json_value(depth, arrays=arrays)
        record["attributes"].append({"key": "deep.attr", "value": value})
    return record


def good_json_record() -> dict[str, Any]:
    record = json_record(USER)
    record["body"] = {
        "kvlistValue": {"values": [{"key": "content", "value": {"stringValue": QUESTION}}]}
    }
    return record


def json_request(records: list[dict[str, Any]], **group: Any) -> bytes:
    resource = group.pop("resource", None)
    resource_logs: dict[str, Any] = {"scopeLogs": [{**group, "logRecords": records}]}
    if resource is not None:
        resource_logs["resource"] = resource
    return json.dumps({"resourceLogs": [resource_logs]}).encode()


# --- protobuf, built on the wire (the protobuf library refuses to build messages this deep) ---


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([byte])
        out += bytes([byte | 0x80])


def deep_any_value(depth: int, *, arrays: bool = False) -> bytes:
    """An encoded AnyValue nesting `depth` key/value lists (or arrays)."""
    value = field(1, b"leaf")  # string_value
    for _ in range(depth):
        if arrays:
            value = field(5, field(1, value))  # array_value.values[0]
        else:
            value = field(6, field(1, field(1, b"k") + field(2, value)))  # kvlist_value.values[0]
    return value


def protobuf_record(
    name: str,
    *,
    where: str = "",
    depth: int = DEPTH,
    arrays: bool = False,
    body: str = "x",
    name_as_attribute: bool = False,
) -> bytes:
    """An encoded LogRecord naming `name`; `where` ("body" or "attributes") nests `depth`."""
    record = LogRecord(time_unix_nano=T0, trace_id=TRACE_ID, span_id=SPAN_ID)
    if name_as_attribute:
        record.attributes.extend(key_values({"event.name": name}))
    else:
        record.event_name = name
    record.body.kvlist_value.values.extend(key_values({"content": body}))
    raw = record.SerializeToString()
    if where == "body":  # a later body replaces the earlier one, as protobuf merges fields
        raw += field(5, deep_any_value(depth, arrays=arrays))
    elif where == "attributes":
        raw += field(6, field(1, b"deep.attr") + field(2, deep_any_value(depth, arrays=arrays)))
    return raw


def protobuf_request(records: list[bytes], *, resource: bytes = b"", scope: bytes = b"") -> bytes:
    scope_logs = (field(1, scope) if scope else b"") + b"".join(field(2, r) for r in records)
    resource_logs = (field(1, resource) if resource else b"") + field(2, scope_logs)
    return field(1, resource_logs)


def _user_bodies(decoded: DecodedLogs) -> list[Any]:
    return [event.event["body"] for event in decoded.events]


# --- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["body", "attributes"])
def test_a_json_content_event_too_deep_is_refused_alone(where: str) -> None:
    body = json_request([json_record(USER, where=where), good_json_record()])

    decoded = decode_logs_json(body)

    assert _user_bodies(decoded) == [{"content": QUESTION}]
    assert [r.reason for r in decoded.rejections] == [f"log record '{USER}' {DEEP_REASON}"]
    assert decoded.ignored == 0


@pytest.mark.parametrize("where", ["body", "attributes"])
def test_a_protobuf_content_event_too_deep_is_refused_alone(where: str) -> None:
    body = protobuf_request(
        [protobuf_record(USER, where=where), protobuf_record(USER, body=QUESTION)]
    )

    decoded = decode_logs_protobuf(body)

    assert _user_bodies(decoded) == [{"content": QUESTION}]
    assert [r.reason for r in decoded.rejections] == [f"log record '{USER}' {DEEP_REASON}"]
    assert decoded.ignored == 0


def test_a_deep_json_record_named_by_its_event_name_attribute_is_refused_by_that_name() -> None:
    deep = json_record("gen_ai.choice", where="body", name_as_attribute=True)

    decoded = decode_logs_json(json_request([deep, good_json_record()]))

    assert [r.reason for r in decoded.rejections] == [f"log record 'gen_ai.choice' {DEEP_REASON}"]
    assert _user_bodies(decoded) == [{"content": QUESTION}]


def test_a_deep_protobuf_record_named_by_its_event_name_attribute_is_refused_by_that_name() -> None:
    deep = protobuf_record("gen_ai.choice", where="body", name_as_attribute=True)

    decoded = decode_logs_protobuf(protobuf_request([deep, protobuf_record(USER, body=QUESTION)]))

    assert [r.reason for r in decoded.rejections] == [f"log record 'gen_ai.choice' {DEEP_REASON}"]
    assert _user_bodies(decoded) == [{"content": QUESTION}]


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_a_deep_record_that_is_no_content_event_is_ignored_like_the_others(encoding: str) -> None:
    if encoding == "json":
        decoded = decode_logs_json(
            json_request([json_record("http.request", where="body"), good_json_record()])
        )
    else:
        records = [
            protobuf_record("http.request", where="attributes"),
            protobuf_record(USER, body=QUESTION),
        ]
        decoded = decode_logs_protobuf(protobuf_request(records))

    assert decoded.rejections == []
    assert decoded.ignored == 1
    assert _user_bodies(decoded) == [{"content": QUESTION}]


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_a_deep_request_still_refuses_a_shallower_record_past_the_bound_by_name(
    encoding: str,
) -> None:
    """Decoded record by record, a record one level past `MAX_NESTING` is still refused with
    the attribute's own reason, next to the record too deep to decode at all."""
    if encoding == "json":
        records = [
            json_record(USER, where="attributes"),
            json_record("gen_ai.choice", where="attributes", depth=33, arrays=True),
            good_json_record(),
        ]
        decoded = decode_logs_json(json_request(records))
    else:
        raws = [
            protobuf_record(USER, where="attributes"),
            protobuf_record("gen_ai.choice", where="attributes", depth=33, arrays=True),
            protobuf_record(USER, body=QUESTION),
        ]
        decoded = decode_logs_protobuf(protobuf_request(raws))

    assert sorted(r.reason for r in decoded.rejections) == [
        "log record 'gen_ai.choice' attribute 'deep.attr' is nested more than 32 levels deep; "
        "flatten it or send it as JSON text",
        f"log record '{USER}' {DEEP_REASON}",
    ]
    assert _user_bodies(decoded) == [{"content": QUESTION}]


def test_a_json_resource_or_scope_too_deep_costs_its_records_nothing() -> None:
    deep = [{"key": "deep", "value": deep_json_value(DEPTH)}]
    body = json_request(
        [good_json_record()], resource={"attributes": deep}, scope={"name": "s", "attributes": deep}
    )

    decoded = decode_logs_json(body)

    assert decoded.rejections == []
    assert _user_bodies(decoded) == [{"content": QUESTION}]


def test_a_protobuf_resource_or_scope_too_deep_costs_its_records_nothing() -> None:
    deep = field(1, b"deep") + field(2, deep_any_value(DEPTH))
    body = protobuf_request(
        [protobuf_record(USER, body=QUESTION)],
        resource=field(1, deep),  # Resource.attributes
        scope=field(3, deep),  # InstrumentationScope.attributes
    )

    decoded = decode_logs_protobuf(body)

    assert decoded.rejections == []
    assert _user_bodies(decoded) == [{"content": QUESTION}]


def test_json_deeper_than_a_json_parser_reads_is_still_a_400() -> None:
    levels = 5000
    deep = '{"kvlistValue":{"values":[{"key":"k","value":' * levels + '{"stringValue":"leaf"}'
    record = f'{{"eventName":"{USER}","body":{deep}{"}]}}" * levels}}}'
    body = f'{{"resourceLogs":[{{"scopeLogs":[{{"logRecords":[{record}]}}]}}]}}'.encode()

    with pytest.raises(InvalidInput, match="^request body JSON is nested too deeply$"):
        decode_logs_json(body)
