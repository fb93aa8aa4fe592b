"""A model sweep's cost estimate, its budget rule and its run caps.

Prices are checked against genai-prices' own `calc_price` for the same model and tokens, and the
prompt-based token rule by arithmetic done by hand on small cases, never against this module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
from genai_prices import Usage
from hypothesis import example, given, settings
from hypothesis import strategies as st

from neens.domain.pricing import Price, PriceBook
from neens.domain.sweep_cost import (
    ASSUMED_OUTPUT_TOKENS,
    ArmEstimate,
    CapViolation,
    SweepCaps,
    TokenHistory,
    check_caps,
    estimate_arm,
    estimate_sweep,
    text_tokens,
    usd_for_wire,
)

AT = datetime(2026, 1, 1, tzinfo=UTC)

ONE_DOLLAR_A_TOKEN = PriceBook(
    {"house-model": Price(input_per_mtok_usd=1_000_000.0, output_per_mtok_usd=2_000_000.0)}
)
"""$1 per input token, $2 per output token: estimates a reader can check in their head."""


def library_price(
    model: str, provider: str | None, input_tokens: int, output_tokens: int
) -> Decimal:
    """genai-prices' own price of one call."""
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    result = genai_prices.calc_price(
        usage, model, provider_id=provider, genai_request_timestamp=AT
    ).total_price
    assert isinstance(result, Decimal)
    return result


def assert_same_money(actual: Decimal | None, expected: Decimal) -> None:
    assert actual is not None
    assert abs(actual - expected) <= expected * Decimal("1e-12"), (actual, expected)


def arm(**fields: Any) -> ArmEstimate:
    defaults: dict[str, Any] = {
        "label": "sonnet",
        "connection_id": "conn_sonnet",
        "model": "gpt-4o",
        "provider": "openai",
        "calls": 360,
        "history": None,
        "prompts": [("What is the refund window?", "30 days")],
        "at": AT,
    }
    return estimate_arm(**{**defaults, **fields})


def priced(label: str, usd: str, calls: int = 3) -> ArmEstimate:
    return ArmEstimate(label, f"conn_{label}", "m", calls, Decimal(usd), "history", "earlier calls")


def unpriced(label: str, calls: int = 3) -> ArmEstimate:
    return ArmEstimate(label, f"conn_{label}", None, calls, None, "unpriced", "no model")


# --- history basis ---------------------------------------------------------------------------


def test_an_arm_with_earlier_calls_costs_its_calls_times_the_library_price_of_the_mean_call() -> (
    None
):
    estimate = arm(history=TokenHistory(calls=412, mean_input_tokens=850, mean_output_tokens=210))

    assert estimate.basis == "history"
    assert_same_money(estimate.estimated_usd, 360 * library_price("gpt-4o", "openai", 850, 210))
    assert estimate.basis_detail.startswith(
        "mean of 412 earlier calls through this connection: 850 input, 210 output tokens; "
        "360 calls at $0.004225 each"
    )


@pytest.mark.parametrize(("model", "provider"), [("gpt-4o", "openai"), ("sonar", "perplexity")])
def test_a_fractional_mean_is_priced_exactly_for_plain_rates_with_or_without_a_request_fee(
    model: str, provider: str
) -> None:
    # (850.25, 210.75) = 3/4 (850, 211) + 1/4 (851, 210); a plain price (even with a fixed fee
    # per request, as perplexity's sonar has) is affine, so it mixes the same way.
    history = TokenHistory(calls=5, mean_input_tokens=850.25, mean_output_tokens=210.75)
    expected = Decimal("0.75") * library_price(model, provider, 850, 211) + Decimal(
        "0.25"
    ) * library_price(model, provider, 851, 210)

    estimate = arm(model=model, provider=provider, calls=7, history=history)

    assert_same_money(estimate.estimated_usd, 7 * expected)
    assert "850.2 input, 210.8 output tokens" in estimate.basis_detail


def test_a_tiered_model_prices_the_mean_call_at_its_tier_and_says_so() -> None:
    over = TokenHistory(calls=3, mean_input_tokens=250_000, mean_output_tokens=300)
    under = TokenHistory(calls=3, mean_input_tokens=1_000, mean_output_tokens=300)

    above = arm(model="claude-sonnet-4-5", provider="anthropic", calls=10, history=over)
    below = arm(model="claude-sonnet-4-5", provider="anthropic", calls=10, history=under)

    assert_same_money(
        above.estimated_usd, 10 * library_price("claude-sonnet-4-5", "anthropic", 250_000, 300)
    )
    assert_same_money(
        below.estimated_usd, 10 * library_price("claude-sonnet-4-5", "anthropic", 1_000, 300)
    )
    assert "over 200,000 input tokens" in above.basis_detail
    assert "(above that)" in above.basis_detail
    assert "(below that)" in below.basis_detail


