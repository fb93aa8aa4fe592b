"""OTLP/HTTP decoding: protobuf and JSON bodies become SpanRecords or named rejections."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from neens.domain.spans import Rejection
from neens.domain.storable import MAX_NESTING
from neens.errors import InvalidInput
from neens.ingest.otlp import decode_json, decode_protobuf, encode_response, rejections_message
from tests.support.otlp import any_value, key_values

TRACE_ID = bytes.fromhex("5b8efff798038103d269b633813fc60c")
SPAN_ID = bytes.fromhex("eee19b7ec3c1b174")
PARENT_ID = bytes.fromhex("eee19b7ec3c1b173")
START_NANOS = 1_544_712_660_123_456_789
END_NANOS = 1_544_712_661_000_000_000

SPEC_EXAMPLE = """
{
  "resourceSpans": [
    {
      "resource": {
        "attributes": [{"key": "service.name", "value": {"stringValue": "my.service"}}]
      },
      "scopeSpans": [
        {
          "scope": {
            "name": "my.library",
            "version": "1.0.0",
            "attributes": [
              {"key": "my.scope.attribute", "value": {"stringValue": "some scope attribute"}}
            ]
          },
          "spans": [
            {
              "traceId": "5B8EFFF798038103D269B633813FC60C",
              "spanId": "EEE19B7EC3C1B174",
              "parentSpanId": "EEE19B7EC3C1B173",
              "name": "I'm a server span",
              "startTimeUnixNano": 1544712660000000000,
              "endTimeUnixNano": 1544712661000000000,
              "kind": 2,
              "attributes": [{"key": "my.span.attr", "value": {"stringValue": "some value"}}]
            }
          ]
        }
      ]
    }
  ]
}
"""
"""The example from opentelemetry-proto's examples/trace.json: upper-case hex ids, int kind."""


def make_span(
    name: str = "llm.call",
    *,
    trace_id: bytes = TRACE_ID,
    span_id: bytes = SPAN_ID,
    parent_span_id: bytes = b"",
    attributes: dict[str, Any] | None = None,
    **fields: Any,
) -> Span:
    return Span(
        name=name,
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_span_id,
        attributes=key_values(attributes or {}),
        **fields,
    )


def make_request(
    *spans: Span,
    resource: dict[str, Any] | None = None,
    scope_name: str = "neens.tests",
) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=key_values(resource or {})),
                scope_spans=[
                    ScopeSpans(scope=InstrumentationScope(name=scope_name), spans=list(spans))
                ],
            )
        ]
    )


def to_otlp_json(request: ExportTraceServiceRequest) -> bytes:
    """Encode as OTLP/JSON does: protobuf's JSON mapping, but trace and span ids in hex."""
    document = json_format.MessageToDict(request)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()


def only_span_json(span: dict[str, Any], resource: dict[str, Any] | None = None) -> bytes:
    group: dict[str, Any] = {"scopeSpans": [{"spans": [span]}]}
    if resource is not None:
        group["resource"] = resource
    return json.dumps({"resourceSpans": [group]}).encode()


# --- protobuf ------------------------------------------------------------------------------


def test_protobuf_span_round_trips_ids_times_kind_and_status() -> None:
    span = make_span(
        parent_span_id=PARENT_ID,
        kind=Span.SpanKind.SPAN_KIND_CLIENT,
        start_time_unix_nano=START_NANOS,
        end_time_unix_nano=END_NANOS,
        status=Status(code=Status.StatusCode.STATUS_CODE_ERROR, message="rate limited"),
    )

    batch = decode_protobuf(make_request(span).SerializeToString())

    assert batch.rejections == []
    (record,) = batch.spans
    assert record.trace_id == "5b8efff798038103d269b633813fc60c"
    assert record.span_id == "eee19b7ec3c1b174"
    assert record.parent_span_id == "eee19b7ec3c1b173"
    assert record.name == "llm.call"
    assert record.kind == "client"
    assert record.start_time == datetime(2018, 12, 13, 14, 51, 0, 123456, tzinfo=UTC)
    assert record.end_time == datetime(2018, 12, 13, 14, 51, 1, tzinfo=UTC)
    assert record.status_code == "error"
    assert record.status_message == "rate limited"
    assert record.scope_name == "neens.tests"
    assert record.input is None and record.output is None and record.agent_name is None


