"""OpenInference and OpenTelemetry GenAI attributes read into one SpanView."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from neens.domain.convention_tables import CONVENTIONS, SPAN_KINDS, TOKEN_KEYS
from neens.domain.conventions import SpanView, span_view, token_count
from neens.domain.spans import SpanRecord
from neens.domain.storable import (
    MAX_NESTING,
    nesting_reason,
    record_unstorable_reason,
    safe_label,
    unstorable_text_reason,
)
from neens.ingest.native import decode_native


def record(
    attributes: dict[str, Any] | None = None,
    *,
    kind: str | None = None,
    **fields: Any,
) -> SpanRecord:
    defaults: dict[str, Any] = {
        "trace_id": "t",
        "span_id": "s",
        "parent_span_id": None,
        "name": "span",
        "start_time": None,
        "end_time": None,
        "status_code": None,
        "status_message": None,
    }
    return SpanRecord(kind=kind, attributes=attributes or {}, **{**defaults, **fields})


def view_of(attributes: dict[str, Any], **fields: Any) -> SpanView:
    return span_view(record(attributes, **fields))


# --- storability ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["", "plain", "日本語 🌍", 0, -1, 2.5, True, None, ["a", {"b": [1, "c"]}], {"k": "v"}],
)
def test_storable_values_have_no_reason(value: object) -> None:
    assert unstorable_text_reason(value) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("ab\x00", "contains a NUL character (\\x00) at offset 2"),
        ("\ud83d", "contains a lone surrogate (\\ud83d) at offset 0"),
        (["ok", "\x00"], "[1] contains a NUL character (\\x00) at offset 0"),
        (
            {"a": [{"b": "x\udc00"}]},
            "['a'][0]['b'] contains a lone surrogate (\\udc00) at offset 1",
        ),
        ({"k\x00": 1}, "['k\\x00'] key contains a NUL character (\\x00) at offset 1"),
        (math.nan, "is nan, which JSON cannot represent"),
        ({"x": [math.inf]}, "['x'][0] is inf, which JSON cannot represent"),
    ],
)
def test_unstorable_values_are_named_with_their_path(value: object, reason: str) -> None:
    assert unstorable_text_reason(value) == reason


def test_a_valid_surrogate_pair_decoded_from_json_is_storable() -> None:
    text = json.loads('"\\ud83d\\ude00"')

    assert text == "😀"
    assert unstorable_text_reason(text) is None


def test_safe_label_escapes_unstorable_text_and_bounds_length() -> None:
    assert safe_label("chat") == "'chat'"
    assert safe_label("a\x00\ud800") == "'a\\x00\\ud800'"
    assert safe_label("x" * 200) == repr("x" * 80 + "…")


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"status_message": "\x00"}, "span 'span' status message contains a NUL"),
        ({"resource_attributes": {"h": "\x00"}}, "span 'span' resource attribute 'h' contains"),
        ({"attributes": {"\x00": 1}}, "span 'span' attribute key '\\x00' contains a NUL"),
        ({"events": [{"name": "\ud800"}]}, "span 'span' event 0 ['name'] contains a lone"),
        ({"agent_name": "\x00"}, "span 'span' agent name contains a NUL"),
    ],
)
def test_record_unstorable_reason_names_the_field(fields: dict[str, Any], reason: str) -> None:
    attributes = fields.pop("attributes", None)
    found = record_unstorable_reason(record(attributes, **fields))

    assert found is not None and found.startswith(reason)


def test_a_clean_record_is_storable() -> None:
    assert record_unstorable_reason(record({"input.value": "hi", "n": [1, 2]})) is None


# --- kind ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "openinference",
    [
        "LLM",
        "AGENT",
        "TOOL",
        "CHAIN",
        "RETRIEVER",
        "EMBEDDING",
        "RERANKER",
        "GUARDRAIL",
        "EVALUATOR",
    ],
)
def test_openinference_span_kinds_are_lower_cased(openinference: str) -> None:
    assert view_of({"openinference.span.kind": openinference}).kind == openinference.lower()


@pytest.mark.parametrize(
    ("operation", "kind"),
    [
        ("chat", "llm"),
        ("text_completion", "llm"),
        ("generate_content", "llm"),
        ("invoke_agent", "agent"),
        ("create_agent", "agent"),
        ("execute_tool", "tool"),
        ("embeddings", "embedding"),
    ],
)
def test_genai_operation_names_map_to_kinds(operation: str, kind: str) -> None:
    assert view_of({"gen_ai.operation.name": operation}).kind == kind


def test_openinference_kind_wins_over_genai_operation() -> None:
    view = view_of({"openinference.span.kind": "TOOL", "gen_ai.operation.name": "chat"})

    assert view.kind == "tool"


def test_unknown_convention_values_fall_through_to_the_records_own_kind() -> None:
    view = view_of(
        {"openinference.span.kind": "UNKNOWN", "gen_ai.operation.name": "dance"}, kind="Agent"
    )

    assert view.kind == "agent"


@pytest.mark.parametrize("kind", [None, "client", "server", "internal", "workflow"])
def test_a_span_without_a_known_kind_is_a_plain_span(kind: str | None) -> None:
    assert view_of({}, kind=kind).kind == "span"


# --- content, model, provider, agent ---------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"input.value": "oi", "gen_ai.input.messages": "g", "gen_ai.prompt": "p"}, "oi"),
        ({"gen_ai.input.messages": "g", "gen_ai.prompt": "p"}, "g"),
        ({"gen_ai.prompt": "p"}, "p"),
        ({}, "from record"),
    ],
)
def test_input_follows_openinference_then_genai_then_the_record(
    attributes: dict[str, Any], expected: str
) -> None:
    assert view_of(attributes, input="from record").input == expected


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"output.value": "oo", "gen_ai.output.messages": "g", "gen_ai.completion": "c"}, "oo"),
        ({"gen_ai.output.messages": "g", "gen_ai.completion": "c"}, "g"),
        ({"gen_ai.completion": "c"}, "c"),
        ({}, "from record"),
    ],
)
def test_output_follows_openinference_then_genai_then_the_record(
    attributes: dict[str, Any], expected: str
) -> None:
    assert view_of(attributes, output="from record").output == expected


def test_structured_content_without_message_text_is_json_encoded() -> None:
    messages = [{"role": "user", "parts": [{"type": "blob", "mime_type": "image/png"}]}]

    view = view_of({"gen_ai.input.messages": messages, "gen_ai.output.messages": {"n": 1}})

    assert view.input is not None and json.loads(view.input) == messages
    assert view.output == '{"n": 1}'


def test_the_served_model_is_preferred_and_both_genai_models_are_kept() -> None:
    view = view_of(
        {
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "llm.model_name": "other",
        }
    )

    assert view.model == "gpt-4o-2024-08-06"
    assert view.request_model == "gpt-4o"
    assert view.response_model == "gpt-4o-2024-08-06"


def test_model_falls_back_to_openinference_then_the_requested_model() -> None:
    assert view_of({"llm.model_name": "oi", "gen_ai.request.model": "req"}).model == "oi"
    assert view_of({"gen_ai.request.model": "req"}).model == "req"
    assert view_of({"gen_ai.request.model": "", "llm.model_name": 3}).model is None


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ({"gen_ai.provider.name": "a", "gen_ai.system": "b", "llm.provider": "c"}, "a"),
        ({"gen_ai.system": "b", "llm.provider": "c"}, "b"),
        ({"llm.provider": "c"}, "c"),
        ({}, None),
    ],
)
def test_provider_prefers_the_current_genai_name(
    attributes: dict[str, Any], expected: str | None
) -> None:
    assert view_of(attributes).provider == expected


def test_agent_name_comes_from_attributes_then_the_record_but_never_service_name() -> None:
    assert view_of({"gen_ai.agent.name": "g", "agent.name": "a"}, agent_name="r").agent_name == "g"
    assert view_of({"agent.name": "a"}, agent_name="r").agent_name == "a"
    assert view_of({}, agent_name="r").agent_name == "r"
    assert view_of({"service.name": "checkout-service"}).agent_name is None


def test_view_copies_the_name_and_start_time_for_pricing_and_messages() -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)

    view = view_of({}, name="chat gpt-4o", start_time=start)

    assert (view.name, view.start_time) == ("chat gpt-4o", start)


# --- token counts --------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 7, "7", 7.0, "0012"])
def test_integral_token_counts_are_accepted(value: object) -> None:
    assert token_count(value) == int(float(value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        -1,
        "-1",
        1.5,
        "1.5",
        "7.0",
        "abc",
        "",
        " 7",
        "+7",
        "١٢",
        True,
        False,
        None,
        [7],
        math.nan,
        math.inf,
        "9" * 21,
    ],
)
def test_malformed_token_counts_are_none_never_guessed(value: object) -> None:
    assert token_count(value) is None


def test_the_first_token_attribute_present_decides_even_when_malformed() -> None:
    view = view_of({"llm.token_count.prompt": "lots", "gen_ai.usage.input_tokens": 10})

    assert view.input_tokens is None


@pytest.mark.parametrize(
    ("key", "side"),
    [
        ("llm.token_count.prompt", "input"),
        ("gen_ai.usage.input_tokens", "input"),
        ("gen_ai.usage.prompt_tokens", "input"),
        ("llm.token_count.completion", "output"),
        ("gen_ai.usage.output_tokens", "output"),
        ("gen_ai.usage.completion_tokens", "output"),
        ("llm.token_count.prompt_details.cache_read", "cache_read"),
        ("gen_ai.usage.cache_read.input_tokens", "cache_read"),
        ("gen_ai.usage.cache_read_input_tokens", "cache_read"),
        ("llm.token_count.prompt_details.cache_write", "cache_write"),
        ("gen_ai.usage.cache_creation.input_tokens", "cache_write"),
        ("gen_ai.usage.cache_creation_input_tokens", "cache_write"),
    ],
)
def test_each_token_spelling_is_read(key: str, side: str) -> None:
    view = view_of({key: 42})

    assert getattr(view, f"{side}_tokens") == 42


# --- correlation keys ----------------------------------------------------------------------


def test_correlation_keys_are_read_at_their_exact_spelling() -> None:
    view = view_of(
        {"neens.eval_run_id": "run-1", "neens.dataset_item_id": 17, "neens.version_label": "v2"}
    )

    assert (view.eval_run_id, view.dataset_item_id, view.version_label) == ("run-1", "17", "v2")


@pytest.mark.parametrize(
    "key",
    ["eval_run_id", "neens.evalRunId", "neens.eval-run-id", "Neens.eval_run_id", "neens.eval_run"],
)
def test_near_spellings_of_a_correlation_key_are_ignored(key: str) -> None:
    assert view_of({key: "run-1"}).eval_run_id is None


# --- properties ----------------------------------------------------------------------------

INPUT_TOKEN_KEYS = (
    "llm.token_count.prompt",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
)
OUTPUT_TOKEN_KEYS = (
    "llm.token_count.completion",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
)
counts = st.integers(min_value=0, max_value=10**15)
spellings = st.sampled_from([int, str, float])
texts = st.text(max_size=30)
storable_labels = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=10,
).filter(str.strip)


@given(
    tokens=counts,
    input_key=st.sampled_from(INPUT_TOKEN_KEYS),
    output_key=st.sampled_from(OUTPUT_TOKEN_KEYS),
    spell=spellings,
)
def test_any_integral_token_count_in_any_convention_maps_to_the_same_int(
    tokens: int, input_key: str, output_key: str, spell: type
) -> None:
    assume(spell is not float or float(tokens) == tokens)

    view = view_of({input_key: spell(tokens), output_key: spell(tokens)})

    assert view.input_tokens == tokens
    assert view.output_tokens == tokens


@given(
    kind=st.sampled_from(["LLM", "AGENT", "TOOL", "EMBEDDING"]),
    input_text=texts,
    output_text=texts,
    model=texts.filter(str.strip),
    provider=texts.filter(str.strip),
    input_tokens=counts,
    output_tokens=counts,
    agent=texts.filter(str.strip),
)
def test_openinference_and_genai_spellings_give_the_same_view(
    kind: str,
    input_text: str,
    output_text: str,
    model: str,
    provider: str,
    input_tokens: int,
    output_tokens: int,
    agent: str,
) -> None:
    operations = {
        "LLM": "chat",
        "AGENT": "invoke_agent",
        "TOOL": "execute_tool",
        "EMBEDDING": "embeddings",
    }
    openinference = view_of(
        {
            "openinference.span.kind": kind,
            "input.value": input_text,
            "output.value": output_text,
            "llm.model_name": model,
            "llm.provider": provider,
            "llm.token_count.prompt": input_tokens,
            "llm.token_count.completion": output_tokens,
            "agent.name": agent,
        }
    )
    genai = view_of(
        {
            "gen_ai.operation.name": operations[kind],
            "gen_ai.input.messages": input_text,
            "gen_ai.output.messages": output_text,
            "gen_ai.response.model": model,
            "gen_ai.provider.name": provider,
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens,
            "gen_ai.agent.name": agent,
        }
    )

    # Only GenAI distinguishes requested from served models; everything else must agree.
    assert openinference == dataclasses.replace(genai, request_model=None, response_model=None)
    assert genai.response_model == model


correlation_keys = ("neens.eval_run_id", "neens.dataset_item_id", "neens.version_label")


@given(
    key=st.text(min_size=1, max_size=40), value=st.text(min_size=1, max_size=10).filter(str.strip)
)
def test_correlation_keys_are_only_read_at_the_exact_spelling(key: str, value: str) -> None:
    view = view_of({key: value})

    found = (view.eval_run_id, view.dataset_item_id, view.version_label)
    if key in correlation_keys:
        assert found[correlation_keys.index(key)] == value
    else:
        assert found == (None, None, None)


@given(
    session_label=st.none() | storable_labels,
    span_label=st.none() | storable_labels,
)
def test_span_correlation_keys_override_resource_ones(
    session_label: str | None, span_label: str | None
) -> None:
    session_attributes = {} if session_label is None else {"neens.version_label": session_label}
    span_attributes = {} if span_label is None else {"neens.version_label": span_label}
    payload = {
        "session": {"id": "s", "attributes": session_attributes},
        "spans": [{"id": "a", "name": "a", "attributes": span_attributes}],
    }

    (decoded,) = decode_native(payload).spans

    expected = span_label if span_label is not None else session_label
    assert span_view(decoded).version_label == expected


def test_every_named_kind_is_reachable_from_openinference() -> None:
    reached = {view_of({"openinference.span.kind": kind.upper()}).kind for kind in SPAN_KINDS}

    assert reached == set(SPAN_KINDS)


@pytest.mark.parametrize("value", [2**63, 1e23, "99999999999999999999"])
def test_a_token_count_beyond_64_bits_is_not_a_count(value: object) -> None:
    from neens.domain.conventions import token_count

    assert token_count(value) is None
    assert token_count(2**63 - 1) == 2**63 - 1


# --- flags and nesting ------------------------------------------------------------------------


def _record(**attributes: object) -> SpanRecord:
    return SpanRecord(
        trace_id="t",
        span_id="s",
        parent_span_id=None,
        name="chat",
        kind="llm",
        start_time=None,
        end_time=None,
        status_code=None,
        status_message=None,
        attributes=dict(attributes),
    )


@pytest.mark.parametrize(
    ("value", "count", "code"),
    [
        (120, 120, None),
        (120.0, 120, None),
        ("120", 120, "token_count_text"),
        ("12.5", None, "token_count_invalid"),
        (-3, None, "token_count_invalid"),
        (True, None, "token_count_invalid"),
        (2**63, None, "token_count_invalid"),
        (1e23, None, "token_count_invalid"),
    ],
)
def test_token_counts_that_are_not_plain_integers_are_flagged(
    value: object, count: int | None, code: str | None
) -> None:
    view = span_view(_record(**{"gen_ai.usage.input_tokens": value}))
    assert view.input_tokens == count
    assert [flag.code for flag in view.flags] == ([code] if code else [])
    if code:
        assert "gen_ai.usage.input_tokens" in view.flags[0].message


def test_names_longer_than_stored_are_ignored_and_flagged() -> None:
    view = span_view(_record(**{"gen_ai.request.model": "m" * 501, "neens.eval_run_id": "r" * 200}))
    assert view.model is None
    assert view.eval_run_id == "r" * 200
    [flag] = view.flags
    assert (flag.code, "501 characters" in flag.message) == ("value_too_long", True)


def test_nesting_is_measured_without_recursion_at_any_depth() -> None:
    value: object = "leaf"
    for _ in range(100_000):
        value = {"k": [value]}
    assert nesting_reason({"a": [1, {"b": 2}]}) is None
    assert nesting_reason(value) is not None
    assert nesting_reason(_deep(MAX_NESTING)) is None
    assert "32 levels" in str(nesting_reason(_deep(MAX_NESTING + 1)))
    # The storability walk is iterative too, and still names where the bad text sits.
    assert unstorable_text_reason(value) is None
    assert "NUL" in str(unstorable_text_reason([value, {"x": "a\x00"}]))


def _deep(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


# --- conventions as real instrumentations write them (docs/traces.md, the matrix) ------------

_USER = "What is the weather in Paris?"
_ANSWER = "It is sunny in Paris."
_SYSTEM = "You answer weather questions."


def test_openllmetry_numbered_prompts_and_completions_make_a_model_call() -> None:
    view = view_of(
        {
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": _SYSTEM,
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": _USER,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": _ANSWER,
            "gen_ai.usage.prompt_tokens": 150,
            "gen_ai.usage.completion_tokens": 20,
        }
    )

    assert (view.kind, view.input, view.output) == ("llm", _USER, _ANSWER)
    assert (view.input_tokens, view.output_tokens, view.provider) == (150, 20, "openai")


def test_openllmetry_older_llm_usage_tokens_are_read() -> None:
    view = view_of(
        {"llm.request.type": "chat", "llm.usage.prompt_tokens": 7, "llm.usage.completion_tokens": 3}
    )

    assert (view.kind, view.input_tokens, view.output_tokens) == ("llm", 7, 3)


def test_openllmetry_completion_with_only_tool_calls_is_kept_as_json() -> None:
    view = view_of(
        {
            "llm.request.type": "chat",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.name": "get_weather",
        }
    )

    assert view.output is not None
    assert json.loads(view.output) == [{"role": "assistant", "tool_calls.0.name": "get_weather"}]


@pytest.mark.parametrize(
    ("span_kind", "kind"),
    [("agent", "agent"), ("tool", "tool"), ("workflow", "chain"), ("task", "chain")],
)
def test_traceloop_span_kinds(span_kind: str, kind: str) -> None:
    assert view_of({"traceloop.span.kind": span_kind}).kind == kind


def test_traceloop_entities_give_the_agent_name_and_its_text_input_and_output() -> None:
    agent = view_of(
        {
            "traceloop.span.kind": "agent",
            "traceloop.entity.name": "weather-agent",
            "traceloop.entity.input": json.dumps({"args": [_USER], "kwargs": {}}),
            "traceloop.entity.output": json.dumps(_ANSWER),
        }
    )
    tool = view_of(
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "get_weather",
            "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"city": "Paris"}}),
            "traceloop.entity.output": json.dumps("sunny, 21°C"),
        }
    )

    assert (agent.agent_name, agent.input, agent.output) == ("weather-agent", _USER, _ANSWER)
    assert tool.agent_name is None
    assert tool.input == '{"city": "Paris"}'
    assert tool.output == "sunny, 21°C"


@pytest.mark.parametrize("span_kind", ["workflow", "task"])
def test_a_traceloop_workflow_with_one_text_argument_has_it_as_its_input(span_kind: str) -> None:
    """A `@workflow` around the agent is the trace's root: the session's input and output."""
    root = view_of(
        {
            "traceloop.span.kind": span_kind,
            "traceloop.entity.name": "answer",
            "traceloop.entity.input": json.dumps({"args": [_USER], "kwargs": {}}),
            "traceloop.entity.output": json.dumps(_ANSWER),
        }
    )
    several = view_of(
        {
            "traceloop.span.kind": span_kind,
            "traceloop.entity.input": json.dumps({"args": [_USER, 2], "kwargs": {}}),
        }
    )

    assert (root.kind, root.agent_name, root.input, root.output) == ("chain", None, _USER, _ANSWER)
    assert several.input is not None
    assert json.loads(several.input) == {"args": [_USER, 2], "kwargs": {}}


def test_genai_newer_messages_give_the_last_user_text_and_the_assistant_text() -> None:
    inputs = [
        {"role": "system", "parts": [{"type": "text", "content": _SYSTEM}]},
        {"role": "user", "parts": [{"type": "text", "content": "earlier question"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "earlier answer"}]},
        {"role": "user", "parts": [{"type": "text", "content": _USER}]},
    ]
    outputs = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": _ANSWER}],
            "finish_reason": "stop",
        }
    ]

    as_text = view_of(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(inputs),
            "gen_ai.output.messages": json.dumps(outputs),
        }
    )
    structured = view_of({"gen_ai.input.messages": inputs, "gen_ai.output.messages": outputs})

    assert (as_text.input, as_text.output) == (_USER, _ANSWER)
    assert (structured.input, structured.output) == (_USER, _ANSWER)


def test_genai_output_with_only_a_tool_call_is_kept_as_sent() -> None:
    outputs = json.dumps(
        [{"role": "assistant", "parts": [{"type": "tool_call", "name": "get_weather"}]}]
    )

    assert view_of({"gen_ai.output.messages": outputs}).output == outputs


def test_genai_tool_spans_read_the_call_arguments_and_result() -> None:
    view = view_of(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            "gen_ai.tool.call.result": {"forecast": "sunny"},
        }
    )

    assert (view.kind, view.input, view.output) == (
        "tool",
        '{"city": "Paris"}',
        '{"forecast": "sunny"}',
    )


def test_genai_older_content_span_events_are_read() -> None:
    view = span_view(
        record(
            {"gen_ai.operation.name": "chat"},
            events=[
                {
                    "name": "gen_ai.content.prompt",
                    "attributes": {
                        "gen_ai.prompt": json.dumps([{"role": "user", "content": _USER}])
                    },
                },
                {"name": "gen_ai.content.completion", "attributes": {"gen_ai.completion": _ANSWER}},
            ],
        )
    )

    assert (view.input, view.output) == (_USER, _ANSWER)


def test_genai_message_events_give_the_last_user_message_and_the_choice() -> None:
    view = span_view(
        record(
            {"gen_ai.operation.name": "chat"},
            events=[
                {"name": "gen_ai.system.message", "attributes": {}, "body": {"content": _SYSTEM}},
                {"name": "gen_ai.user.message", "attributes": {}, "body": {"content": _USER}},
                {
                    "name": "gen_ai.choice",
                    "attributes": {},
                    "body": {"index": 0, "message": {"role": "assistant", "content": _ANSWER}},
                },
            ],
        )
    )

    assert (view.input, view.output) == (_USER, _ANSWER)


@pytest.mark.parametrize(
    ("user", "choice"),
    [
        (
            {"gen_ai.event.content": json.dumps({"content": _USER})},
            {"gen_ai.event.content": json.dumps({"index": 0, "message": {"content": _ANSWER}})},
        ),
        ({"content": _USER}, {"index": 0, "message": json.dumps({"content": _ANSWER})}),
    ],
)
def test_genai_message_span_events_give_their_content_from_attributes(
    user: dict[str, Any], choice: dict[str, Any]
) -> None:
    """A span event has no body: azure-ai-inference and Semantic Kernel put the body, as JSON,
    in `gen_ai.event.content`; others put the message's fields in attributes."""
    view = span_view(
        record(
            {"gen_ai.operation.name": "chat"},
            events=[
                {"name": "gen_ai.user.message", "attributes": {"gen_ai.system": "az", **user}},
                {"name": "gen_ai.choice", "attributes": choice},
            ],
        )
    )

    assert (view.input, view.output) == (_USER, _ANSWER)


