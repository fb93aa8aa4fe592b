"""What an LLM call cost, or an honest statement that it is not known.

Prices come from two places, in this order: the project's own overrides (negotiated rates,
self-hosted or fine-tuned models, anything the public tables do not know) and the bundled
`genai-prices` snapshot. The snapshot is used exactly as installed: `genai_prices.UpdatePrices`
(its background network refresh) is never started here, so a cost computed today can be
recomputed identically tomorrow and the server never reaches out to the internet on its own.

Unpriced is never free. A call whose model or token counts are missing, or whose model has no
known price, gets `usd=None` and a reason naming the span and model, so a comparison between two
agent versions can never be won by the one whose calls simply could not be priced.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Final

from genai_prices import Usage, data_snapshot

from neens.domain.conventions import SpanView
from neens.domain.storable import safe_label

__all__ = ["Price", "PriceBook", "SpanCost", "load_price_table", "span_cost"]

_PER_MTOK: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """A per-million-token price in US dollars, as providers publish them."""

    input_per_mtok_usd: float
    output_per_mtok_usd: float

    def __post_init__(self) -> None:
        for name in ("input_per_mtok_usd", "output_per_mtok_usd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number, got {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (
            input_tokens * self.input_per_mtok_usd + output_tokens * self.output_per_mtok_usd
        ) / _PER_MTOK


@dataclass(frozen=True, slots=True)
class SpanCost:
    """The cost of one span.

    Three states: priced (`usd` set), unpriced (`unpriced_reason` set, and `unpriced_model` when
    the model is known but has no price), and not applicable (both None: the span is not an LLM
    call, so it has no cost of its own).
    """

    usd: float | None
    unpriced_reason: str | None
    unpriced_model: str | None = None
    source: str | None = None
    """"override" or "genai-prices" for a priced span."""
    overflow: bool = False
    """True when a price was found but the cost is too large to represent (a float would be
    infinite): the span is unpriced, with `unpriced_reason` saying so, never "priced" at null."""


class PriceLookupError(LookupError):
    """No price is known for a model; the message says which model and provider."""


class PriceBook:
    """Prices for one project: its overrides first, then the bundled genai-prices snapshot.

    Override keys are model names, matched exactly and then case-insensitively, because
    providers are inconsistent about case but never about spelling. Overrides are provider-free:
    a project that overrides "gpt-4o" means every call to it, wherever it was served.
    """

    def __init__(self, overrides: Mapping[str, Price] | None = None) -> None:
        self._overrides: dict[str, Price] = dict(overrides or {})
        self._folded: dict[str, Price] = {}
        for model, price in self._overrides.items():
            self._folded.setdefault(model.casefold(), price)

    def override(self, model: str) -> Price | None:
        """The project's own price for `model`, or None."""
        exact = self._overrides.get(model)
        return exact if exact is not None else self._folded.get(model.casefold())

    def cost(
        self,
        model: str,
        provider: str | None,
        input_tokens: int,
        output_tokens: int,
        at: datetime | None = None,
        *,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> tuple[float, str]:
        """The USD cost of one call and where its price came from.

        `cache_read_tokens` and `cache_write_tokens` are parts of `input_tokens` (as every
        convention and genai-prices count them) that genai-prices bills at the model's
        prompt-cache rates. A project's own price is one input rate and one output rate: it
        bills every input token, cached or not, at its input rate (docs/traces.md says so).

        When a provider was recorded, only that provider's price is used: the same model name
        is priced differently by different hosts (OpenAI vs. Azure vs. Bedrock), and quoting
        another host's rate would be a guess. Only when no provider was recorded does
        genai-prices pick the provider from the model name. `at` selects the price in force at
        the time of the call; None means now. Raises `PriceLookupError` when nothing matches.
        """
        if (price := self.override(model)) is not None:
            return price.cost(input_tokens, output_tokens), "override"
        try:
            total = _genai_price(
                model,
                provider or None,
                input_tokens,
                output_tokens,
                at,
                cache_read_tokens=cache_read_tokens,
                cache_write_tokens=cache_write_tokens,
            )
        except LookupError as exc:
            where = f" from provider {safe_label(provider)}" if provider else ""
            raise PriceLookupError(f"no known price for model {safe_label(model)}{where}") from exc
        except ValueError as exc:  # genai-prices refusing this usage for this model
            raise PriceLookupError(
                f"genai-prices cannot price model {safe_label(model)}: {exc}"
            ) from exc
        return float(total), "genai-prices"


def load_price_table() -> None:
    """Load the bundled genai-prices snapshot now (about 0.3 s), so the first span priced after
    the server starts does not pay for it."""
    data_snapshot.get_snapshot()


def _genai_price(
    model: str,
    provider: str | None,
    input_tokens: int,
    output_tokens: int,
    at: datetime | None,
    *,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> Decimal:
    """genai-prices' total for a call.

    `calc_price` resolves and validates the model's price units on every call (about 0.4 ms, most
    of a span's ingest cost). For a price made of plain per-token rates (no tiers, no per-request
    fee) the total is `input_mtok * in / 1e6 + output_mtok * out / 1e6`, every other unit counting
    zero, and that is computed here with the same Decimal operations, so the result is identical
    (tests/domain/test_pricing.py checks it against `calc_price` for every model in the snapshot).
    Any other price, and any call that used the prompt cache (its units nest: genai-prices
    decides which of them the model prices apart), goes through the library (about 0.1 ms).
    """
    when = at or datetime.now(tz=UTC)
    if provider is not None:
        provider = _GENAI_PRICES_PROVIDER.get(provider.strip().lower(), provider)
    found_provider, found_model = data_snapshot.get_snapshot().find_provider_model(
        model, None, provider, None
    )
    model_price = found_model.get_prices(when)
    rates = None if cache_read_tokens or cache_write_tokens else _plain_token_rates(model_price)
    if rates is None:
        usage = Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens or None,
            cache_write_tokens=cache_write_tokens or None,
        )
        calculation = found_model.calc_price(usage, found_provider, genai_request_timestamp=when)
        return Decimal(calculation.total_price)
    input_mtok, output_mtok = rates
    return (input_mtok * Decimal(input_tokens)) / _PER_MTOK + (
        output_mtok * Decimal(output_tokens)
    ) / _PER_MTOK


_GENAI_PRICES_PROVIDER: Final = {
    "azure.ai.openai": "azure",
    "azure.ai.inference": "azure",
    "gcp.gen_ai": "google",
    "x_ai": "x-ai",
}
"""OpenTelemetry's `gen_ai.provider.name` values that genai-prices does not resolve to the same
host: it reads `azure.ai.openai` as OpenAI's own API (whose prices differ from Azure's for
many models) and knows no `azure.ai.inference`, `gcp.gen_ai` or `x_ai`. Its other ids and the
conventions' other values (`aws.bedrock`, `gcp.vertex_ai`, `mistral_ai`, ...) it resolves
itself; tests/domain/test_pricing.py checks each."""


_RATES: dict[int, tuple[object, tuple[Decimal, Decimal] | None]] = {}
"""Per genai-prices price object (held, so its id is never reused): its plain rates, or None."""


def _plain_token_rates(model_price: object) -> tuple[Decimal, Decimal] | None:
    """(input_mtok, output_mtok) when the price is only plain Decimal rates with no per-request
    fee; None when it has tiers, a request fee or no rate for either side."""
    memo = _RATES.get(id(model_price))
    if memo is not None and memo[0] is model_price:
        return memo[1]
    units: dict[str, object] = {
        k: v for k, v in vars(model_price).items() if not k.startswith("_") and v is not None
    }
    input_mtok, output_mtok = units.get("input_mtok"), units.get("output_mtok")
    rates: tuple[Decimal, Decimal] | None = None
    if (
        isinstance(input_mtok, Decimal)
        and isinstance(output_mtok, Decimal)
        and "requests_kcount" not in units
        and all(type(v) is Decimal for v in units.values())
    ):
        rates = (input_mtok, output_mtok)
    _RATES[id(model_price)] = (model_price, rates)
    return rates


def span_cost(view: SpanView, book: PriceBook) -> SpanCost:
    """Price one span from its view.

    Only LLM spans are priced: agent and chain spans often repeat their children's token counts
    as totals, and pricing those would count every call twice. An LLM span is unpriced when it
    has no model, misses either token count (pricing the missing side as 0 would make it look
    cheap), or its model has no price. The priced model is `view.model` (the served model when
    known); an override given for the requested model is honoured too, since that is the name
    the project knows the model by.
    """
    if view.kind != "llm":
        return SpanCost(usd=None, unpriced_reason=None)
    span = safe_label(view.name)
    model = view.model
    if model is None:
        return SpanCost(usd=None, unpriced_reason=f"LLM span {span} has no model")
    input_tokens, output_tokens = view.input_tokens, view.output_tokens
    if input_tokens is None or output_tokens is None:
        missing = " or ".join(
            side
            for side, count in (("input", input_tokens), ("output", output_tokens))
            if count is None
        )
        return SpanCost(
            usd=None,
            unpriced_reason=(
                f"LLM span {span} (model {safe_label(model)}) reported no {missing} token count"
            ),
        )
    cache_read, cache_write = view.cache_read_tokens or 0, view.cache_write_tokens or 0
    if cache_read + cache_write > input_tokens:
        return SpanCost(
            usd=None,
            unpriced_reason=(
                f"LLM span {span} (model {safe_label(model)}) reported {cache_read + cache_write} "
                f"prompt-cache tokens, more than its {input_tokens} input tokens, which count "
                "them; its cost cannot be told"
            ),
        )
    usd: float
    if view.request_model is not None and book.override(model) is None:
        request_price = book.override(view.request_model)
        if request_price is not None:
            usd = request_price.cost(input_tokens, output_tokens)
            return _checked(SpanCost(usd=usd, unpriced_reason=None, source="override"), span, model)
    try:
        usd, source = book.cost(
            model,
            view.provider,
            input_tokens,
            output_tokens,
            view.start_time,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )
    except PriceLookupError as exc:
        return SpanCost(usd=None, unpriced_reason=f"LLM span {span}: {exc}", unpriced_model=model)
    except OverflowError:
        usd, source = math.inf, "genai-prices"
    return _checked(SpanCost(usd=usd, unpriced_reason=None, source=source), span, model)


def _checked(cost: SpanCost, span: str, model: str) -> SpanCost:
    """`cost`, or an overflow when its amount is not a finite number of dollars."""
    if cost.usd is None or math.isfinite(cost.usd):
        return cost
    return SpanCost(
        usd=None,
        unpriced_reason=(
            f"LLM span {span} (model {safe_label(model)}) costs more than can be represented; "
            "check the model's price and the span's token counts"
        ),
        overflow=True,
    )