def test_unset_times_kind_status_and_parent_become_none() -> None:
    span = make_span(parent_span_id=bytes(8))

    (record,) = decode_protobuf(make_request(span).SerializeToString()).spans

    assert record.start_time is None and record.end_time is None
    assert record.kind is None
    assert record.status_code is None and record.status_message is None
    assert record.parent_span_id is None


def test_ok_status_and_internal_kind_are_named_in_lower_case() -> None:
    span = make_span(
        kind=Span.SpanKind.SPAN_KIND_INTERNAL,
        status=Status(code=Status.StatusCode.STATUS_CODE_OK),
    )

    (record,) = decode_protobuf(make_request(span).SerializeToString()).spans

    assert (record.kind, record.status_code) == ("internal", "ok")


def test_every_any_value_type_decodes_to_plain_python() -> None:
    attributes = {
        "s": "text",
        "b": True,
        "i": -42,
        "d": 2.5,
        "raw": b"\x01\xab",
        "list": ["a", 1, [False]],
        "map": {"inner": {"deeper": 1.0}, "n": 3},
    }
    span = make_span(attributes=attributes)
    span.attributes.append(KeyValue(key="empty", value=AnyValue()))

    (record,) = decode_protobuf(make_request(span).SerializeToString()).spans

    assert record.attributes == {
        "s": "text",
        "b": True,
        "i": -42,
        "d": 2.5,
        "raw": "01ab",
        "list": ["a", 1, [False]],
        "map": {"inner": {"deeper": 1.0}, "n": 3},
        "empty": None,
    }


def test_span_attributes_override_resource_attributes_and_the_resource_copy_is_kept() -> None:
    resource = {"service.name": "checkout", "neens.version_label": "from-resource", "region": "eu"}
    span = make_span(attributes={"neens.version_label": "from-span"})

    (record,) = decode_protobuf(make_request(span, resource=resource).SerializeToString()).spans

    assert record.attributes == {
        "service.name": "checkout",
        "neens.version_label": "from-span",
        "region": "eu",
    }
    assert record.resource_attributes == resource


def test_events_become_dicts_with_iso_times_and_attributes() -> None:
    span = make_span(
        events=[
            Span.Event(
                name="gen_ai.choice",
                time_unix_nano=START_NANOS,
                attributes=key_values({"index": 0, "message": {"role": "assistant"}}),
            ),
            Span.Event(name="no time"),
        ]
    )

    (record,) = decode_protobuf(make_request(span).SerializeToString()).spans

    assert record.events == [
        {
            "name": "gen_ai.choice",
            "time": "2018-12-13T14:51:00.123456+00:00",
            "attributes": {"index": 0, "message": {"role": "assistant"}},
        },
        {"name": "no time", "time": None, "attributes": {}},
    ]


@pytest.mark.parametrize(
    ("trace_id", "reason"),
    [
        (b"", "span 'llm.call' has no trace id"),
        (bytes(16), "span 'llm.call' has no trace id"),
        (b"\x01" * 8, "span 'llm.call' has a malformed trace id: 8 bytes, expected 16"),
    ],
)
def test_span_without_a_usable_trace_id_is_rejected_and_the_rest_kept(
    trace_id: bytes, reason: str
) -> None:
    bad = make_span(trace_id=trace_id)
    good = make_span("kept", span_id=b"\x02" * 8)

    batch = decode_protobuf(make_request(bad, good).SerializeToString())

    assert [record.name for record in batch.spans] == ["kept"]
    assert batch.rejections == [Rejection(reason)]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"span_id": b""}, "span 'llm.call' has no span id"),
        ({"span_id": bytes(8)}, "span 'llm.call' has no span id"),
        (
            {"span_id": b"\x01" * 16},
            "span 'llm.call' has a malformed span id: 16 bytes, expected 8",
        ),
        (
            {"parent_span_id": b"\x01" * 4},
            "span 'llm.call' has a malformed parent span id: 4 bytes, expected 8",
        ),
    ],
)
def test_span_without_a_usable_span_id_is_rejected(fields: dict[str, Any], reason: str) -> None:
    batch = decode_protobuf(make_request(make_span(**fields)).SerializeToString())

    assert batch.spans == []
    assert batch.rejections == [Rejection(reason)]