def test_genai_operation_details_event_is_read() -> None:
    details = {
        "name": "gen_ai.client.inference.operation.details",
        "attributes": {
            "gen_ai.input.messages": [
                {"role": "user", "parts": [{"type": "text", "content": _USER}]}
            ],
            "gen_ai.output.messages": [
                {"role": "assistant", "parts": [{"type": "text", "content": _ANSWER}]}
            ],
        },
    }

    view = span_view(record({"gen_ai.operation.name": "chat"}, events=[details]))

    assert (view.input, view.output) == (_USER, _ANSWER)


def test_openinference_model_spans_read_messages_not_the_raw_request() -> None:
    view = view_of(
        {
            "openinference.span.kind": "LLM",
            "llm.system": "openai",
            "input.value": json.dumps({"model": "gpt-4o-mini", "messages": []}),
            "output.value": '{"id": "c2", "choices": []}',
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": _SYSTEM,
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": _USER,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.contents.0.message_content.type": "text",
            "llm.output_messages.0.message.contents.0.message_content.text": _ANSWER,
        }
    )

    assert (view.input, view.output, view.provider) == (_USER, _ANSWER, "openai")


def test_openinference_model_span_without_messages_reads_the_request_and_response() -> None:
    request = {"model": "m", "messages": [{"role": "user", "content": _USER}]}
    response = {"choices": [{"message": {"role": "assistant", "content": _ANSWER}}]}

    view = view_of(
        {
            "openinference.span.kind": "LLM",
            "input.value": json.dumps(request),
            "output.value": json.dumps(response),
        }
    )

    assert (view.input, view.output) == (_USER, _ANSWER)