def test_a_plain_price_says_nothing_about_tiers() -> None:
    history = TokenHistory(calls=3, mean_input_tokens=250_000, mean_output_tokens=300)

    assert "tokens" in arm(history=history).basis_detail
    assert "tier" not in arm(history=history).basis_detail
    assert "rises" not in arm(history=history).basis_detail


def test_the_projects_price_override_is_used_as_it_is_for_spans() -> None:
    history = TokenHistory(calls=2, mean_input_tokens=3, mean_output_tokens=1.5)

    estimate = arm(
        model="house-model", provider=None, calls=4, history=history, book=ONE_DOLLAR_A_TOKEN
    )

    assert estimate.estimated_usd == Decimal(4 * (3 * 1 + 1.5 * 2))


def test_a_history_of_zero_calls_is_no_history() -> None:
    estimate = arm(history=TokenHistory(calls=0, mean_input_tokens=0, mean_output_tokens=0))

    assert estimate.basis == "prompts"


# --- prompts basis ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("abcdefgh", 2), ("é" * 5, 2), ("😀" * 4, 1)],
)
def test_a_text_counts_one_token_per_four_characters_rounded_up(text: str, tokens: int) -> None:
    assert text_tokens(text) == tokens


def test_prompt_tokens_are_priced_item_by_item_and_times_k() -> None:
    prompts = [
        ("abcdefghi", "abcd"),  # 3 input, 1 output: $3 + $2 = $5
        ("ab", None),  # 1 input; output: mean of 1 and 3 = 2 tokens -> $1 + $4 = $5
        ("abcdefgh", "abcdefghijk"),  # 2 input, 3 output: $2 + $6 = $8
    ]

    estimate = arm(
        model="house-model", provider=None, calls=6, prompts=prompts, book=ONE_DOLLAR_A_TOKEN
    )

    assert estimate.basis == "prompts"
    assert estimate.estimated_usd == Decimal(2 * (5 + 5 + 8))
    assert "2 input, 2 output tokens per item on average" in estimate.basis_detail
    assert "1 item without an expected output counted at the mean" in estimate.basis_detail
    assert "6 calls (2 per item)" in estimate.basis_detail
    assert "likely higher" in estimate.basis_detail


def test_the_dataset_price_is_scaled_by_calls_per_item_even_when_not_whole() -> None:
    prompts = [("abcd", "abcd"), ("abcdefgh", "abcd")]  # $1 + $2 and $2 + $2: $7 a pass

    estimate = arm(
        model="house-model", provider=None, calls=3, prompts=prompts, book=ONE_DOLLAR_A_TOKEN
    )

    assert estimate.estimated_usd == Decimal("10.5")


def test_a_missing_expected_output_takes_the_mean_of_the_others_rounded_up() -> None:
    # Known outputs of 1 and 2 tokens: mean 1.5, counted as 2 for the item without one.
    prompts = [("abcd", "abcd"), ("abcd", "abcdefgh"), ("abcd", None)]

    estimate = arm(
        model="house-model", provider=None, calls=3, prompts=prompts, book=ONE_DOLLAR_A_TOKEN
    )

    assert estimate.estimated_usd == Decimal((1 + 2) + (1 + 4) + (1 + 4))


def test_when_no_item_has_an_expected_output_the_documented_fallback_is_assumed() -> None:
    estimate = arm(
        model="house-model",
        provider=None,
        calls=2,
        prompts=[("abcd", None)],
        book=ONE_DOLLAR_A_TOKEN,
    )

    assert estimate.estimated_usd == Decimal(2 * (1 + 2 * ASSUMED_OUTPUT_TOKENS))
    assert f"{ASSUMED_OUTPUT_TOKENS} output tokens are assumed" in estimate.basis_detail


def test_prompts_match_the_library_item_by_item_across_a_price_tier() -> None:
    # claude-haiku-5-5's rates rise for every token of a call over 100,000 input tokens. Pricing
    # the mean item would put all three items in one tier and get a different total.
    prompts = [
        ("x" * 399_996, "y" * 40),  # 99,999 tokens
        ("x" * 400_000, "y" * 40),  # 100,000 tokens: not over the tier
        ("x" * 400_004, "y" * 40),  # 100,001 tokens: over it
        ("x" * 40, "y" * 400),
        ("x" * 44, None),  # 11 tokens; output: mean of 10, 10, 10, 100 = 32.5 -> 33
    ]
    calls = [(99_999, 10), (100_000, 10), (100_001, 10), (10, 100), (11, 33)]
    expected = sum(
        (library_price("claude-haiku-5-5", "anthropic", i, o) for i, o in calls), Decimal(0)
    )

    estimate = arm(model="claude-haiku-5-5", provider="anthropic", calls=15, prompts=prompts)

    assert_same_money(estimate.estimated_usd, 3 * expected)
    mean_item = library_price("claude-haiku-5-5", "anthropic", 60_004, 34) * 15
    assert estimate.estimated_usd != mean_item