def test_nul_in_an_attribute_rejects_the_span_naming_the_attribute() -> None:
    bad = make_span(attributes={"input.value": "before\x00after"})
    good = make_span("kept", span_id=b"\x02" * 8, attributes={"input.value": "fine"})

    batch = decode_protobuf(make_request(bad, good).SerializeToString())

    assert [record.name for record in batch.spans] == ["kept"]
    assert batch.rejections == [
        Rejection(
            "span 'llm.call' attribute 'input.value' contains a NUL character (\\x00) at offset 6"
        )
    ]


def test_nul_nested_in_a_kvlist_names_the_path_inside_the_attribute() -> None:
    span = make_span(attributes={"gen_ai.input.messages": [{"role": "user", "content": "a\x00"}]})

    batch = decode_protobuf(make_request(span).SerializeToString())

    assert batch.rejections == [
        Rejection(
            "span 'llm.call' attribute 'gen_ai.input.messages' [0]['content'] contains a NUL "
            "character (\\x00) at offset 1"
        )
    ]


def test_nul_in_the_span_name_is_rejected_with_an_escaped_label() -> None:
    batch = decode_protobuf(make_request(make_span("bad\x00name")).SerializeToString())

    assert batch.spans == []
    assert batch.rejections == [
        Rejection("span 'bad\\x00name' name contains a NUL character (\\x00) at offset 3")
    ]


def test_nul_in_a_resource_attribute_rejects_the_spans_under_that_resource() -> None:
    request = make_request(make_span(), resource={"host.name": "\x00"})

    batch = decode_protobuf(request.SerializeToString())

    assert batch.spans == []
    assert batch.rejections == [
        Rejection(
            "span 'llm.call' resource attribute 'host.name' contains a NUL character (\\x00) "
            "at offset 0"
        )
    ]


def test_profiles_only_string_index_in_a_resource_rejects_its_spans() -> None:
    request = make_request(make_span())
    request.resource_spans[0].resource.attributes.append(
        KeyValue(key="host", value=AnyValue(string_value_strindex=1))
    )

    batch = decode_protobuf(request.SerializeToString())

    assert batch.rejections == [
        Rejection(
            "span 'llm.call' resource attribute 'host' uses string_value_strindex, "
            "which only the profiles signal defines"
        )
    ]


def test_a_span_kind_from_a_newer_otlp_version_is_unknown_not_guessed() -> None:
    span = {"traceId": TRACE_ID.hex(), "spanId": SPAN_ID.hex(), "name": "future", "kind": 9}

    (record,) = decode_json(only_span_json(span)).spans

    assert record.kind is None


def test_profiles_only_string_index_values_reject_the_span() -> None:
    span = make_span()
    span.attributes.append(KeyValue(key="indexed", value=AnyValue(string_value_strindex=3)))

    batch = decode_protobuf(make_request(span).SerializeToString())

    assert batch.spans == []
    assert batch.rejections == [
        Rejection(
            "span 'llm.call' attribute 'indexed' uses string_value_strindex, "
            "which only the profiles signal defines"
        )
    ]


def test_corrupt_protobuf_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="not a valid OTLP ExportTraceServiceRequest protobuf"):
        decode_protobuf(b"\xff\xff\xff\xff")


def test_protobuf_with_invalid_utf8_text_is_invalid_input() -> None:
    body = make_request(make_span("PLACEHOLDER")).SerializeToString()

    with pytest.raises(InvalidInput, match="protobuf"):
        decode_protobuf(body.replace(b"PLACEHOLDER", b"PLACEHOLD\xff\xfe"))


def test_empty_protobuf_body_is_an_empty_batch() -> None:
    batch = decode_protobuf(b"")

    assert (batch.spans, batch.rejections) == ([], [])


# --- OTLP/JSON -----------------------------------------------------------------------------