def test_openinference_tool_call_only_output_keeps_the_raw_response() -> None:
    raw = '{"choices": [{"message": {"role": "assistant", "tool_calls": []}}]}'

    view = view_of(
        {
            "openinference.span.kind": "LLM",
            "llm.output_messages.0.message.role": "assistant",
            "output.value": raw,
        }
    )

    assert view.output == raw


def test_an_agent_span_without_an_agent_name_is_named_by_its_span_name() -> None:
    assert view_of({"openinference.span.kind": "AGENT"}, name="weather-agent").agent_name == (
        "weather-agent"
    )
    assert (
        view_of({"gen_ai.operation.name": "invoke_agent"}, name="invoke_agent w").agent_name == "w"
    )
    assert view_of({"openinference.span.kind": "TOOL"}, name="get_weather").agent_name is None


def test_llm_system_is_the_provider_after_the_others() -> None:
    assert view_of({"llm.system": "openai"}).provider == "openai"
    assert view_of({"llm.provider": "azure", "llm.system": "openai"}).provider == "azure"


def _logfire(attributes: dict[str, Any], **fields: Any) -> SpanView:
    schema = {"type": "object", "properties": {key: {} for key in attributes}}
    return span_view(
        record(
            {
                **attributes,
                "logfire.span_type": "span",
                "logfire.msg_template": fields.get("name", "span"),
                "logfire.json_schema": json.dumps(schema),
                "code.function": "f",
            },
            scope_name="logfire",
            **fields,
        )
    )


