"""One line per agent session: what went in, what came out, what it cost and how long it took.

A session is one trace. `summarize_session` reads its spans through `conventions.span_view` and
prices them with a `PriceBook`, so the summary is the same whether the agent sent OTLP with
OpenInference attributes, OTLP with GenAI attributes, or the native JSON.

Two rules shape the cost fields. Unpriced is never free: if any LLM call cannot be priced the
session's cost is None (not the sum of the others, which would understate it) and
`unpriced_models` says why. And "no LLM calls" is its own status, distinct from both, so a
deterministic tool-only session is not reported as costing $0 by accident or as a pricing gap.
A cost too large to represent (an absurd price or token count) is `cost_overflow`, never
"priced" with no amount.

Dubious values are kept as sent but flagged: the summary's `warnings` gathers the flags of its
spans (one per kind, counted) and adds the session's own (a parent cycle, token totals beyond
64 bits, a cost overflow). No shape of trace makes the summary fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Final, Literal

from neens.domain.conventions import MAX_TOKENS, Flag, FlagCode, SpanView, span_view
from neens.domain.pricing import PriceBook, span_cost
from neens.domain.records import hot_record
from neens.domain.span_tree import parent_cycle_members
from neens.domain.spans import SpanRecord
from neens.domain.storable import safe_label

__all__ = ["CostStatus", "SessionSummary", "summarize_session"]

CostStatus = Literal["priced", "unpriced", "cost_overflow", "no_llm_calls"]

_STEP_KINDS: Final = frozenset({"llm", "tool"})
_NO_TIME: Final = datetime.min.replace(tzinfo=UTC)


@hot_record
class SessionSummary:
    """The derived facts about one session, as listed and compared by the API."""

    agent_name: str | None
    """None when no span names an agent; the API chooses the label to show."""
    input: str | None
    output: str | None
    models: tuple[str, ...]
    """Distinct models, in the order the session first used them."""
    input_tokens: int | None
    """Sum over LLM spans that report input tokens; None when none does."""
    output_tokens: int | None
    latency_ms: float | None
    step_count: int
    """LLM calls plus tool calls: the steps an agent took, not its bookkeeping spans."""
    cost_usd: float | None
    cost_status: CostStatus
    unpriced_models: tuple[str, ...]
    """Sorted: the models without a price, or the reasons a call could not be priced."""
    started_at: datetime | None
    ended_at: datetime | None
    span_count: int
    status: Literal["ok", "error"]
    eval_run_id: str | None
    dataset_item_id: str | None
    version_label: str | None
    warnings: tuple[Flag, ...] = ()
    """Dubious values in the session, one per kind (see `conventions.FlagCode`)."""
    input_span_id: str | None = None
    """The span `input` was read from (None when there is no input)."""
    output_span_id: str | None = None
    """The span `output` was read from."""


@hot_record
class _Span:
    record: SpanRecord
    view: SpanView


def summarize_session(
    records: Sequence[SpanRecord],
    book: PriceBook,
    *,
    views: Sequence[SpanView] | None = None,
) -> SessionSummary:
    """Summarize the spans of one session (one trace id), in any order.

    `views`, when given, must be `span_view(record)` for each of `records`, in the same order: a
    caller that has already read the views (the ingest path stores each span's model) passes
    them so they are not derived twice.

    - Root span: a span with no parent, or whose parent is not among `records` (a parent lost
      or not yet arrived); the earliest-starting one if several. agent_name, input, output and
      the correlation keys are read from it first.
    - agent_name: the root's, else the earliest span that names one.
    - input / output: the root's, else the earliest agent span that has a value (a root that
      is an HTTP handler span often carries neither), else the first model call's input and
      the last model call's output (the question asked, the answer given).
    - models: every distinct `SpanView.model` of the LLM spans, ordered by first use (an agent
      span's requested model is not a model the session used).
    - tokens: sums over LLM spans only (agent spans often repeat totals), None when no LLM span
      reports them, so "unknown" is never shown as 0.
    - latency_ms: latest end minus earliest start; None when either is missing, or when the
      clocks disagree so much that the end precedes the start.
    - cost: see the module docstring; `cost_status` is "priced", "unpriced", "cost_overflow"
      or "no_llm_calls".
    - status: "error" when any span's status is error, else "ok".
    - warnings: the spans' flags, one per code with how many spans carry it, then
      `parent_cycle`, `token_sum_overflow` (a total beyond a signed 64-bit integer is None)
      and `cost_overflow`.

    Spans without a start time sort after those with one, in their given order.
    """
    if views is None:
        views = [span_view(record) for record in records]
    elif len(views) != len(records):
        raise ValueError(f"{len(views)} views given for {len(records)} records")
    spans = sorted(map(_Span, records, views), key=_start_key)
    root = _root(spans)
    agents = [span for span in spans if span.view.kind == "agent"]
    llm_calls = [span for span in spans if span.view.kind == "llm"]

    starts = [span.record.start_time for span in spans if span.record.start_time is not None]
    ends = [span.record.end_time for span in spans if span.record.end_time is not None]
    started_at = min(starts) if starts else None
    ended_at = max(ends) if ends else None
    latency_ms: float | None = None
    if started_at is not None and ended_at is not None and ended_at >= started_at:
        latency_ms = (ended_at - started_at).total_seconds() * 1000

    cost_usd, cost_status, unpriced = _cost(llm_calls, book)
    flags: list[Flag] = []
    input_tokens = _token_sum((span.view.input_tokens for span in llm_calls), "input", flags)
    output_tokens = _token_sum((span.view.output_tokens for span in llm_calls), "output", flags)
    cycle = parent_cycle_members(records)
    if cycle:
        flags.append(
            Flag(
                "parent_cycle",
                f"{len(cycle)} spans are their own ancestors through parent ids "
                f"(for example span {safe_label(min(cycle))}); they are shown as roots",
            )
        )
    if cost_status == "cost_overflow":
        flags.append(
            Flag("cost_overflow", "the session's cost is too large to represent; costUsd is null")
        )
    input_text, input_span = _pick_from(root, [*agents, *llm_calls], _read_input)
    output_text, output_span = _pick_from(root, [*agents, *reversed(llm_calls)], _read_output)
    return SessionSummary(
        agent_name=_pick(root, spans, lambda view: view.agent_name),
        input=input_text,
        output=output_text,
        models=tuple(dict.fromkeys(span.view.model for span in llm_calls if span.view.model)),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        latency_ms=latency_ms,
        step_count=sum(1 for span in spans if span.view.kind in _STEP_KINDS),
        cost_usd=cost_usd,
        cost_status=cost_status,
        unpriced_models=unpriced,
        started_at=started_at,
        ended_at=ended_at,
        span_count=len(spans),
        status="error" if any(span.record.status_code == "error" for span in spans) else "ok",
        eval_run_id=_pick(root, spans, lambda view: view.eval_run_id),
        dataset_item_id=_pick(root, spans, lambda view: view.dataset_item_id),
        version_label=_pick(root, spans, lambda view: view.version_label),
        warnings=(*_span_flags(spans), *flags),
        input_span_id=input_span.record.span_id if input_span is not None else None,
        output_span_id=output_span.record.span_id if output_span is not None else None,
    )


def _span_flags(spans: Sequence[_Span]) -> list[Flag]:
    """The spans' flags, one per code: the first span's message, and how many spans share it."""
    first: dict[FlagCode, tuple[str, Flag]] = {}
    counts: dict[FlagCode, int] = {}
    for span in spans:
        for flag in span.view.flags:
            if flag.code not in first:
                first[flag.code] = (span.record.name, flag)
            counts[flag.code] = counts.get(flag.code, 0) + 1
    result = []
    for code, (name, flag) in first.items():
        more = counts[code] - 1
        also = f" (and {more} more)" if more else ""
        result.append(Flag(code, f"span {safe_label(name)}: {flag.message}{also}"))
    return result


def _start_key(span: _Span) -> tuple[bool, datetime]:
    start = span.record.start_time
    return (start is None, start if start is not None else _NO_TIME)


def _root(spans: Sequence[_Span]) -> _Span | None:
    """The earliest span whose parent is absent from the session (`spans` is start-sorted)."""
    ids = {span.record.span_id for span in spans}
    for span in spans:
        parent = span.record.parent_span_id
        if parent is None or parent not in ids:
            return span
    return None  # every span has a parent in the session: a cycle, so no root to prefer


def _pick(
    root: _Span | None, fallbacks: Sequence[_Span], read: Callable[[SpanView], str | None]
) -> str | None:
    return _pick_from(root, fallbacks, read)[0]


def _pick_from(
    root: _Span | None, fallbacks: Sequence[_Span], read: Callable[[SpanView], str | None]
) -> tuple[str | None, _Span | None]:
    """The root's value, else the first fallback's; with the span it was read from."""
    for span in (root, *fallbacks) if root is not None else fallbacks:
        if (value := read(span.view)) is not None:
            return value, span
    return None, None


def _read_input(view: SpanView) -> str | None:
    return view.input


def _read_output(view: SpanView) -> str | None:
    return view.output


def _token_sum(counts: Iterable[int | None], side: str, flags: list[Flag]) -> int | None:
    """The total of the counts present; None when none is, or when the total does not fit a
    signed 64-bit integer (flagged: no database column holds it, and it is no real usage)."""
    present = [count for count in counts if count is not None]
    if not present:
        return None
    total = sum(present)
    if total > MAX_TOKENS:
        flags.append(
            Flag(
                "token_sum_overflow",
                f"the {side} token counts of the LLM spans add up to {total}, more than a "
                f"64-bit count holds; {side}Tokens is null",
            )
        )
        return None
    return total


def _cost(
    llm_calls: Sequence[_Span], book: PriceBook
) -> tuple[float | None, CostStatus, tuple[str, ...]]:
    if not llm_calls:
        return None, "no_llm_calls", ()
    costs = [span_cost(span.view, book) for span in llm_calls]
    unpriced = sorted(
        {
            cost.unpriced_model or cost.unpriced_reason or "unpriced LLM call"
            for cost in costs
            if cost.usd is None
        }
    )
    if any(cost.overflow for cost in costs):
        return None, "cost_overflow", tuple(unpriced)
    if unpriced:
        return None, "unpriced", tuple(unpriced)
    try:
        total = math.fsum(cost.usd for cost in costs if cost.usd is not None)
    except OverflowError:  # finite costs whose sum is not: fsum refuses rather than give inf
        total = math.inf
    if not math.isfinite(total):
        return None, "cost_overflow", ("the sum of the LLM calls' costs is too large to represent",)
    return total, "priced", ()