def test_the_spec_json_example_decodes_with_hex_ids_and_int_kind() -> None:
    batch = decode_json(SPEC_EXAMPLE.encode())

    assert batch.rejections == []
    (record,) = batch.spans
    assert record.trace_id == "5b8efff798038103d269b633813fc60c"
    assert record.span_id == "eee19b7ec3c1b174"
    assert record.parent_span_id == "eee19b7ec3c1b173"
    assert record.name == "I'm a server span"
    assert record.kind == "server"
    assert record.start_time == datetime(2018, 12, 13, 14, 51, tzinfo=UTC)
    assert record.end_time == datetime(2018, 12, 13, 14, 51, 1, tzinfo=UTC)
    assert record.scope_name == "my.library"
    assert record.attributes == {"service.name": "my.service", "my.span.attr": "some value"}
    assert record.resource_attributes == {"service.name": "my.service"}


def test_json_and_protobuf_of_the_same_request_decode_to_the_same_records() -> None:
    request = make_request(
        make_span(
            parent_span_id=PARENT_ID,
            kind=Span.SpanKind.SPAN_KIND_CLIENT,
            start_time_unix_nano=START_NANOS,
            end_time_unix_nano=END_NANOS,
            status=Status(code=Status.StatusCode.STATUS_CODE_OK),
            attributes={"raw": b"\x00\xff", "tokens": 2**62, "nested": {"a": [1.5, "x"]}},
            events=[Span.Event(name="e", time_unix_nano=END_NANOS)],
        ),
        make_span("second", span_id=b"\x09" * 8),
        resource={"service.name": "svc"},
    )

    from_protobuf = decode_protobuf(request.SerializeToString())
    from_json = decode_json(to_otlp_json(request))

    assert from_json == from_protobuf
    assert len(from_json.spans) == 2


def test_json_accepts_string_enums_string_int64_and_snake_case_keys() -> None:
    body = json.dumps(
        {
            "resource_spans": [
                {
                    "scope_spans": [
                        {
                            "spans": [
                                {
                                    "trace_id": TRACE_ID.hex(),
                                    "span_id": SPAN_ID.hex(),
                                    "name": "chat",
                                    "kind": "SPAN_KIND_PRODUCER",
                                    "start_time_unix_nano": str(START_NANOS),
                                    "status": {"code": "STATUS_CODE_ERROR"},
                                    "attributes": [
                                        {"key": "n", "value": {"intValue": "7"}},
                                    ],
                                }
                            ]
                        }
                    ]
                }
            ]
        }
    ).encode()

    (record,) = decode_json(body).spans

    assert record.kind == "producer"
    assert record.status_code == "error"
    assert record.start_time == datetime(2018, 12, 13, 14, 51, 0, 123456, tzinfo=UTC)
    assert record.attributes == {"n": 7}


def test_json_ignores_fields_it_does_not_know() -> None:
    document = json.loads(SPEC_EXAMPLE)
    document["futureEnvelopeField"] = {"x": 1}
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["futureSpanField"] = [1, 2, 3]
    span["attributes"][0]["value"]["futureValueField"] = True

    (record,) = decode_json(json.dumps(document).encode()).spans

    assert record.attributes["my.span.attr"] == "some value"


def test_json_links_with_hex_ids_are_accepted() -> None:
    span = {
        "traceId": TRACE_ID.hex(),
        "spanId": SPAN_ID.hex(),
        "name": "linked",
        "links": [{"traceId": "ab" * 16, "spanId": "cd" * 8}],
    }

    (record,) = decode_json(only_span_json(span)).spans

    assert record.name == "linked"


def test_json_base64_ids_are_invalid_input_naming_the_field() -> None:
    span = {
        "traceId": base64.b64encode(TRACE_ID).decode(),
        "spanId": SPAN_ID.hex(),
        "name": "x",
    }

    with pytest.raises(InvalidInput, match="not a hex string") as caught:
        decode_json(only_span_json(span))

    assert caught.value.field == "resourceSpans[0].scopeSpans[0].spans[0].traceId"
    assert "hex, not base64" in caught.value.message


def test_json_odd_length_hex_id_is_invalid_input() -> None:
    span = {"traceId": TRACE_ID.hex(), "spanId": "abc", "name": "x"}

    with pytest.raises(InvalidInput, match=r"spans\[0\]\.spanId is not a hex string"):
        decode_json(only_span_json(span))