def test_logfire_root_span_is_the_agent_with_its_argument_and_return_value() -> None:
    view = _logfire({"question": _USER, "return": _ANSWER}, name="weather-agent")

    assert (view.kind, view.agent_name, view.input, view.output) == (
        "agent",
        "weather-agent",
        _USER,
        _ANSWER,
    )


def test_logfire_tool_tagged_span_is_a_tool_call_with_its_arguments() -> None:
    view = _logfire(
        {"city": "Paris", "return": "sunny", "logfire.tags": ["tool"]},
        name="get_weather",
        parent_span_id="p",
    )

    assert (view.kind, view.input, view.output) == ("tool", '{"city": "Paris"}', "sunny")


def test_logfire_child_span_without_a_tag_stays_a_plain_span() -> None:
    assert _logfire({"x": 1}, parent_span_id="p").kind == "span"


def test_a_span_with_a_model_and_token_counts_is_a_model_call() -> None:
    assert view_of({"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 3}).kind == "llm"
    assert view_of({"gen_ai.request.model": "m"}).kind == "span"
    assert view_of({"gen_ai.usage.input_tokens": 3}).kind == "span"


def test_a_span_naming_a_tool_is_a_tool_call() -> None:
    assert view_of({"gen_ai.tool.name": "get_weather"}).kind == "tool"


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("neens.evalRunId", "neens.eval_run_id"),
        ("neens_eval_run_id", "neens.eval_run_id"),
        ("eval_run_id", "neens.eval_run_id"),
        ("neens.eval_runid", "neens.eval_run_id"),
        ("neens.eval_run", "neens.eval_run_id"),
        ("NEENS.DATASET_ITEM_ID", "neens.dataset_item_id"),
        ("neens.datset_item_id", "neens.dataset_item_id"),
        ("neens.version-label", "neens.version_label"),
    ],
)
def test_a_misspelled_correlation_key_is_not_read_but_flagged(key: str, meant: str) -> None:
    view = view_of({key: "run_123"})

    assert (view.eval_run_id, view.dataset_item_id, view.version_label) == (None, None, None)
    [flag] = view.flags
    assert flag.code == "correlation_key_misspelled"
    assert f"attribute {key!r} looks like {meant!r} but is not spelled exactly" in flag.message


