"""Pricing an LLM span: project overrides, then genai-prices, and unpriced is never free."""

from __future__ import annotations

import math
import socket
from datetime import UTC, datetime
from typing import Any

import pytest
from genai_prices import data_snapshot

from neens.domain.conventions import SpanView
from neens.domain.pricing import Price, PriceBook, PriceLookupError, SpanCost, span_cost

JAN_2025 = datetime(2025, 1, 1, tzinfo=UTC)


def llm_view(**fields: Any) -> SpanView:
    defaults: dict[str, Any] = {
        "name": "chat",
        "start_time": JAN_2025,
        "kind": "llm",
        "input": None,
        "output": None,
        "model": "gpt-4o",
        "request_model": None,
        "response_model": None,
        "provider": "openai",
        "input_tokens": 1_000,
        "output_tokens": 500,
        "agent_name": None,
        "eval_run_id": None,
        "dataset_item_id": None,
        "version_label": None,
    }
    return SpanView(**{**defaults, **fields})


def test_price_costs_tokens_per_million() -> None:
    price = Price(input_per_mtok_usd=3.0, output_per_mtok_usd=15.0)

    assert price.cost(2_000_000, 100_000) == pytest.approx(6.0 + 1.5)


@pytest.mark.parametrize("bad", [-0.01, math.nan, math.inf])
def test_a_price_must_be_a_finite_non_negative_number(bad: float) -> None:
    with pytest.raises(ValueError, match="finite number >= 0"):
        Price(input_per_mtok_usd=bad, output_per_mtok_usd=1.0)


def test_a_price_must_be_a_number() -> None:
    with pytest.raises(TypeError, match="output_per_mtok_usd must be a number"):
        Price(input_per_mtok_usd=1.0, output_per_mtok_usd="2")  # type: ignore[arg-type]


def test_a_known_model_is_priced_from_genai_prices_at_the_time_of_the_call() -> None:
    # gpt-4o on OpenAI: $2.50 per million input tokens, $10 per million output tokens.
    cost = span_cost(llm_view(), PriceBook())

    assert cost.usd == pytest.approx(1_000 * 2.5 / 1e6 + 500 * 10 / 1e6)
    assert cost.unpriced_reason is None
    assert cost.source == "genai-prices"


def test_a_model_is_looked_up_without_a_provider_only_when_none_was_recorded() -> None:
    cost = span_cost(llm_view(provider=None), PriceBook())

    assert cost.usd == pytest.approx(0.0075)


def test_a_model_its_recorded_provider_does_not_serve_is_unpriced_not_priced_elsewhere() -> None:
    cost = span_cost(llm_view(provider="anthropic"), PriceBook())

    assert cost.usd is None
    assert cost.unpriced_reason == (
        "LLM span 'chat': no known price for model 'gpt-4o' from provider 'anthropic'"
    )
    assert cost.unpriced_model == "gpt-4o"


def test_an_unknown_provider_is_unpriced() -> None:
    cost = span_cost(llm_view(provider="my-own-gpu-box"), PriceBook())

    assert cost.usd is None
    assert cost.unpriced_model == "gpt-4o"


def test_an_unknown_model_is_unpriced_and_named() -> None:
    cost = span_cost(llm_view(model="acme-llm-9000", provider=None), PriceBook())

    assert cost == SpanCost(
        usd=None,
        unpriced_reason="LLM span 'chat': no known price for model 'acme-llm-9000'",
        unpriced_model="acme-llm-9000",
    )


def test_an_llm_span_without_a_model_is_unpriced_naming_the_span() -> None:
    cost = span_cost(llm_view(model=None, name="planner call"), PriceBook())

    assert cost == SpanCost(usd=None, unpriced_reason="LLM span 'planner call' has no model")


@pytest.mark.parametrize(
    ("tokens", "missing"),
    [
        ({"input_tokens": None}, "input"),
        ({"output_tokens": None}, "output"),
        ({"input_tokens": None, "output_tokens": None}, "input or output"),
    ],
)
def test_an_llm_span_missing_token_counts_is_unpriced_rather_than_cheap(
    tokens: dict[str, None], missing: str
) -> None:
    cost = span_cost(llm_view(**tokens), PriceBook())

    assert cost.usd is None
    assert cost.unpriced_reason == (
        f"LLM span 'chat' (model 'gpt-4o') reported no {missing} token count"
    )