def test_json_id_of_the_wrong_length_rejects_only_that_span() -> None:
    short = {"traceId": "ab" * 8, "spanId": SPAN_ID.hex(), "name": "short"}

    batch = decode_json(only_span_json(short))

    assert batch.rejections == [
        Rejection("span 'short' has a malformed trace id: 8 bytes, expected 16")
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[1, 2]", "must be a JSON object, not an array"),
        (b'"text"', "must be a JSON object, not a string"),
        (b'{"resourceSpans": 3}', "not a valid OTLP/JSON ExportTraceServiceRequest"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}',
            "startTimeUnixNano",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "JSON"),
        (b'{"resourceSpans": [], "resourceSpans": []}', "'resourceSpans' is given twice"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "a", "attributes": [],'
            b' "attributes": []}]}]}]}',
            "'attributes' is given twice",
        ),
    ],
)
def test_malformed_json_is_invalid_input_naming_the_problem(body: bytes, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        decode_json(body)


def test_empty_json_object_is_an_empty_batch() -> None:
    batch = decode_json(b"{}")

    assert (batch.spans, batch.rejections) == ([], [])


def test_json_lone_surrogate_in_an_attribute_rejects_only_that_span() -> None:
    bad = {
        "traceId": TRACE_ID.hex(),
        "spanId": SPAN_ID.hex(),
        "name": "truncated",
        "attributes": [{"key": "output.value", "value": {"stringValue": "cut emoji \ud83d"}}],
    }
    good = {"traceId": TRACE_ID.hex(), "spanId": "02" * 8, "name": "kept"}
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [bad, good]}]}]}).encode()

    batch = decode_json(body)

    assert [record.name for record in batch.spans] == ["kept"]
    assert batch.rejections == [
        Rejection(
            "span 'truncated' attribute 'output.value' contains a lone surrogate (\\ud83d) "
            "at offset 10"
        )
    ]


def test_json_lone_surrogate_inside_a_nested_attribute_names_its_path() -> None:
    value = {"arrayValue": {"values": [{"stringValue": "ok"}, {"stringValue": "\udc00"}]}}
    span = {
        "traceId": TRACE_ID.hex(),
        "spanId": SPAN_ID.hex(),
        "name": "nested",
        "attributes": [{"key": "list", "value": value}],
    }

    batch = decode_json(only_span_json(span))

    assert batch.rejections == [
        Rejection(
            "span 'nested' attribute 'list' [1] contains a lone surrogate (\\udc00) at offset 0"
        )
    ]


def test_json_lone_surrogate_in_the_span_name_or_an_event_is_named() -> None:
    named = {"traceId": TRACE_ID.hex(), "spanId": SPAN_ID.hex(), "name": "a\ud800"}
    evented = {
        "traceId": TRACE_ID.hex(),
        "spanId": "02" * 8,
        "name": "evented",
        "events": [
            {"name": "fine"},
            {"name": "e", "attributes": [{"key": "k", "value": {"stringValue": "\ud800"}}]},
        ],
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [named, evented]}]}]}).encode()

    batch = decode_json(body)

    assert batch.spans == []
    assert batch.rejections == [
        Rejection("span 'a\\ud800' name contains a lone surrogate (\\ud800) at offset 1"),
        Rejection(
            "span 'evented' event 1 attribute 'k' contains a lone surrogate (\\ud800) at offset 0"
        ),
    ]


def test_json_lone_surrogate_in_a_resource_rejects_its_spans_and_keeps_other_resources() -> None:
    span = {"traceId": TRACE_ID.hex(), "spanId": SPAN_ID.hex(), "name": "under bad resource"}
    other = {"traceId": TRACE_ID.hex(), "spanId": "02" * 8, "name": "elsewhere"}
    bad_resource = {"attributes": [{"key": "host.name", "value": {"stringValue": "\udfff"}}]}
    body = json.dumps(
        {
            "resourceSpans": [
                {"resource": bad_resource, "scopeSpans": [{"spans": [span]}]},
                {"scopeSpans": [{"spans": [other]}]},
            ]
        }
    ).encode()

    batch = decode_json(body)

    assert [record.name for record in batch.spans] == ["elsewhere"]
    assert batch.rejections == [
        Rejection(
            "span 'under bad resource' resource attribute 'host.name' contains a lone "
            "surrogate (\\udfff) at offset 0"
        )
    ]