@pytest.mark.parametrize(
    "key",
    ["neens.eval_run_id", "neens.version", "neens.dataset_id", "service.version", "run_id", "eval"],
)
def test_exact_or_unrelated_keys_are_not_flagged_as_misspelled(key: str) -> None:
    assert view_of({key: "x"}).flags == ()


# --- which conventions a span is asked of ------------------------------------------------------

READER_KINDS = sorted(SPAN_KINDS | {"span"})
RICH_VALUES: list[Any] = [
    "span",
    "AGENT",
    "agent",
    "chat",
    "tool",
    "workflow",
    "user",
    "hello",
    '[{"role": "user", "content": "hi"}]',
    '{"args": ["x"], "kwargs": {}}',
    '{"properties": {"q": {}, "return": {}}}',
    ["agent"],
    [{"role": "assistant", "content": "ok"}],
    7,
]


class RecordingAttributes(dict[str, Any]):
    """Attributes that remember every key a reader looked up."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def _every_reader(attributes: dict[str, Any], **fields: Any) -> dict[str, list[str | None]]:
    """What each convention's readers answer for `attributes`, for every kind."""
    answers: dict[str, list[str | None]] = {}
    span = record(attributes, scope_name="logfire", **fields)
    for convention in CONVENTIONS:
        found: list[str | None] = [convention.kind(span)]
        for kind in READER_KINDS:
            found += [
                reader(span, kind)
                for reader in (convention.agent_name, convention.input, convention.output)
            ]
        answers[convention.name] = found
    return answers