def test_prompts_match_the_library_for_a_plain_price_over_many_items() -> None:
    prompts = [("q" * (13 * n), "a" * (n % 7) if n % 5 else None) for n in range(1, 200)]
    known = [text_tokens(e) for _, e in prompts if e is not None]
    fill = math.ceil(sum(known) / len(known))
    expected = sum(
        (
            library_price("gpt-4o", "openai", text_tokens(i), fill if e is None else text_tokens(e))
            for i, e in prompts
        ),
        Decimal(0),
    )

    estimate = arm(calls=3 * len(prompts), prompts=prompts)

    assert_same_money(estimate.estimated_usd, 3 * expected)


@settings(max_examples=40, deadline=None)
@example([(10, 1), (11, None)], 1)
@given(
    st.lists(
        st.tuples(
            st.one_of(
                st.integers(0, 40), st.integers(99_990, 100_010), st.integers(200_000, 200_010)
            ),
            st.one_of(st.none(), st.integers(0, 30)),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(1, 4),
)
def test_any_dataset_costs_what_the_library_says_item_by_item(
    tokens: list[tuple[int, int | None]], k: int
) -> None:
    # Whole tokens of text (4 characters each) near claude-haiku-5-5's tier at 100,000 input
    # tokens, with and without expected outputs.
    prompts = [("x" * 4 * i, None if o is None else "y" * 4 * o) for i, o in tokens]
    known = [o for _, o in tokens if o is not None]
    fill = math.ceil(sum(known) / len(known)) if known else ASSUMED_OUTPUT_TOKENS
    expected = sum(
        (
            library_price("claude-haiku-5-5", "anthropic", i, fill if o is None else o)
            for i, o in tokens
        ),
        Decimal(0),
    )

    estimate = arm(
        model="claude-haiku-5-5", provider="anthropic", calls=k * len(prompts), prompts=prompts
    )

    assert_same_money(estimate.estimated_usd, k * expected)


def test_a_tiny_estimate_is_not_rounded_to_zero() -> None:
    estimate = arm(model="gpt-4o-mini", calls=1, prompts=[("a", "")])

    assert estimate.estimated_usd is not None
    assert estimate.estimated_usd > 0
    assert usd_for_wire(estimate.estimated_usd) == 0.000001


def test_a_sweep_over_no_items_costs_nothing() -> None:
    estimate = arm(calls=0, prompts=[])

    assert estimate.estimated_usd == 0
    assert estimate.basis == "prompts"


def test_an_arm_with_calls_but_nothing_to_estimate_from_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="earlier calls or dataset prompts"):
        arm(calls=3, prompts=[])


# --- unpriced --------------------------------------------------------------------------------


def test_a_connection_without_a_model_is_unpriced_not_free() -> None:
    estimate = arm(model=None, provider=None)

    assert estimate.estimated_usd is None
    assert estimate.basis == "unpriced"
    assert estimate.basis_detail == "the connection records no model, so its calls cannot be priced"


def test_a_model_the_pricing_does_not_know_is_unpriced_and_keeps_what_history_says() -> None:
    history = TokenHistory(calls=9, mean_input_tokens=100, mean_output_tokens=20)

    estimate = arm(model="llama-local", provider=None, history=history)

    assert estimate.estimated_usd is None
    assert estimate.basis == "unpriced"
    assert estimate.basis_detail == (
        "no known price for model 'llama-local'; mean of 9 earlier calls through this "
        "connection: 100 input, 20 output tokens"
    )


def test_a_model_its_provider_does_not_serve_is_unpriced_not_priced_elsewhere() -> None:
    estimate = arm(model="gpt-4o", provider="anthropic")

    assert estimate.estimated_usd is None
    assert "from provider 'anthropic'" in estimate.basis_detail


# --- the money on the wire -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "wire"),
    [
        (None, None),
        (Decimal(0), 0.0),
        (Decimal("0.0000000001"), 0.000001),
        (Decimal("1.2300001"), 1.230001),
        (Decimal("3.69"), 3.69),
    ],
)
def test_the_wire_amount_rounds_up_to_six_decimals(amount: Decimal | None, wire: float) -> None:
    assert usd_for_wire(amount) == wire