def test_rejection_reasons_can_always_be_encoded_in_the_response() -> None:
    batch = decode_json(
        only_span_json({"traceId": "", "spanId": SPAN_ID.hex(), "name": "bad \ud800 name"})
    )
    message = rejections_message(batch.rejections)

    body = encode_response(len(batch.rejections), message, json=False)

    decoded = ExportTraceServiceResponse.FromString(body)
    assert decoded.partial_success.error_message == (
        "1 span rejected: span 'bad \\ud800 name' name contains a lone surrogate (\\ud800) "
        "at offset 4"
    )


def test_a_response_message_with_a_lone_surrogate_is_escaped_rather_than_failing() -> None:
    body = encode_response(1, "quoted \ud800 text", json=False)

    decoded = ExportTraceServiceResponse.FromString(body)
    assert decoded.partial_success.error_message == "quoted \\ud800 text"


# --- responses -----------------------------------------------------------------------------


def test_protobuf_response_carries_partial_success_only_when_there_is_something_to_say() -> None:
    partial = ExportTraceServiceResponse.FromString(
        encode_response(3, "3 spans rejected", json=False)
    )
    warning = ExportTraceServiceResponse.FromString(
        encode_response(0, "1 warning on stored spans", json=False)
    )
    full = encode_response(0, "", json=False)

    assert partial.partial_success.rejected_spans == 3
    assert partial.partial_success.error_message == "3 spans rejected"
    # OTLP: rejected 0 with a message is a warning; the spans were all accepted.
    assert warning.partial_success.rejected_spans == 0
    assert warning.partial_success.error_message == "1 warning on stored spans"
    assert full == b""
    assert not ExportTraceServiceResponse.FromString(full).HasField("partial_success")


def test_json_response_is_otlp_json() -> None:
    partial = json.loads(encode_response(2, "bad spans", json=True))
    full = json.loads(encode_response(0, "", json=True))

    assert partial == {"partialSuccess": {"rejectedSpans": "2", "errorMessage": "bad spans"}}
    assert full == {}


def test_negative_rejection_count_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="rejected must be >= 0"):
        encode_response(-1, "", json=True)


def test_rejections_message_quotes_the_first_reasons_and_counts_the_rest() -> None:
    rejections = [Rejection(f"span '{index}' has no trace id") for index in range(7)]

    message = rejections_message(rejections, limit=2)

    assert message == (
        "7 spans rejected: span '0' has no trace id; span '1' has no trace id; and 5 more"
    )
    assert rejections_message([]) == ""


# --- properties ----------------------------------------------------------------------------

storable_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    max_size=20,
)
attribute_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | storable_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(storable_text, children, max_size=4)
    ),
    max_leaves=12,
)
attribute_maps = st.dictionaries(storable_text, attribute_values, max_size=6)


def _any_value_or_empty(value: object) -> AnyValue:
    if value is None:
        return AnyValue()
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[_any_value_or_empty(v) for v in value]))
    if isinstance(value, dict):
        return AnyValue(
            kvlist_value=KeyValueList(
                values=[KeyValue(key=k, value=_any_value_or_empty(v)) for k, v in value.items()]
            )
        )
    return any_value(value)


@given(attributes=attribute_maps)
def test_any_storable_attribute_map_survives_protobuf_and_json_unchanged(
    attributes: dict[str, Any],
) -> None:
    span = make_span()
    span.attributes.extend(
        KeyValue(key=key, value=_any_value_or_empty(value)) for key, value in attributes.items()
    )
    request = make_request(span)

    (from_protobuf,) = decode_protobuf(request.SerializeToString()).spans
    (from_json,) = decode_json(to_otlp_json(request)).spans

    assert from_protobuf.attributes == attributes
    assert from_json.attributes == attributes


@given(resource=attribute_maps, own=attribute_maps)
def test_span_attributes_always_override_resource_attributes(
    resource: dict[str, Any], own: dict[str, Any]
) -> None:
    span = make_span()
    span.attributes.extend(
        KeyValue(key=key, value=_any_value_or_empty(value)) for key, value in own.items()
    )
    request = make_request(span)
    request.resource_spans[0].resource.attributes.extend(
        KeyValue(key=key, value=_any_value_or_empty(value)) for key, value in resource.items()
    )

    (record,) = decode_protobuf(request.SerializeToString()).spans

    assert record.attributes == {**resource, **own}
    assert record.resource_attributes == resource
    for key, value in own.items():
        assert record.attributes[key] == value