def _key_pool() -> list[str]:
    """Every key a reader was seen to look up when every declared key held each rich value,
    with numbered entries under every prefix, and a few keys no convention reads."""
    declared = {key for convention in CONVENTIONS for key in convention.keys}
    numbered = {
        f"{prefix}0.{rest}"
        for convention in CONVENTIONS
        for prefix in convention.prefixes
        for rest in ("role", "content", "message.role", "message.content")
    }
    seen = set(declared | numbered)
    for value in RICH_VALUES:
        attributes = RecordingAttributes(dict.fromkeys(declared | numbered, value))
        _every_reader(attributes)
        seen |= attributes.read
    return sorted(seen | {"service.name", "q", "return", "llm.model_name", *TOKEN_KEYS})


KEY_POOL = _key_pool()


def test_the_key_pool_reaches_beyond_the_declared_keys() -> None:
    """The pool found keys that only a convention's deeper readers look up (Logfire's tags and
    schema): so the property below also tries keys no table declares."""
    declared = {key for convention in CONVENTIONS for key in convention.keys}
    assert {"logfire.tags", "logfire.json_schema", "return"} <= set(KEY_POOL) - declared


def test_no_convention_answers_from_one_key_it_does_not_declare() -> None:
    """Every key of the pool alone, with every value: exhaustive, where the property below
    samples the combinations."""
    for key in KEY_POOL:
        for value in RICH_VALUES:
            for root in (True, False):
                attributes = {key: value}
                answers = _every_reader(attributes, parent_span_id=None if root else "p")
                for convention in CONVENTIONS:
                    if not convention.speaks_in(attributes):
                        assert set(answers[convention.name]) == {None}, (convention.name, key)


