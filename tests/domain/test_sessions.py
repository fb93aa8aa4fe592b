"""Summarizing a session: root, content, models, tokens, latency, cost and correlation keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neens.domain.pricing import Price, PriceBook
from neens.domain.sessions import summarize_session
from neens.domain.spans import SpanRecord
from neens.ingest.native import decode_native

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
BOOK = PriceBook(
    {
        "house-small": Price(input_per_mtok_usd=0.5, output_per_mtok_usd=1.5),
        "house-large": Price(input_per_mtok_usd=3.0, output_per_mtok_usd=15.0),
    }
)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def make(
    span_id: str,
    *,
    parent: str | None = None,
    kind: str | None = None,
    start: float | None = None,
    end: float | None = None,
    status: str | None = None,
    attributes: dict[str, Any] | None = None,
    **fields: Any,
) -> SpanRecord:
    return SpanRecord(
        trace_id="trace-1",
        span_id=span_id,
        parent_span_id=parent,
        name=f"span {span_id}",
        kind=kind,
        start_time=at(start) if start is not None else None,
        end_time=at(end) if end is not None else None,
        status_code=status,
        status_message=None,
        attributes=attributes or {},
        **fields,
    )


def llm(
    span_id: str,
    model: str | None,
    input_tokens: int | None,
    output_tokens: int | None,
    *,
    start: float = 1.0,
    provider: str | None = None,
    **fields: Any,
) -> SpanRecord:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    if provider is not None:
        attributes["gen_ai.provider.name"] = provider
    if model is not None:
        attributes["gen_ai.request.model"] = model
    if input_tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = input_tokens
    if output_tokens is not None:
        attributes["gen_ai.usage.output_tokens"] = output_tokens
    return make(
        span_id, parent="root", start=start, end=start + 0.5, attributes=attributes, **fields
    )


def root(**fields: Any) -> SpanRecord:
    return make("root", kind="agent", start=0.0, end=10.0, **fields)


# --- cost ----------------------------------------------------------------------------------


def test_session_with_one_unpriced_llm_span_has_no_cost() -> None:
    records = [
        root(),
        llm("a", "house-small", 1_000, 100),
        llm("b", "mystery-model-x", 10, 10, start=2.0),
    ]

    summary = summarize_session(records, BOOK)

    assert summary.cost_usd is None
    assert summary.cost_status == "unpriced"
    assert summary.unpriced_models == ("mystery-model-x",)


def test_session_whose_llm_spans_are_all_priced_costs_the_hand_computed_sum() -> None:
    records = [
        root(),
        llm("a", "house-small", 1_000, 200),
        llm("b", "house-large", 4_000, 1_000, start=2.0),
        llm("c", "house-small", 0, 0, start=3.0),
    ]

    summary = summarize_session(records, BOOK)

    by_hand = (1_000 * 0.5 + 200 * 1.5) / 1e6 + (4_000 * 3.0 + 1_000 * 15.0) / 1e6
    assert summary.cost_status == "priced"
    assert summary.cost_usd == pytest.approx(by_hand, rel=1e-12)
    assert summary.unpriced_models == ()


def test_session_priced_from_genai_prices_matches_the_published_rate() -> None:
    # gpt-4o on OpenAI in January 2025: $2.50 / $10 per million tokens.
    records = [root(), llm("a", "gpt-4o", 2_000, 1_000, provider="openai")]

    summary = summarize_session(records, PriceBook())

    assert summary.cost_usd == pytest.approx(2_000 * 2.5 / 1e6 + 1_000 * 10 / 1e6)


def test_session_without_llm_spans_has_no_cost_and_says_so() -> None:
    records = [root(), make("t", parent="root", kind="tool", start=1.0, end=2.0)]

    summary = summarize_session(records, BOOK)

    assert summary.cost_usd is None
    assert summary.cost_status == "no_llm_calls"
    assert summary.unpriced_models == ()


def test_override_price_beats_genai_prices_in_a_session() -> None:
    book = PriceBook({"gpt-4o": Price(input_per_mtok_usd=100.0, output_per_mtok_usd=0.0)})

    summary = summarize_session([root(), llm("a", "gpt-4o", 10_000, 5_000)], book)

    assert summary.cost_usd == pytest.approx(1.0)


def test_unpriced_reasons_are_listed_sorted_and_distinct() -> None:
    records = [
        root(),
        llm("a", None, 10, 10),
        llm("b", "zeta-unknown", 10, 10, start=2.0),
        llm("c", "zeta-unknown", 10, 10, start=3.0),
        llm("d", "house-small", 10, None, start=4.0),
        llm("e", "alpha-unknown", 10, 10, start=5.0),
    ]

    summary = summarize_session(records, BOOK)

    assert summary.cost_usd is None
    assert summary.unpriced_models == (
        "LLM span 'span a' has no model",
        "LLM span 'span d' (model 'house-small') reported no output token count",
        "alpha-unknown",
        "zeta-unknown",
    )


def test_a_session_of_free_calls_costs_zero_only_because_it_was_priced() -> None:
    summary = summarize_session([root(), llm("a", "house-small", 0, 0)], BOOK)

    assert summary.cost_status == "priced"
    assert summary.cost_usd == 0.0


# --- root, agent, content ------------------------------------------------------------------


def test_the_root_span_supplies_agent_name_input_and_output() -> None:
    records = [
        root(
            attributes={"gen_ai.agent.name": "support-bot"},
            input="refund please",
            output="refunded",
        ),
        make("child", parent="root", kind="agent", start=1.0, input="inner", output="inner out"),
    ]

    summary = summarize_session(records, BOOK)

    assert (summary.agent_name, summary.input, summary.output) == (
        "support-bot",
        "refund please",
        "refunded",
    )


def test_a_span_whose_parent_is_missing_counts_as_the_root() -> None:
    records = [
        make("orphan", parent="not-arrived", start=0.5, input="from orphan"),
        make("child", parent="orphan", kind="agent", start=1.0, input="from child"),
    ]

    assert summarize_session(records, BOOK).input == "from orphan"


def test_the_earliest_of_several_roots_is_the_root() -> None:
    records = [
        make("late", start=5.0, input="late"),
        make("early", start=1.0, input="early"),
        make("untimed", input="untimed"),
    ]

    assert summarize_session(records, BOOK).input == "early"


def test_content_falls_back_to_the_earliest_agent_span_with_a_value() -> None:
    records = [
        make("http", kind=None, start=0.0, end=3.0),
        make("tool", parent="http", kind="tool", start=0.5, input="tool input"),
        make("agent-2", parent="http", kind="agent", start=2.0, input="second", output="out 2"),
        make("agent-1", parent="http", kind="agent", start=1.0, input="first"),
    ]

    summary = summarize_session(records, BOOK)

    assert summary.input == "first"
    assert summary.output == "out 2"


def test_agent_name_falls_back_to_the_earliest_span_naming_one() -> None:
    records = [
        make("r", start=0.0, attributes={"service.name": "not-an-agent"}),
        make("b", parent="r", start=2.0, attributes={"agent.name": "second"}),
        make("a", parent="r", start=1.0, attributes={"gen_ai.agent.name": "first"}),
    ]

    assert summarize_session(records, BOOK).agent_name == "first"


def test_a_session_naming_no_agent_has_no_agent_name() -> None:
    records = [make("r", start=0.0, attributes={"service.name": "checkout"})]

    assert summarize_session(records, BOOK).agent_name is None


# --- models, tokens, steps, timing, status -------------------------------------------------


def test_models_are_distinct_in_order_of_first_use() -> None:
    records = [
        root(),
        llm("c", "house-large", 1, 1, start=3.0),
        llm("a", "house-small", 1, 1, start=1.0),
        llm("b", "house-large", 1, 1, start=2.0),
        llm("d", "house-small", 1, 1, start=4.0),
    ]

    assert summarize_session(records, BOOK).models == ("house-small", "house-large")


def test_tokens_are_summed_over_llm_spans_only() -> None:
    records = [
        root(attributes={"gen_ai.usage.input_tokens": 999, "gen_ai.usage.output_tokens": 999}),
        llm("a", "house-small", 100, 10),
        llm("b", "house-small", 50, None, start=2.0),
    ]

    summary = summarize_session(records, BOOK)

    assert (summary.input_tokens, summary.output_tokens) == (150, 10)


def test_tokens_are_unknown_when_no_llm_span_reports_them() -> None:
    summary = summarize_session([root(), llm("a", "house-small", None, None)], BOOK)

    assert (summary.input_tokens, summary.output_tokens) == (None, None)


def test_step_count_counts_llm_and_tool_spans() -> None:
    records = [
        root(),
        llm("a", "house-small", 1, 1),
        make("t1", parent="root", kind="tool", start=2.0),
        make("t2", parent="root", attributes={"openinference.span.kind": "TOOL"}, start=3.0),
        make("chain", parent="root", kind="chain", start=4.0),
    ]

    summary = summarize_session(records, BOOK)

    assert summary.step_count == 3
    assert summary.span_count == 5


def test_latency_spans_from_the_earliest_start_to_the_latest_end() -> None:
    records = [
        make("a", start=1.0, end=2.0),
        make("b", parent="a", start=1.5, end=4.25),
        make("c", parent="a"),
    ]

    summary = summarize_session(records, BOOK)

    assert summary.latency_ms == pytest.approx(3_250.0)
    assert (summary.started_at, summary.ended_at) == (at(1.0), at(4.25))


def test_latency_is_unknown_without_times_or_when_the_end_precedes_the_start() -> None:
    untimed = summarize_session([make("a")], BOOK)
    skewed = summarize_session([make("a", start=5.0, end=1.0)], BOOK)

    assert (untimed.latency_ms, untimed.started_at, untimed.ended_at) == (None, None, None)
    assert skewed.latency_ms is None


def test_any_error_span_makes_the_session_an_error() -> None:
    records = [root(status="ok"), make("x", parent="root", status="error", start=1.0)]

    assert summarize_session(records, BOOK).status == "error"
    assert summarize_session([root(status="ok"), make("y", parent="root")], BOOK).status == "ok"


def test_an_empty_session_summarizes_to_nothing_known() -> None:
    summary = summarize_session([], BOOK)

    assert summary.span_count == 0
    assert summary.cost_status == "no_llm_calls"
    assert summary.cost_usd is None
    assert summary.latency_ms is None
    assert summary.status == "ok"


# --- correlation keys ----------------------------------------------------------------------


def test_correlation_keys_come_from_the_root_then_the_first_span_carrying_them() -> None:
    records = [
        root(attributes={"neens.version_label": "v-root"}),
        make(
            "b",
            parent="root",
            start=2.0,
            attributes={"neens.eval_run_id": "run-late", "neens.version_label": "v-child"},
        ),
        make(
            "a",
            parent="root",
            start=1.0,
            attributes={"neens.eval_run_id": "run-early", "neens.dataset_item_id": "item-7"},
        ),
    ]

    summary = summarize_session(records, BOOK)

    assert (summary.eval_run_id, summary.dataset_item_id, summary.version_label) == (
        "run-early",
        "item-7",
        "v-root",
    )


def test_misspelled_correlation_keys_are_not_linked() -> None:
    records = [root(attributes={"neens.evalRunId": "run-1", "eval_run_id": "run-1"})]

    assert summarize_session(records, BOOK).eval_run_id is None


# --- content survives ----------------------------------------------------------------------


def test_unicode_and_200000_character_inputs_survive_into_the_summary() -> None:
    text = ("Grüße, 世界! 🚀 " * 20_000)[:200_000]
    payload = {
        "session": {"id": "s-unicode", "agent_name": "writer ✍️"},
        "spans": [
            {"id": "r", "name": "root", "kind": "agent", "input": text, "output": text[::-1]},
        ],
    }

    summary = summarize_session(decode_native(payload).spans, BOOK)

    assert summary.input == text
    assert summary.output == text[::-1]
    assert summary.agent_name == "writer ✍️"


def test_a_native_session_summarizes_like_an_otlp_one() -> None:
    payload = {
        "session": {"id": "s", "agent_name": "bot", "attributes": {"neens.eval_run_id": "run-9"}},
        "spans": [
            {
                "id": "r",
                "name": "agent",
                "kind": "agent",
                "input": "q",
                "output": "a",
                "start_time": "2025-01-01T12:00:00Z",
                "end_time": "2025-01-01T12:00:02Z",
            },
            {
                "id": "l",
                "parent_id": "r",
                "name": "llm",
                "kind": "llm",
                "model": "house-large",
                "input_tokens": 1_000,
                "output_tokens": 100,
                "start_time": "2025-01-01T12:00:00.5Z",
                "end_time": "2025-01-01T12:00:01Z",
            },
        ],
    }

    summary = summarize_session(decode_native(payload).spans, BOOK)

    assert summary.agent_name == "bot"
    assert (summary.input, summary.output) == ("q", "a")
    assert summary.models == ("house-large",)
    assert summary.cost_usd == pytest.approx((1_000 * 3.0 + 100 * 15.0) / 1e6)
    assert summary.latency_ms == pytest.approx(2_000.0)
    assert summary.eval_run_id == "run-9"
    assert summary.step_count == 1


@given(order=st.permutations(range(5)))
def test_the_summary_does_not_depend_on_the_order_spans_arrive_in(order: list[int]) -> None:
    records = [
        root(input="q", output="a", attributes={"neens.version_label": "v1"}),
        llm("a", "house-small", 10, 5),
        llm("b", "house-large", 20, 1, start=2.0),
        make("t", parent="root", kind="tool", start=3.0, end=4.0),
        make("x", parent="root", status="error", start=5.0),
    ]
    expected = summarize_session(records, BOOK)

    assert summarize_session([records[index] for index in order], BOOK) == expected


# --- values no column can hold, and dubious values --------------------------------------------

HUGE = 2**62 + 1


def test_token_totals_beyond_64_bits_are_none_and_flagged_never_an_error() -> None:
    summary = summarize_session(
        [root(), llm("a", "house-small", HUGE, 1), llm("b", "house-small", HUGE, 2)], BOOK
    )
    assert (summary.input_tokens, summary.output_tokens) == (None, 3)
    [flag] = summary.warnings
    assert flag.code == "token_sum_overflow"
    assert "inputTokens is null" in flag.message


def test_a_cost_too_large_to_represent_is_cost_overflow_not_priced() -> None:
    absurd = PriceBook({"absurd": Price(input_per_mtok_usd=1e300, output_per_mtok_usd=0.0)})
    summary = summarize_session([root(), llm("a", "absurd", 10**18, 0)], absurd)
    assert (summary.cost_usd, summary.cost_status) == (None, "cost_overflow")
    assert "more than can be represented" in summary.unpriced_models[0]
    assert [flag.code for flag in summary.warnings] == ["cost_overflow"]


def test_finite_costs_whose_sum_overflows_are_cost_overflow() -> None:
    big = PriceBook({"big": Price(input_per_mtok_usd=1.5e308, output_per_mtok_usd=0.0)})
    summary = summarize_session(
        [root(), llm("a", "big", 1_000_000, 0), llm("b", "big", 1_000_000, 0)], big
    )
    assert (summary.cost_usd, summary.cost_status) == (None, "cost_overflow")


def test_flags_of_spans_are_gathered_one_per_kind_with_a_count() -> None:
    spans = [
        root(),
        make("a", parent="root", kind="llm", attributes={"gen_ai.usage.input_tokens": "12"}),
        make("b", parent="root", kind="llm", attributes={"gen_ai.usage.input_tokens": "7"}),
        make("c", parent="root", start=5, end=4),
        make("x", parent="y"),
        make("y", parent="x"),
    ]
    summary = summarize_session(spans, BOOK)
    by_code = {flag.code: flag.message for flag in summary.warnings}
    assert set(by_code) == {"token_count_text", "end_before_start", "parent_cycle"}
    assert by_code["token_count_text"].startswith("span 'span a': attribute")
    assert by_code["token_count_text"].endswith("(and 1 more)")
    assert "2 spans are their own ancestors" in by_code["parent_cycle"]
    assert summary.input_tokens == 19  # text digits are still read, flagged


def test_models_come_from_model_calls_only_not_an_agent_span_requesting_one() -> None:
    agent = make(
        "root",
        start=0.0,
        end=10.0,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "house"},
    )

    summary = summarize_session([agent, llm("a", "house-small", 1, 1)], BOOK)

    assert summary.models == ("house-small",)


def test_without_content_on_root_or_agent_the_model_calls_give_question_and_answer() -> None:
    def chat(span_id: str, start: float, question: str, answer: str) -> SpanRecord:
        record = llm(span_id, "house-small", 1, 1, start=start)
        attributes = {
            **record.attributes,
            "gen_ai.input.messages": [{"role": "user", "content": question}],
            "gen_ai.output.messages": [{"role": "assistant", "content": answer}],
        }
        return make(span_id, parent="root", start=start, end=start + 0.5, attributes=attributes)

    records = [
        make("root", start=0.0, end=10.0),
        chat("b", 2.0, "What is the weather?", "It is sunny."),
        chat("a", 1.0, "What is the weather?", "(tool call)"),
    ]

    summary = summarize_session(records, BOOK)

    assert (summary.input, summary.output) == ("What is the weather?", "It is sunny.")


def test_an_unnamed_span_with_a_model_and_tokens_counts_as_a_model_call() -> None:
    span = make(
        "x",
        parent="root",
        start=1.0,
        end=2.0,
        attributes={
            "gen_ai.request.model": "house-small",
            "gen_ai.usage.input_tokens": 1_000_000,
            "gen_ai.usage.output_tokens": 0,
        },
    )

    summary = summarize_session([root(), span], BOOK)

    assert (summary.step_count, summary.input_tokens, summary.cost_status) == (
        1,
        1_000_000,
        "priced",
    )
    assert summary.cost_usd == pytest.approx(0.5)