@pytest.mark.parametrize("kind", ["agent", "tool", "chain", "embedding", "span"])
def test_spans_that_are_not_llm_calls_have_no_cost_of_their_own(kind: str) -> None:
    assert span_cost(llm_view(kind=kind), PriceBook()) == SpanCost(usd=None, unpriced_reason=None)


def test_an_override_price_beats_genai_prices() -> None:
    book = PriceBook({"gpt-4o": Price(input_per_mtok_usd=1.0, output_per_mtok_usd=2.0)})

    cost = span_cost(llm_view(), book)

    assert cost.usd == pytest.approx(1_000 * 1.0 / 1e6 + 500 * 2.0 / 1e6)
    assert cost.source == "override"


def test_an_override_prices_a_model_genai_prices_does_not_know() -> None:
    book = PriceBook({"acme-llm-9000": Price(input_per_mtok_usd=4.0, output_per_mtok_usd=8.0)})

    cost = span_cost(llm_view(model="ACME-LLM-9000", provider="acme"), book)

    assert cost.usd == pytest.approx(0.004 + 0.004)


def test_an_override_for_the_requested_model_covers_the_served_snapshot() -> None:
    book = PriceBook({"gpt-4o": Price(input_per_mtok_usd=1.0, output_per_mtok_usd=1.0)})
    view = llm_view(model="gpt-4o-2024-08-06", request_model="gpt-4o")

    cost = span_cost(view, book)

    assert cost.usd == pytest.approx(0.0015)
    assert cost.source == "override"


def test_price_book_lookup_error_names_model_and_provider() -> None:
    with pytest.raises(PriceLookupError, match="'nope' from provider 'openai'"):
        PriceBook().cost("nope", "openai", 1, 1)


def test_pricing_never_reaches_the_network_or_replaces_the_bundled_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("pricing tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)

    cost = span_cost(llm_view(model="claude-3-5-sonnet", provider="anthropic"), PriceBook())

    assert cost.usd is not None and cost.usd > 0
    assert data_snapshot.get_snapshot().from_auto_update is False


def _every_snapshot_model() -> list[tuple[str, str]]:
    snapshot = data_snapshot.get_snapshot()
    return [(provider.id, model.id) for provider in snapshot.providers for model in provider.models]


def test_every_snapshot_price_is_exactly_what_genai_prices_calculates() -> None:
    """The plain-rate shortcut in PriceBook.cost must agree with `calc_price` to the last bit, for
    every model and provider in the bundled snapshot, dates old and new, counts small and huge."""
    import random

    from genai_prices import Usage, calc_price

    from neens.domain.pricing import _plain_token_rates

    rng = random.Random(20261130)
    book = PriceBook()
    compared = shortcut = 0
    for provider, model in _every_snapshot_model():
        for at in (JAN_2025, datetime(2026, 11, 30, tzinfo=UTC)):
            for input_tokens, output_tokens in (
                (0, 0),
                (1, 0),
                (0, 1),
                (rng.randrange(1, 300_000), rng.randrange(1, 40_000)),
                (rng.randrange(10**9, 10**12), rng.randrange(10**6, 10**9)),
            ):
                try:
                    expected: float | str = float(
                        calc_price(
                            Usage(input_tokens=input_tokens, output_tokens=output_tokens),
                            model_ref=model,
                            provider_id=provider,
                            genai_request_timestamp=at,
                        ).total_price
                    )
                except (LookupError, ValueError):
                    expected = "refused"
                try:
                    got: float | str = book.cost(model, provider, input_tokens, output_tokens, at)[
                        0
                    ]
                except PriceLookupError:
                    got = "refused"
                assert got == expected, (provider, model, at, input_tokens, output_tokens)
                compared += 1
        try:
            _, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider, None)
        except LookupError:
            continue
        shortcut += _plain_token_rates(info.get_prices(JAN_2025)) is not None
    assert compared > 1_000
    assert shortcut > 100, "the plain-rate shortcut was never exercised"


def _library_usd(model: str, provider: str, **usage: int) -> float:
    from genai_prices import Usage, calc_price

    return float(
        calc_price(
            Usage(**usage), model_ref=model, provider_id=provider, genai_request_timestamp=JAN_2025
        ).total_price
    )