@given(
    attributes=st.dictionaries(
        st.sampled_from(KEY_POOL), st.sampled_from(RICH_VALUES), max_size=10
    ),
    root=st.booleans(),
)
def test_a_convention_none_of_whose_keys_a_span_has_is_silent_about_it(
    attributes: dict[str, Any], root: bool
) -> None:
    """`span_view` asks only the conventions that read one of a span's keys (`Convention.keys`,
    `.prefixes`): sound only if every other convention would have answered nothing anyway."""
    answers = _every_reader(attributes, parent_span_id=None if root else "p")
    for convention in CONVENTIONS:
        if not convention.speaks_in(attributes):
            assert answers[convention.name] == [None] * len(answers[convention.name]), (
                convention.name
            )


def test_the_same_keys_in_the_same_order_read_alike_from_the_remembered_shape() -> None:
    first = view_of({"openinference.span.kind": "AGENT", "neens.evalRunId": "r", "x": 1})
    again = view_of({"openinference.span.kind": "TOOL", "neens.evalRunId": "r", "x": 2})
    assert (first.kind, again.kind) == ("agent", "tool")
    assert (
        [f.code for f in first.flags]
        == [f.code for f in again.flags]
        == ["correlation_key_misspelled"]
    )
    long_keys = {f"k{n}" * 200: n for n in range(8)} | {"gen_ai.operation.name": "chat"}
    assert view_of(long_keys).kind == "llm"  # read without the memo (keys too long to keep)
