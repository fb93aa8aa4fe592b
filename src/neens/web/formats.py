"""How the pages write values: the template filters. They format what the API answered and
never derive a number; an unknown value is written as what it means ("no data", "unpriced"),
never as 0. docs/pages.md lists them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

NO_DATA = "no data"
UNPRICED = "unpriced"
MINUS = "\u2212"
_NONZERO = re.compile("[1-9]")


def _sign(value: float, signed: bool, shown: str) -> str:
    """A delta shows + and − (and nothing for 0); any other value only its minus. `shown` is the
    magnitude as written: one that reads as zero (−0, or a difference rounded away) has no sign."""
    if not _NONZERO.search(shown):
        return ""
    if value < 0:
        return MINUS
    return "+" if signed and value > 0 else ""


def _unsigned_zero(text: str) -> str:
    """`text` without its minus when it reads as zero: `-0.0` (a −0 or a rounded tiny negative)
    is `0.0`."""
    return text.removeprefix("-") if not _NONZERO.search(text) else text


def percent(value: float | None) -> str:
    """A rate in [0, 1] as a percentage with one decimal: 0.875 → 87.5%."""
    return NO_DATA if value is None else _unsigned_zero(f"{value * 100:.1f}") + "%"


def percent_short(value: float | None) -> str:
    """A bar as people say it: 0.9 → 90%, 0.875 → 87.5%."""
    if value is None:
        return NO_DATA
    return _unsigned_zero(f"{value * 100:.1f}").removesuffix(".0") + "%"


def pct_change(value: float | None) -> str:
    """A change already in percent: −95.3%, +12.0%; "no data" when unknown."""
    if value is None:
        return NO_DATA
    shown = f"{abs(value):,.1f}"
    return f"{_sign(value, True, shown)}{shown}%"


def usd(value: float | None, *, signed: bool = False) -> str:
    """US dollars: two decimals from $1 up, six significant-enough decimals below ($0.000390),
    so a cheap call's cost is not rounded to $0.00. None is `unpriced`, never $0."""
    if value is None:
        return UNPRICED
    amount = abs(value)
    text = f"{amount:,.2f}" if amount >= 1 or amount == 0 else f"{amount:.6f}"
    return f"{_sign(value, signed, text)}${text}"


def ms(value: float | None, *, signed: bool = False) -> str:
    """Milliseconds, whole: 1,234 ms."""
    if value is None:
        return NO_DATA
    shown = f"{abs(value):,.0f}"
    return f"{_sign(value, signed, shown)}{shown} ms"


def decimal(value: float | None, places: int = 2, *, signed: bool = False) -> str:
    """A plain number with `places` decimals (scores, mean step counts)."""
    if value is None:
        return NO_DATA
    shown = f"{abs(value):,.{places}f}"
    return f"{_sign(value, signed, shown)}{shown}"


def cost_rule(value: float | None, rule: str) -> str:
    """A cost rule's observed value or threshold in its own unit: dollars, or a % change."""
    if value is None:
        return UNPRICED
    if rule == "max_delta_pct":
        return pct_change(value)
    return usd(value, signed=rule == "max_delta_usd")


def count(value: int | None) -> str:
    return NO_DATA if value is None else f"{value:,}"


def when(value: datetime | None) -> str:
    """A UTC instant to the second: 2026-11-30 08:00:02 UTC."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).isoformat()


def wire(value: Any) -> str:
    """A value as the API writes it in JSON, for the `data-value` attribute tests and scripts
    read: null, true, 0.875, "text". A −0 is written 0.0, as people read it."""
    if isinstance(value, float) and value == 0:
        value = 0.0
    return json.dumps(value, ensure_ascii=False)


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


TONES = {
    "completed": "good",
    "scored": "good",
    "pass": "good",
    "passed": "good",
    "ok": "good",
    "same": "quiet",
    "new pass": "good",
    "completed_with_regressions": "bad",
    "failed": "bad",
    "fail": "bad",
    "error": "bad",
    "regression": "bad",
    "removed": "bad",
    "added": "note",
    "changed": "note",
    "running": "busy",
    "captured": "busy",
    "awaiting_traces": "wait",
    "pending": "wait",
    "cancelled": "quiet",
    "skipped": "quiet",
    "completed_with_failures": "bad",
    "void": "bad",
}
"""The colour family of a status word. Every badge also prints the word and a symbol, so no
status is told by colour alone."""

SYMBOLS = {"good": "✓", "bad": "✗", "busy": "◔", "wait": "…", "note": "±", "quiet": "–"}


def tone(word: str | None) -> str:
    return TONES.get(word or "", "quiet")


def symbol(word: str | None) -> str:
    return SYMBOLS[tone(word)]


WORDS = {"no_llm_calls": "no LLM calls"}


def words(word: str | None) -> str:
    """A status as a person reads it: `completed_with_regressions` → completed with regressions."""
    return WORDS.get(word or "", (word or "unknown").replace("_", " "))


EXCLUDED = {"not_pass_k": "not pass^k", "failed": "failed", "not_terminal": "still running"}


def excluded(reason: str | None) -> str:
    """Why an arm is not ranked, as a person reads it."""
    return EXCLUDED.get(reason or "", reason or "")


FILTERS = {
    "excluded": excluded,
    "percent": percent,
    "percent_short": percent_short,
    "pct_change": pct_change,
    "usd": usd,
    "ms": ms,
    "decimal": decimal,
    "count": count,
    "cost_rule": cost_rule,
    "when": when,
    "iso": iso,
    "wire": wire,
    "pretty_json": pretty_json,
    "tone": tone,
    "symbol": symbol,
    "words": words,
}