# --- the sweep and its budget ----------------------------------------------------------------


def test_a_sweep_sums_its_priced_arms_and_calls() -> None:
    estimate = estimate_sweep([priced("a", "1.25", 360), priced("b", "2.44", 360)], None)

    assert estimate.estimated_usd == Decimal("3.69")
    assert estimate.total_calls == 720
    assert estimate.partial is False
    assert estimate.would_refuse is None
    assert estimate.refusal is None


def test_a_fully_unpriced_sweep_never_refuses_on_budget_even_a_zero_one() -> None:
    estimate = estimate_sweep([unpriced("a"), unpriced("b")], 0)

    assert estimate.estimated_usd is None
    assert estimate.partial is True
    assert estimate.unpriced_arms == ("a", "b")
    assert estimate.would_refuse is False
    assert estimate.refusal is None


def test_a_partly_priced_sweep_under_budget_on_its_priced_part_is_not_refused() -> None:
    estimate = estimate_sweep([priced("a", "6"), unpriced("b")], 10)

    assert estimate.estimated_usd == Decimal(6)
    assert estimate.partial is True
    assert estimate.would_refuse is False


def test_a_partly_priced_sweep_is_refused_when_its_priced_part_alone_is_over() -> None:
    arms = [priced("a", "7"), priced("b", "5"), unpriced("self-host"), unpriced("local")]

    estimate = estimate_sweep(arms, 10)

    assert estimate.would_refuse is True
    assert estimate.refusal == (
        "the 2 priced arms alone are estimated at $12.00, over budgetUsd $10.00, and 2 arms "
        "('self-host', 'local') are unpriced, so the whole sweep costs more than that; raise "
        "budgetUsd, lower passK or drop an arm"
    )


def test_a_fully_priced_sweep_over_budget_is_refused_naming_the_field() -> None:
    estimate = estimate_sweep([priced("a", "0.0000004"), priced("b", "0.1")], Decimal("0.1"))

    assert estimate.would_refuse is True
    assert estimate.refusal == (
        "the sweep is estimated at $0.100001, over budgetUsd $0.10; raise budgetUsd, lower "
        "passK or drop an arm"
    )


@pytest.mark.parametrize("budget", [Decimal("10"), 10, 10.0])
def test_an_estimate_exactly_at_the_budget_is_not_refused(budget: Decimal | float) -> None:
    at_budget = estimate_sweep([priced("a", "4.5"), priced("b", "5.5")], budget)
    one_millionth_over = estimate_sweep([priced("a", "4.500001"), priced("b", "5.5")], budget)

    assert at_budget.would_refuse is False
    assert at_budget.refusal is None
    assert one_millionth_over.would_refuse is True


def test_a_float_budget_is_read_as_written_not_as_its_binary_value() -> None:
    # 0.3 as a binary float is 0.29999999999999998889...: read that way, $0.30 would be over.
    estimate = estimate_sweep([priced("a", "0.1"), priced("b", "0.2")], 0.3)

    assert estimate.budget_usd == Decimal("0.3")
    assert estimate.would_refuse is False


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, Decimal("NaN"), Decimal("-0.01")])
def test_a_budget_must_be_a_finite_number_at_least_zero(bad: Decimal | float) -> None:
    with pytest.raises(ValueError, match="budgetUsd must be a finite number >= 0"):
        estimate_sweep([priced("a", "1"), priced("b", "1")], bad)


def test_a_budget_must_be_a_number() -> None:
    with pytest.raises(TypeError, match="budgetUsd must be a number"):
        estimate_sweep([priced("a", "1")], True)
    with pytest.raises(TypeError, match="budgetUsd must be a number"):
        estimate_sweep([priced("a", "1")], "10")  # type: ignore[arg-type]


def test_a_sweep_estimate_needs_an_arm() -> None:
    with pytest.raises(ValueError, match="at least one arm"):
        estimate_sweep([], None)


def test_estimated_arms_go_through_the_sweep_end_to_end() -> None:
    history = TokenHistory(calls=412, mean_input_tokens=850, mean_output_tokens=210)
    arms = [
        arm(label="gpt", history=history),
        arm(label="mini", model="gpt-4o-mini", history=history),
        arm(label="self-host", model="llama-local", provider=None),
    ]
    priced_part = 360 * (
        library_price("gpt-4o", "openai", 850, 210)
        + library_price("gpt-4o-mini", "openai", 850, 210)
    )

    estimate = estimate_sweep(arms, priced_part - Decimal("0.000001"))

    assert_same_money(estimate.estimated_usd, priced_part)
    assert estimate.partial is True
    assert estimate.unpriced_arms == ("self-host",)
    assert estimate.would_refuse is True
    assert estimate.refusal is not None
    assert "1 arm ('self-host') is unpriced" in estimate.refusal


