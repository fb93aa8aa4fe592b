"""What a model sweep will cost before it runs, whether its budget allows it, and its run caps.

A sweep makes `passK x itemCount` agent calls per arm, so the estimate is made per arm and then
summed. Each arm rests on one of three bases, and says which in `basis_detail`:

history
    The connection has served at least one earlier call, so its mean input and output tokens per
    call are known. The estimate is `calls x price(one call at the mean tokens)`. A call is
    priced by `PriceBook.cost`, the same function that prices spans, so the estimate uses the
    project's overrides and genai-prices exactly as the sweep's real spend will. Token counts
    are whole numbers but a mean is not: the price at a fractional mean is interpolated between
    the whole-token prices around it, `p(i, o) + di x (p(i+1, o) - p(i, o)) + do x (p(i, o+1) -
    p(i, o))`, which is the exact price for plain per-token rates (with or without a fixed
    per-request fee, because the price is then affine in the token counts). A model whose price
    has tiers (a higher rate for every token once a call's prompt passes some length) is not
    linear: pricing the mean call puts every call in the mean call's tier, which understates the
    cost when some calls cross the tier and the mean does not, and overstates it the other way
    round. Only the mean is known, so the mean call is priced and `basis_detail` names the tier.

prompts
    No earlier call: tokens are counted from the frozen dataset's text, `ceil(characters / 4)`
    per text (characters are Unicode code points; 4 is the usual characters-per-token rule for
    English), input from the item's input and output from its expected output. An item without
    an expected output is counted at the mean of those that have one, rounded up to a whole
    token; when no item has one, at `ASSUMED_OUTPUT_TOKENS`. Each item is priced on its own (so
    tiers apply item by item), the prices summed and multiplied by `calls / item count` (k). Only
    the dataset's text is counted, not the agent's own instructions, tool results or extra model
    calls, and `basis_detail` says the real cost is likely higher.

unpriced
    The connection records no model, or the pricing does not know the model (or the cost is
    too large to represent): `estimated_usd` is None. Unpriced is never free.

Money is `Decimal` throughout and in every value returned here; nothing is rounded. A price from
`PriceBook.cost` (a float) is read back through its shortest decimal representation, which gives
back genai-prices' own Decimal whenever that has at most 15 significant digits. The API turns an
amount into a JSON number with `usd_for_wire`, which rounds up to 6 decimals so that a small
non-zero cost never shows as 0 and an estimate never shows below what it is.

The budget rule (`estimate_sweep`): a sweep would be refused when the estimate of its priced arms
is strictly greater than the budget; exactly at the budget is allowed, since a budget is the most
one is willing to spend. Unpriced arms add nothing to that sum, so a partly priced sweep is
refused only when its priced part alone is already over, and a fully unpriced one is never
refused on budget: Neens does not block on a number it does not have. Either is `partial`.

The caps (`check_caps`) bound the shape of a sweep before anything is estimated: two arms at
least, `passK >= 1`, and at most `max_arms` arms, `max_pass_k` and `max_total_calls` calls.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_UP, Decimal
from typing import Final, Literal

from genai_prices import data_snapshot
from genai_prices.types import TieredPrices

from neens.domain.pricing import PriceBook, PriceLookupError
from neens.domain.storable import safe_label

__all__ = [
    "ASSUMED_OUTPUT_TOKENS",
    "CHARS_PER_TOKEN",
    "ArmEstimate",
    "Basis",
    "CapViolation",
    "SweepCaps",
    "SweepEstimate",
    "TokenHistory",
    "check_caps",
    "estimate_arm",
    "estimate_sweep",
    "text_tokens",
    "usd_for_wire",
]

Basis = Literal["history", "prompts", "unpriced"]

CHARS_PER_TOKEN: Final = 4
"""Characters of text counted as one token when no call has been seen."""

ASSUMED_OUTPUT_TOKENS: Final = 500
"""Output tokens per call assumed when no dataset item has an expected output."""

_WIRE_QUANTUM: Final = Decimal("0.000001")


@dataclass(frozen=True, slots=True)
class TokenHistory:
    """What earlier calls through one agent connection used, per call."""

    calls: int
    mean_input_tokens: float
    mean_output_tokens: float

    def __post_init__(self) -> None:
        if isinstance(self.calls, bool) or not isinstance(self.calls, int) or self.calls < 0:
            raise ValueError(f"calls must be an integer >= 0, got {self.calls!r}")
        for name in ("mean_input_tokens", "mean_output_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number, got {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class ArmEstimate:
    """One arm's estimated cost and what the number rests on."""

    label: str
    connection_id: str
    model: str | None
    calls: int
    """passK x item count: the agent calls this arm will make."""
    estimated_usd: Decimal | None
    """Unrounded; None when the arm is unpriced."""
    basis: Basis
    basis_detail: str
    """A sentence saying what the number rests on, or why there is none."""