def test_json_lone_surrogate_in_a_scope_rejects_only_that_scopes_spans() -> None:
    bad_scope = {"name": "lib\udc80"}
    span = {"traceId": TRACE_ID.hex(), "spanId": SPAN_ID.hex(), "name": "in bad scope"}
    other = {"traceId": TRACE_ID.hex(), "spanId": "02" * 8, "name": "in good scope"}
    body = json.dumps(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {"scope": bad_scope, "spans": [span]},
                        {"scope": {"name": "lib"}, "spans": [other]},
                    ]
                }
            ]
        }
    ).encode()

    batch = decode_json(body)

    assert [record.name for record in batch.spans] == ["in good scope"]
    assert batch.rejections == [
        Rejection(
            "span 'in bad scope' scope ['name'] contains a lone surrogate (\\udc80) at offset 3"
        )
    ]


def test_an_escaped_backslash_before_u_d800_is_ordinary_text() -> None:
    span = {
        "traceId": TRACE_ID.hex(),
        "spanId": SPAN_ID.hex(),
        "name": "literal",
        "attributes": [{"key": "code", "value": {"stringValue": "\\ud800 is a surrogate"}}],
    }

    (record,) = decode_json(only_span_json(span)).spans

    assert record.attributes["code"] == "\\ud800 is a surrogate"


# --- nesting beyond the parsers' limits -------------------------------------------------------


def _field(number: int, payload: bytes) -> bytes:
    def varint(n: int) -> bytes:
        out = b""
        while True:
            byte, n = n & 0x7F, n >> 7
            if not n:
                return out + bytes([byte])
            out += bytes([byte | 0x80])

    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _deep_key_value(key: bytes, depth: int) -> bytes:
    """A KeyValue whose value nests `depth` key/value lists, encoded by hand (the protobuf
    library refuses to build it)."""
    value = _field(1, b"leaf")
    for _ in range(depth):
        value = _field(6, _field(1, _field(1, b"k") + _field(2, value)))
    return _field(1, key) + _field(2, value)


def _span_bytes(name: str, span_id: bytes, extra: bytes = b"") -> bytes:
    return Span(trace_id=b"\x01" * 16, span_id=span_id, name=name).SerializeToString() + extra


def test_a_span_too_deep_for_protobuf_is_refused_alone_and_its_neighbours_decode() -> None:
    deep = _span_bytes("deep", b"\x02" * 8, _field(9, _deep_key_value(b"deep.attr", 200)))
    fine = _span_bytes("fine", b"\x03" * 8)
    body = _field(1, _field(2, _field(2, deep) + _field(2, fine)))
    batch = decode_protobuf(body)
    assert [s.name for s in batch.spans] == ["fine"]
    [rejection] = batch.rejections
    assert rejection.reason.startswith("span 'deep' nests attributes")


def test_a_resource_too_deep_for_protobuf_refuses_its_spans_only() -> None:
    resource = _field(1, _field(1, _deep_key_value(b"deep.resource", 200)))
    mine = _field(1, resource + _field(2, _field(2, _span_bytes("mine", b"\x02" * 8))))
    other = _field(1, _field(2, _field(2, _span_bytes("other", b"\x03" * 8))))
    batch = decode_protobuf(mine + other)
    assert [s.name for s in batch.spans] == ["other"]
    assert [r.reason.split(" nests")[0] for r in batch.rejections] == ["span 'mine' its resource"]


def _nested_arrays(key: bytes, depth: int) -> bytes:
    value = _field(1, b"leaf")
    for _ in range(depth):
        value = _field(5, _field(1, value))  # AnyValue.array_value { values: [value] }
    return _field(1, key) + _field(2, value)


def _one_span_request(attribute: bytes) -> bytes:
    return _field(1, _field(2, _field(2, _span_bytes("s", b"\x02" * 8, _field(9, attribute)))))