# --- caps ------------------------------------------------------------------------------------


def violation(arms: int, pass_k: int, items: int, caps: SweepCaps | None = None) -> CapViolation:
    found = check_caps(arms, pass_k, items, caps or SweepCaps())
    assert found is not None
    return found


def test_a_sweep_at_every_cap_is_allowed() -> None:
    assert check_caps(8, 10, 1_250, SweepCaps()) is None  # 8 x 10 x 1,250 = 100,000 calls
    assert check_caps(2, 1, 0, SweepCaps()) is None


def test_a_sweep_needs_two_arms() -> None:
    found = violation(1, 3, 10)

    assert (found.field, found.rule) == ("arms", "too_few_arms")
    assert found.message == "a sweep compares models, so it needs at least two arms; got 1"


def test_pass_k_must_be_at_least_one() -> None:
    found = violation(2, 0, 10)

    assert (found.field, found.rule) == ("passK", "pass_k_too_small")
    assert "at least 1" in found.message
    assert "got 0" in found.message


def test_too_many_arms_names_the_cap_the_ask_and_the_setting() -> None:
    found = violation(9, 3, 10)

    assert (found.field, found.rule) == ("arms", "too_many_arms")
    assert found.message == (
        "a sweep has at most 8 arms on this server; got 9. Split it into smaller sweeps, or "
        "raise the cap with NEENS_SWEEP_MAX_ARMS"
    )


def test_too_large_a_pass_k_names_the_cap_the_ask_and_the_setting() -> None:
    found = violation(2, 11, 10)

    assert (found.field, found.rule) == ("passK", "pass_k_too_large")
    assert found.message == (
        "passK is at most 10 on this server; got 11. Lower passK, or raise the cap with "
        "NEENS_SWEEP_MAX_PASS_K"
    )


def test_too_many_calls_in_all_is_refused_on_arms_one_call_over_the_cap() -> None:
    found = violation(3, 7, 4_762)  # 3 x 7 x 4,762 = 100,002

    assert (found.field, found.rule) == ("arms", "calls")
    assert found.message == (
        "this sweep would make 100,002 agent calls (3 arms x passK 7 x 4,762 items), over the "
        "cap of 100,000 on this server. Drop an arm, lower passK or use a smaller dataset, or "
        "raise the cap with NEENS_SWEEP_MAX_CALLS"
    )
    assert check_caps(2, 2, 25_000, SweepCaps()) is None  # exactly 100,000


def test_raised_caps_allow_what_the_defaults_refuse() -> None:
    caps = SweepCaps(max_arms=12, max_pass_k=20, max_total_calls=1_000_000)

    assert check_caps(12, 20, 4_000, caps) is None
    assert violation(13, 3, 10, caps).field == "arms"
    assert violation(2, 21, 10, caps).field == "passK"


def test_too_few_arms_is_reported_before_the_other_rules() -> None:
    assert violation(1, 0, 10).rule == "too_few_arms"
    assert violation(9, 11, 10).rule == "too_many_arms"


@pytest.mark.parametrize(
    "caps", [{"max_arms": 1}, {"max_pass_k": 0}, {"max_total_calls": 0}, {"max_arms": True}]
)
def test_caps_must_allow_some_sweep(caps: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be an integer >="):
        SweepCaps(**caps)


@pytest.mark.parametrize("shape", [(-1, 3, 10), (2, -1, 10), (2, 3, -1), (2, 3.0, 10)])
def test_check_caps_takes_whole_counts(shape: Sequence[Any]) -> None:
    with pytest.raises(ValueError, match="must be an integer >= 0"):
        check_caps(*shape)


# --- input checks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"calls": -1, "mean_input_tokens": 1, "mean_output_tokens": 1}, ValueError),
        ({"calls": 1, "mean_input_tokens": math.nan, "mean_output_tokens": 1}, ValueError),
        ({"calls": 1, "mean_input_tokens": 1, "mean_output_tokens": -2}, ValueError),
        ({"calls": 1, "mean_input_tokens": "1", "mean_output_tokens": 1}, TypeError),
    ],
)
def test_a_token_history_is_counts_and_finite_means(
    fields: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        TokenHistory(**fields)


def test_an_arm_takes_a_whole_number_of_calls() -> None:
    with pytest.raises(ValueError, match="calls must be an integer >= 0"):
        arm(calls=-3)