@pytest.mark.parametrize(
    ("model", "provider", "cached"),
    [
        ("gpt-4o-2024-08-06", "openai", {"cache_read_tokens": 1_024}),
        ("claude-3-5-sonnet-latest", "anthropic", {"cache_read_tokens": 9_000}),
        (
            "claude-3-5-sonnet-latest",
            "anthropic",
            {"cache_read_tokens": 6_000, "cache_write_tokens": 3_000},
        ),
    ],
)
def test_prompt_cache_tokens_are_priced_at_the_cache_rates(
    model: str, provider: str, cached: dict[str, int]
) -> None:
    """Input tokens count the cached ones (every convention says so, as genai-prices does);
    pricing all of them at the full input rate overstated a cached call up to 4.4 times."""
    view = llm_view(
        model=model, provider=provider, input_tokens=10_000, output_tokens=100, **cached
    )
    cost = span_cost(view, PriceBook())
    expected = _library_usd(model, provider, input_tokens=10_000, output_tokens=100, **cached)
    assert cost.usd == expected
    full_rate = _library_usd(model, provider, input_tokens=10_000, output_tokens=100)
    assert cost.usd != full_rate


def test_more_cached_tokens_than_input_tokens_is_unpriced_and_says_why() -> None:
    view = llm_view(input_tokens=100, cache_read_tokens=80, cache_write_tokens=40)
    cost = span_cost(view, PriceBook())
    assert cost.usd is None
    assert cost.unpriced_reason is not None
    assert "120 prompt-cache tokens, more than its 100 input tokens" in cost.unpriced_reason


def test_an_override_bills_cached_input_tokens_at_its_input_rate() -> None:
    book = PriceBook({"gpt-4o": Price(2.0, 8.0)})
    view = llm_view(input_tokens=1_000, output_tokens=500, cache_read_tokens=900)
    assert span_cost(view, book).usd == pytest.approx((1_000 * 2.0 + 500 * 8.0) / 1e6)


@pytest.mark.parametrize(
    ("semconv", "genai_prices_id"),
    [
        ("anthropic", "anthropic"),
        ("aws.bedrock", "aws"),
        ("azure.ai.inference", "azure"),
        ("azure.ai.openai", "azure"),
        ("cohere", "cohere"),
        ("deepseek", "deepseek"),
        ("gcp.gemini", "google"),
        ("gcp.gen_ai", "google"),
        ("gcp.vertex_ai", "google"),
        ("groq", "groq"),
        ("mistral_ai", "mistral"),
        ("openai", "openai"),
        ("perplexity", "perplexity"),
        ("x_ai", "x-ai"),
    ],
)
def test_each_semantic_convention_provider_is_priced_by_its_own_host(
    semconv: str, genai_prices_id: str
) -> None:
    """`gen_ai.provider.name` values are OpenTelemetry's, not genai-prices' ids: each must reach
    the host it names (genai-prices alone read `azure.ai.openai` as OpenAI's own API)."""
    snapshot = data_snapshot.get_snapshot()
    host = next(p for p in snapshot.providers if p.id == genai_prices_id)
    book = PriceBook()
    checked = 0
    for model in host.models:
        try:
            expected = _library_usd(
                model.id, genai_prices_id, input_tokens=123_456, output_tokens=7_890
            )
        except (LookupError, ValueError):
            continue
        assert book.cost(model.id, semconv, 123_456, 7_890, JAN_2025)[0] == expected, model.id
        checked += 1
        if checked == 5:
            break
    assert checked > 0


def test_azure_openai_models_are_priced_at_azures_price_not_openais() -> None:
    snapshot = data_snapshot.get_snapshot()
    azure = next(p for p in snapshot.providers if p.id == "azure")
    differing = []
    for model in azure.models:
        try:
            at_azure = _library_usd(model.id, "azure", input_tokens=10**6, output_tokens=10**6)
            at_openai = _library_usd(model.id, "openai", input_tokens=10**6, output_tokens=10**6)
        except (LookupError, ValueError):
            continue
        if at_azure != at_openai:
            differing.append((model.id, at_azure))
    assert differing, "no model priced differently at Azure: the test would prove nothing"
    book = PriceBook()
    for model, at_azure in differing:
        assert book.cost(model, "azure.ai.openai", 10**6, 10**6, JAN_2025)[0] == at_azure


def test_a_provider_genai_prices_does_not_know_stays_unpriced() -> None:
    with pytest.raises(PriceLookupError, match="ibm.watsonx.ai"):
        PriceBook().cost("granite-3-8b-instruct", "ibm.watsonx.ai", 10, 10, JAN_2025)