@dataclass(frozen=True, slots=True)
class SweepEstimate:
    """The whole sweep's estimate and what its budget says about it."""

    arms: tuple[ArmEstimate, ...]
    total_calls: int
    estimated_usd: Decimal | None
    """The sum over priced arms, unrounded; None when no arm is priced."""
    partial: bool
    """True when any arm is unpriced: `estimated_usd` then leaves those arms out."""
    unpriced_arms: tuple[str, ...]
    """Labels of the unpriced arms, in arm order."""
    budget_usd: Decimal | None
    would_refuse: bool | None
    """None without a budget; True only when the priced part is over it."""
    refusal: str | None
    """Why creating this sweep would be refused on budget, naming `budgetUsd`; else None."""


def usd_for_wire(amount: Decimal | None) -> float | None:
    """`amount` as a JSON number: rounded up to 6 decimals, so a non-zero cost never reads 0."""
    if amount is None:
        return None
    return float(amount.quantize(_WIRE_QUANTUM, rounding=ROUND_UP))


def text_tokens(text: str) -> int:
    """Tokens estimated for a text: ceil(characters / CHARS_PER_TOKEN)."""
    return -(-len(text) // CHARS_PER_TOKEN)


class _Unpriced(Exception):
    """The model has no usable price; the message says why."""


def estimate_arm(
    *,
    label: str,
    connection_id: str,
    model: str | None,
    provider: str | None,
    calls: int,
    history: TokenHistory | None,
    prompts: Sequence[tuple[str, str | None]],
    book: PriceBook | None = None,
    at: datetime | None = None,
) -> ArmEstimate:
    """Estimate one arm (see the module docstring for the three bases).

    `prompts` are the frozen dataset's (input, expected_output) pairs. `book` holds the
    project's price overrides (None: genai-prices only); `at` is when prices are read (None:
    now). A history with zero calls counts as no history.
    """
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 0:
        raise ValueError(f"calls must be an integer >= 0, got {calls!r}")
    if calls > 0 and not prompts and (history is None or history.calls == 0):
        raise ValueError("an arm with calls needs earlier calls or dataset prompts to estimate")
    book = PriceBook() if book is None else book
    when = at or datetime.now(tz=UTC)

    def unpriced(reason: str) -> ArmEstimate:
        seen = ""
        if history is not None and history.calls > 0:
            seen = f"; {_history_phrase(history)}"
        return ArmEstimate(label, connection_id, model, calls, None, "unpriced", reason + seen)

    if model is None:
        return unpriced("the connection records no model, so its calls cannot be priced")
    pricer = _Pricer(book, model, provider, when)
    try:
        if history is not None and history.calls > 0:
            usd, detail = _from_history(pricer, calls, history)
            basis: Basis = "history"
        else:
            usd, detail = _from_prompts(pricer, calls, prompts)
            basis = "prompts"
    except _Unpriced as exc:
        return unpriced(str(exc))
    return ArmEstimate(label, connection_id, model, calls, usd, basis, detail)


class _Pricer:
    """One model's price per call in Decimal, from `PriceBook.cost`, remembered per token pair."""

    def __init__(self, book: PriceBook, model: str, provider: str | None, at: datetime) -> None:
        self.book, self.model, self.provider, self.at = book, model, provider, at
        self._seen: dict[tuple[int, int], Decimal] = {}

    def whole(self, input_tokens: int, output_tokens: int) -> Decimal:
        key = (input_tokens, output_tokens)
        if (price := self._seen.get(key)) is None:
            try:
                usd, _ = self.book.cost(
                    self.model, self.provider, input_tokens, output_tokens, self.at
                )
            except PriceLookupError as exc:
                raise _Unpriced(str(exc)) from exc
            except OverflowError:
                usd = math.inf
            if not math.isfinite(usd):
                raise _Unpriced(
                    f"the cost for model {safe_label(self.model)} is too large to represent; "
                    "check the model's price"
                )
            price = self._seen[key] = Decimal(repr(usd))
        return price

    def mean(self, input_tokens: Decimal, output_tokens: Decimal) -> Decimal:
        """The price of one call at fractional token counts, interpolated (module docstring)."""
        low_in, low_out = int(input_tokens), int(output_tokens)
        base = self.whole(low_in, low_out)
        price = base
        if frac_in := input_tokens - low_in:
            price += frac_in * (self.whole(low_in + 1, low_out) - base)
        if frac_out := output_tokens - low_out:
            price += frac_out * (self.whole(low_in, low_out + 1) - base)
        return price

    def tier_starts(self) -> list[int]:
        """The prompt lengths (input tokens) above which the model's genai-prices price rises
        (a call over `start` input tokens pays the tier's rate on every token), ascending; []
        for an override or a price without tiers."""
        if self.book.override(self.model) is not None:
            return []
        try:
            _, found = data_snapshot.get_snapshot().find_provider_model(
                self.model, None, self.provider or None, None
            )
        except LookupError:
            return []
        return sorted(
            {
                tier.start
                for value in vars(found.get_prices(self.at)).values()
                if isinstance(value, TieredPrices)
                for tier in value.tiers
            }
        )

    def total(self, calls: Sequence[tuple[int, int]]) -> Decimal:
        """The summed price of calls at whole token counts.

        Between two tier starts the price is affine in the token counts, so the calls of one
        such band cost `n x p(i0, 0) + di x sum(i - i0) + do x sum(o)`, with `di` and `do` the
        band's price of one more input or output token: exact, and three lookups per band
        instead of one per call (a tiered price costs genai-prices a fraction of a millisecond).
        """
        starts = self.tier_starts()
        bands: dict[int, list[tuple[int, int]]] = {}
        for call in calls:
            bands.setdefault(bisect_left(starts, call[0]), []).append(call)
        total = Decimal(0)
        for band in bands.values():
            low = min(i for i, _ in band)
            base = self.whole(low, 0)
            per_output = self.whole(low, 1) - base
            extra_inputs = sum(i - low for i, _ in band)
            per_input = self.whole(low + 1, 0) - base if extra_inputs else Decimal(0)
            outputs = sum(o for _, o in band)
            total += len(band) * base + per_input * extra_inputs + per_output * outputs
        return total


def _from_history(pricer: _Pricer, calls: int, history: TokenHistory) -> tuple[Decimal, str]:
    mean_in = Decimal(repr(float(history.mean_input_tokens)))
    mean_out = Decimal(repr(float(history.mean_output_tokens)))
    per_call = pricer.mean(mean_in, mean_out)
    detail = (
        f"{_history_phrase(history)}; {_count(calls, 'call')} at {_usd(per_call)} each"
        if calls
        else f"{_history_phrase(history)}; no calls to make"
    )
    if starts := pricer.tier_starts():
        tier = starts[0]
        side = "above" if mean_in > tier else "below"
        detail += (
            f". This model's price rises for every token of a call whose prompt is over "
            f"{tier:,} input tokens; every call is priced like the mean one ({side} that), so "
            "the estimate is off if some calls fall on the other side"
        )
    return per_call * calls, detail


def _from_prompts(
    pricer: _Pricer, calls: int, prompts: Sequence[tuple[str, str | None]]
) -> tuple[Decimal, str]:
    if not prompts:
        return Decimal(0), "no dataset items, so no calls to make"
    inputs = [text_tokens(text) for text, _ in prompts]
    known = [text_tokens(expected) for _, expected in prompts if expected is not None]
    missing = len(prompts) - len(known)
    if known:
        fill = -(-sum(known) // len(known))
        fill_note = (
            f"; {_count(missing, 'item')} without an expected output counted at the mean of "
            f"those with one, {fill:,} tokens"
            if missing
            else ""
        )
    else:
        fill = ASSUMED_OUTPUT_TOKENS
        fill_note = f"; no item has an expected output, so {fill:,} output tokens are assumed"
    known_outputs = iter(known)
    outputs = [fill if expected is None else next(known_outputs) for _, expected in prompts]
    total = pricer.total(list(zip(inputs, outputs, strict=True)))
    output_sum = sum(outputs)
    items = len(prompts)
    detail = (
        f"no earlier calls through this connection, so tokens are counted from the text of "
        f"{_count(items, 'dataset item')} at {CHARS_PER_TOKEN} characters a token: "
        f"{_tokens(sum(inputs) / items)} input, {_tokens(output_sum / items)} output tokens per "
        f"item on average{fill_note}; {_count(calls, 'call')} "
        f"({_tokens(calls / items)} per item). Only the dataset's text is counted, not the "
        "agent's own instructions, tool results or extra model calls, so the real cost is "
        "likely higher"
    )
    return total * calls / items, detail


def estimate_sweep(
    arms: Sequence[ArmEstimate], budget_usd: Decimal | float | None
) -> SweepEstimate:
    """Sum the arms and apply the budget rule (module docstring): refuse only when the priced
    arms alone are strictly over the budget."""
    if not arms:
        raise ValueError("a sweep estimate needs at least one arm")
    budget = _budget(budget_usd)
    priced = [arm.estimated_usd for arm in arms if arm.estimated_usd is not None]
    unpriced = tuple(arm.label for arm in arms if arm.estimated_usd is None)
    total = sum(priced, Decimal(0)) if priced else None
    would_refuse: bool | None = None if budget is None else False
    refusal: str | None = None
    if budget is not None and total is not None and total > budget:
        would_refuse = True
        refusal = _refusal(total, budget, len(priced), unpriced)
    return SweepEstimate(
        arms=tuple(arms),
        total_calls=sum(arm.calls for arm in arms),
        estimated_usd=total,
        partial=bool(unpriced),
        unpriced_arms=unpriced,
        budget_usd=budget,
        would_refuse=would_refuse,
        refusal=refusal,
    )


def _budget(value: Decimal | float | None) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Decimal | int | float):
        raise TypeError(f"budgetUsd must be a number, got {type(value).__name__}")
    budget = value if isinstance(value, Decimal) else Decimal(repr(value))
    if not budget.is_finite() or budget < 0:
        raise ValueError(f"budgetUsd must be a finite number >= 0, got {value!r}")
    return budget


def _refusal(total: Decimal, budget: Decimal, priced: int, unpriced: tuple[str, ...]) -> str:
    fix = "raise budgetUsd, lower passK or drop an arm"
    if not unpriced:
        return f"the sweep is estimated at {_usd(total)}, over budgetUsd {_usd(budget)}; {fix}"
    names = ", ".join(safe_label(label) for label in unpriced)
    return (
        f"the {_count(priced, 'priced arm')} alone {'is' if priced == 1 else 'are'} estimated at "
        f"{_usd(total)}, over budgetUsd {_usd(budget)}, and {_count(len(unpriced), 'arm')} "
        f"({names}) {'is' if len(unpriced) == 1 else 'are'} unpriced, so the whole sweep costs "
        f"more than that; {fix}"
    )


CapField = Literal["arms", "passK"]
CapRule = Literal["too_few_arms", "too_many_arms", "pass_k_too_small", "pass_k_too_large", "calls"]


@dataclass(frozen=True, slots=True)
class SweepCaps:
    """The largest sweep a server accepts (settings NEENS_SWEEP_MAX_ARMS, NEENS_SWEEP_MAX_PASS_K,
    NEENS_SWEEP_MAX_CALLS)."""

    max_arms: int = 8
    max_pass_k: int = 10
    max_total_calls: int = 100_000

    def __post_init__(self) -> None:
        for name, least in (("max_arms", 2), ("max_pass_k", 1), ("max_total_calls", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")


@dataclass(frozen=True, slots=True)
class CapViolation:
    """Why a sweep's shape is refused: the request field at fault and what to do."""

    field: CapField
    rule: CapRule
    message: str


def check_caps(
    arms: int, pass_k: int, item_count: int, caps: SweepCaps | None = None
) -> CapViolation | None:
    """The first rule the sweep's shape breaks, or None: at least two arms, passK >= 1, then
    the caps on arms, passK and total calls (arms x passK x item_count; field `arms`)."""
    for name, value in (("arms", arms), ("pass_k", pass_k), ("item_count", item_count)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    caps = caps or SweepCaps()
    if arms < 2:
        return CapViolation(
            "arms",
            "too_few_arms",
            f"a sweep compares models, so it needs at least two arms; got {arms}",
        )
    if pass_k < 1:
        return CapViolation(
            "passK", "pass_k_too_small", f"passK must be at least 1 (default 3); got {pass_k}"
        )
    if arms > caps.max_arms:
        return CapViolation(
            "arms",
            "too_many_arms",
            f"a sweep has at most {caps.max_arms} arms on this server; got {arms}. Split it "
            "into smaller sweeps, or raise the cap with NEENS_SWEEP_MAX_ARMS",
        )
    if pass_k > caps.max_pass_k:
        return CapViolation(
            "passK",
            "pass_k_too_large",
            f"passK is at most {caps.max_pass_k} on this server; got {pass_k}. Lower passK, "
            "or raise the cap with NEENS_SWEEP_MAX_PASS_K",
        )
    total = arms * pass_k * item_count
    if total > caps.max_total_calls:
        return CapViolation(
            "arms",
            "calls",
            f"this sweep would make {total:,} agent calls ({arms} arms x passK {pass_k} x "
            f"{item_count:,} items), over the cap of {caps.max_total_calls:,} on this server. "
            "Drop an arm, lower passK or use a smaller dataset, or raise the cap with "
            "NEENS_SWEEP_MAX_CALLS",
        )
    return None


def _history_phrase(history: TokenHistory) -> str:
    return (
        f"mean of {_count(history.calls, 'earlier call')} through this connection: "
        f"{_tokens(history.mean_input_tokens)} input, "
        f"{_tokens(history.mean_output_tokens)} output tokens"
    )


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _tokens(value: float) -> str:
    """A token count for a sentence: whole when whole, else one decimal (never 0 for > 0)."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}" if value >= 0.05 else f"{value:.2g}"


def _usd(amount: Decimal) -> str:
    """Dollars for a sentence: rounded up to 6 decimals, trailing zeros dropped down to cents."""
    text = f"{amount.quantize(_WIRE_QUANTUM, rounding=ROUND_UP):f}"
    whole, _, cents = text.partition(".")
    return f"${int(whole):,}.{cents.rstrip('0').ljust(2, '0')}"