def test_an_attribute_one_level_past_the_bound_is_refused_by_name() -> None:
    batch = decode_protobuf(_one_span_request(_nested_arrays(b"a", MAX_NESTING + 1)))
    [rejection] = batch.rejections
    assert rejection.reason == (
        "span 's' attribute 'a' is nested more than 32 levels deep; "
        "flatten it or send it as JSON text"
    )
    within = decode_protobuf(_one_span_request(_nested_arrays(b"a", MAX_NESTING)))
    assert within.rejections == []
    assert [s.name for s in within.spans] == ["s"]


def test_corrupt_protobuf_is_still_a_400_not_a_per_span_rejection() -> None:
    with pytest.raises(InvalidInput):
        decode_protobuf(b"\xff\xff\xff not protobuf")


def _json_nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


def _json_span(name: str, span_id: str, **extra: Any) -> dict[str, Any]:
    return {"traceId": "01" * 16, "spanId": span_id, "name": name, **extra}


def test_otlp_json_too_deep_for_the_parser_refuses_only_the_deep_span_scope_or_resource() -> None:
    deep_attr = [{"key": "deep.attr", "value": _json_nested(60)}]
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": deep_attr},
                "scopeSpans": [{"spans": [_json_span("under-deep-resource", "0000000000000001")]}],
            },
            {
                "scopeSpans": [
                    {
                        "scope": {"name": "s", "attributes": deep_attr},
                        "spans": [_json_span("under-deep-scope", "0000000000000002")],
                    },
                    {
                        "spans": [
                            _json_span("deep", "0000000000000003", attributes=deep_attr),
                            _json_span("fine", "0000000000000004"),
                        ]
                    },
                ]
            },
        ]
    }
    batch = decode_json(json.dumps(document).encode())
    assert [s.name for s in batch.spans] == ["fine"]
    assert sorted(r.reason.split(" nests")[0] for r in batch.rejections) == [
        "span 'deep'",
        "span 'under-deep-resource' its resource",
        "span 'under-deep-scope' its scope",
    ]


def _chat_span_json(**fields: Any) -> dict[str, Any]:
    return {"traceId": TRACE_ID.hex(), "spanId": SPAN_ID.hex(), "name": "chat", **fields}


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"status": "ERROR"}, "has status a string: send an object"),
        ({"status": {"code": "ERROR"}}, "has status.code 'ERROR', which is none of"),
        ({"kind": "SPAN_KIND_BOGUS"}, "has kind 'SPAN_KIND_BOGUS', which is none of"),
        (
            {"attributes": [{"key": "gen_ai.request.model", "value": "gpt-4o"}]},
            "attribute 'gen_ai.request.model' is a string where OTLP/JSON wants an AnyValue",
        ),
        (
            {"attributes": [{"key": "tags", "value": {"arrayValue": {"values": ["a"]}}}]},
            "attribute 'tags' is a string where OTLP/JSON wants an AnyValue",
        ),
        (
            {"events": [{"name": "e", "attributes": [{"key": "n", "value": 3}]}]},
            "event 0 attribute 'n' is a number where OTLP/JSON wants an AnyValue",
        ),
    ],
)
def test_json_values_not_of_otlps_shape_reject_their_span_naming_the_field(
    fields: dict[str, Any], said: str
) -> None:
    """Protobuf's reader, skipping unknown fields, also skipped these: an error status came
    through as ok, an attribute as null, with a 200."""
    batch = decode_json(only_span_json(_chat_span_json(**fields)))

    assert batch.spans == []
    [rejection] = batch.rejections
    assert rejection.reason.startswith("span 'chat' "), rejection
    assert said in rejection.reason, rejection


@pytest.mark.parametrize(
    "fields",
    [
        {"status": {"code": "STATUS_CODE_ERROR", "message": "boom"}},
        {"status": {"code": 2}},
        {"status": {}},
        {"kind": "SPAN_KIND_CLIENT"},
        {"kind": 3},
        {
            "attributes": [
                {"key": "a", "value": {"arrayValue": {"values": [{"stringValue": "x"}]}}},
                {"key": "k", "value": {"kvlistValue": {"values": [{"key": "b", "value": {}}]}}},
                {"key": "empty", "value": {}},
            ]
        },
    ],
)
def test_json_values_of_otlps_shape_are_read(fields: dict[str, Any]) -> None:
    batch = decode_json(only_span_json(_chat_span_json(**fields)))

    assert batch.rejections == []
    assert len(batch.spans) == 1
