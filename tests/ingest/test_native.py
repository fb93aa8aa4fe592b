"""The native session JSON becomes the same SpanRecords an OTLP GenAI span would."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neens.domain.conventions import span_view
from neens.domain.spans import Rejection
from neens.errors import InvalidInput, Unprocessable
from neens.ingest.native import decode_native


def session(*spans: dict[str, Any], **session_fields: Any) -> dict[str, Any]:
    return {"session": {"id": "sess-1", **session_fields}, "spans": list(spans)}


def span(span_id: str = "s1", **fields: Any) -> dict[str, Any]:
    return {"id": span_id, "name": f"step {span_id}", **fields}


def test_a_full_native_span_decodes_to_a_record() -> None:
    payload = session(
        span(
            "llm-1",
            parent_id="agent-1",
            kind="llm",
            input="What is 2+2?",
            output="4",
            start_time="2025-01-01T10:00:00Z",
            end_time=1_735_725_601_500_000_000,
            status="error",
            model="gpt-4o",
            input_tokens=12,
            output_tokens=3,
            attributes={"temperature": 0.2},
        ),
        agent_name="calculator",
        attributes={"deployment": "staging"},
    )

    batch = decode_native(payload)

    assert batch.rejections == []
    (record,) = batch.spans
    assert record.trace_id == "sess-1"
    assert record.span_id == "llm-1"
    assert record.parent_span_id == "agent-1"
    assert record.name == "step llm-1"
    assert record.kind == "llm"
    assert record.input == "What is 2+2?"
    assert record.output == "4"
    assert record.start_time == datetime(2025, 1, 1, 10, 0, tzinfo=UTC)
    assert record.end_time == datetime(2025, 1, 1, 10, 0, 1, 500000, tzinfo=UTC)
    assert record.status_code == "error"
    assert record.agent_name == "calculator"
    assert record.resource_attributes == {"deployment": "staging"}
    assert record.attributes == {
        "deployment": "staging",
        "temperature": 0.2,
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 3,
    }


def test_native_fields_read_through_conventions_like_an_otlp_genai_span() -> None:
    (record,) = decode_native(
        session(span(kind="llm", model="claude-3-5-sonnet", input_tokens=5, output_tokens=7))
    ).spans

    view = span_view(record)

    assert (view.kind, view.model, view.input_tokens, view.output_tokens) == (
        "llm",
        "claude-3-5-sonnet",
        5,
        7,
    )


def test_span_attributes_already_carrying_genai_names_are_not_overwritten() -> None:
    attributes = {
        "gen_ai.request.model": "from-attributes",
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 200,
    }
    payload = session(
        span(model="from-field", input_tokens=1, output_tokens=2, attributes=attributes)
    )

    (record,) = decode_native(payload).spans

    assert record.attributes == attributes


def test_session_attributes_are_overridden_by_span_attributes() -> None:
    payload = session(
        span(attributes={"neens.version_label": "span"}),
        attributes={"neens.version_label": "session", "team": "search"},
    )

    (record,) = decode_native(payload).spans

    assert record.attributes == {"neens.version_label": "span", "team": "search"}
    assert record.resource_attributes == {"neens.version_label": "session", "team": "search"}


def test_every_span_gets_the_session_id_and_agent_name() -> None:
    payload = session(span("a"), span("b", parent_id="a"), agent_name="planner")

    batch = decode_native(payload)

    assert [(r.trace_id, r.agent_name) for r in batch.spans] == [
        ("sess-1", "planner"),
        ("sess-1", "planner"),
    ]


def test_a_session_with_zero_spans_decodes_to_an_empty_batch() -> None:
    batch = decode_native(session())

    assert (batch.spans, batch.rejections) == ([], [])


def test_missing_optional_fields_become_none() -> None:
    (record,) = decode_native(session(span())).spans

    assert record.parent_span_id is None
    assert record.kind is None
    assert record.start_time is None and record.end_time is None
    assert record.status_code is None
    assert record.input is None and record.output is None
    assert record.agent_name is None
    assert record.attributes == {} and record.resource_attributes == {}


def test_structured_input_and_output_are_json_encoded() -> None:
    messages = [{"role": "user", "content": "héllo 🌍"}]

    (record,) = decode_native(session(span(input=messages, output={"answer": 42}))).spans

    assert record.input is not None and json.loads(record.input) == messages
    assert "héllo 🌍" in record.input
    assert record.output == '{"answer": 42}'


def test_naive_iso_times_are_utc_and_offsets_are_converted() -> None:
    payload = session(
        span(start_time="2025-03-01T12:00:00", end_time="2025-03-01T14:00:00+02:00"),
    )

    (record,) = decode_native(payload).spans

    assert record.start_time == datetime(2025, 3, 1, 12, tzinfo=UTC)
    assert record.end_time == datetime(2025, 3, 1, 12, tzinfo=UTC)


def test_empty_parent_id_and_zero_time_mean_absent() -> None:
    (record,) = decode_native(session(span(parent_id="", start_time=0))).spans

    assert record.parent_span_id is None
    assert record.start_time is None


def test_upper_case_status_is_accepted() -> None:
    (record,) = decode_native(session(span(status="OK"))).spans

    assert record.status_code == "ok"


def test_a_body_that_is_not_an_object_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="must be a JSON object"):
        decode_native([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"spans": []}, "session"),
        ({"session": "s", "spans": []}, "session"),
        ({"session": {}, "spans": []}, "session.id"),
        ({"session": {"id": ""}, "spans": []}, "session.id"),
        ({"session": {"id": 7}, "spans": []}, "session.id"),
        ({"session": {"id": "a\x00b"}, "spans": []}, "session.id"),
        ({"session": {"id": "s", "agent_name": 3}, "spans": []}, "session.agent_name"),
        ({"session": {"id": "s", "attributes": []}, "spans": []}, "session.attributes"),
        ({"session": {"id": "s"}}, "spans"),
        ({"session": {"id": "s"}, "spans": {}}, "spans"),
        (session("not an object"), "spans[0]"),  # type: ignore[arg-type]
        (session(span(), {"name": "no id"}), "spans[1].id"),
        (session(span(), span(7)), "spans[1].id"),  # type: ignore[arg-type]
        (session(span("a"), span("a")), "spans[1].id"),
        (session({"id": "x"}), "spans[0].name"),
        (session(span(parent_id=3)), "spans[0].parent_id"),
        (session(span(parent_id="s1")), "spans[0].parent_id"),
        (session(span(kind=1)), "spans[0].kind"),
        (session(span(start_time="yesterday")), "spans[0].start_time"),
        (session(span(start_time=-1)), "spans[0].start_time"),
        (session(span(start_time=1.7e18)), "spans[0].start_time"),
        (session(span(end_time=True)), "spans[0].end_time"),
        (session(span(end_time=10**30)), "spans[0].end_time"),
        (session(span(status="failed")), "spans[0].status"),
        (session(span(model=["gpt-4o"])), "spans[0].model"),
        (session(span(input_tokens=-1)), "spans[0].input_tokens"),
        (session(span(input_tokens="12")), "spans[0].input_tokens"),
        (session(span(output_tokens=1.5)), "spans[0].output_tokens"),
        (session(span(output_tokens=True)), "spans[0].output_tokens"),
        (session(span(attributes={1: "x"})), "spans[0].attributes"),
    ],
)
def test_a_wrong_field_is_unprocessable_and_named(payload: dict[str, Any], field: str) -> None:
    with pytest.raises(Unprocessable) as caught:
        decode_native(payload)

    assert caught.value.field == field
    assert caught.value.message.startswith(field)


def test_unstorable_text_rejects_only_that_span_naming_the_attribute() -> None:
    payload = session(
        span("bad", attributes={"input.value": "x\x00"}),
        span("good"),
    )

    batch = decode_native(payload)

    assert [record.span_id for record in batch.spans] == ["good"]
    assert batch.rejections == [
        Rejection(
            "span 'step bad' attribute 'input.value' contains a NUL character (\\x00) at offset 1"
        )
    ]


def test_a_lone_surrogate_in_the_native_input_rejects_the_span() -> None:
    batch = decode_native(session(span(input="emoji cut \ud83d")))

    assert batch.spans == []
    assert batch.rejections == [
        Rejection("span 'step s1' input contains a lone surrogate (\\ud83d) at offset 10")
    ]


def test_a_200000_character_unicode_input_survives_unchanged() -> None:
    text = ("日本語 🌍 ünïcödé " * 15_000)[:200_000]
    assert len(text) == 200_000

    (record,) = decode_native(session(span(input=text, output=text[::-1]))).spans

    assert record.input == text
    assert record.output == text[::-1]


@given(tokens=st.integers(min_value=0, max_value=10**12))
def test_any_native_token_count_reaches_the_view_unchanged(tokens: int) -> None:
    payload = session(span(kind="llm", model="m", input_tokens=tokens, output_tokens=tokens))

    (record,) = decode_native(payload).spans

    view = span_view(record)
    assert (view.input_tokens, view.output_tokens) == (tokens, tokens)


def test_a_push_answer_session_id_is_refused() -> None:
    with pytest.raises(Unprocessable) as refused:
        decode_native(session(span(), id="ppr_abc:dsi_def"))
    assert refused.value.field == "session.id"


def test_datetimes_are_read_as_given_by_the_api_layer() -> None:
    when = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    [record] = decode_native(session(span(start_time=when))).spans
    assert record.start_time == when
