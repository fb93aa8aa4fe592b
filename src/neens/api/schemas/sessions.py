"""Bodies of the session routes: the native session JSON in, sessions and span trees out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BeforeValidator, Field, WithJsonSchema

from neens.api.schemas.base import RequestBody, ResponseBody, StorableJson, StorableStr
from neens.domain.conventions import DATASET_ITEM_ID_KEY, EVAL_RUN_ID_KEY, VERSION_LABEL_KEY


def _unix_nanos(value: Any) -> Any:
    """Unix nanoseconds become an aware datetime (to the microsecond, as Neens stores times).

    pydantic would read a fraction or numeric text as Unix *seconds*; both are refused so that a
    time is never read in the wrong unit.
    """
    if isinstance(value, bool | float) or (
        isinstance(value, str) and value.strip().lstrip("+-").replace(".", "", 1).isdigit()
    ):
        raise ValueError("must be ISO 8601 text with an offset, or integer Unix nanoseconds")
    if isinstance(value, int):
        try:
            return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=value // 1000)
        except OverflowError:
            raise ValueError(f"{value} Unix nanoseconds is not a representable time") from None
    return value


def _not_text(value: Any) -> Any:
    """Refuse text and booleans before pydantic's lax int would turn "120" or true into a count."""
    if isinstance(value, str | bool):
        raise ValueError("must be a JSON integer, not text or a boolean")
    return value


MAX_NATIVE_TOKENS = 2**53
"""The largest native token count: far beyond any real call, exactly representable as a JSON
number by every client (a bound of 2^63 - 1 would be rounded up in the published schema)."""

TokenCount = Annotated[int, Field(ge=0, le=MAX_NATIVE_TOKENS), BeforeValidator(_not_text)]
"""A token count: a JSON integer (an integral number such as 120.0 is accepted as 120)."""

SpanTime = Annotated[
    AwareDatetime,
    BeforeValidator(_unix_nanos),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "date-time"},
                {"type": "integer", "description": "Unix nanoseconds"},
            ]
        }
    ),
]
"""ISO 8601 with an offset, or Unix nanoseconds. A time without an offset is refused rather
than assumed to be UTC."""


class NativeSessionHeader(RequestBody):
    id: StorableStr = Field(min_length=1, max_length=256)
    """The session's id; spans sent later with the same id merge into it."""
    agent_name: StorableStr | None = Field(default=None, max_length=500)
    """Which agent ran (e.g. refund-agent). Sessions without one are reported as Unattributed."""
    attributes: StorableJson = Field(default_factory=dict)
    """Attributes that apply to every span, like OTLP resource attributes."""


class NativeSpan(RequestBody):
    id: StorableStr = Field(min_length=1, max_length=256)
    """The span's id, unique within the session."""
    parent_id: StorableStr | None = Field(default=None, max_length=256)
    """The parent span's id; omit for the root."""
    name: StorableStr = Field(min_length=1)
    """What the step was, e.g. `agent.run` or `lookup_order`."""
    kind: StorableStr | None = Field(default=None, max_length=50)
    """agent, llm, tool, chain, retriever, embedding, …"""
    input: StorableStr | None = None
    """The step's input."""
    output: StorableStr | None = None
    """The step's output."""
    start_time: SpanTime | None = None
    """ISO 8601 with an offset, or Unix nanoseconds."""
    end_time: SpanTime | None = None
    """ISO 8601 with an offset, or Unix nanoseconds."""
    status: Literal["ok", "error"] | None = None
    """The step's outcome, when known."""
    status_message: StorableStr | None = None
    """Why the step failed."""
    model: StorableStr | None = Field(default=None, max_length=500)
    """The model an llm step called."""
    input_tokens: TokenCount | None = None
    """Prompt tokens an llm step used: a JSON integer (text such as "120" is refused)."""
    output_tokens: TokenCount | None = None
    """Completion tokens an llm step used: a JSON integer (text such as "120" is refused)."""
    attributes: StorableJson = Field(default_factory=dict)
    """Any other attributes; OpenInference and GenAI names are understood."""


class NativeSessionIn(RequestBody):
    session: NativeSessionHeader
    """The session (trace) the spans belong to."""
    spans: list[NativeSpan] = Field(min_length=1)
    """The session's spans; at least one."""


class IngestResult(ResponseBody):
    session_id: str = Field(description="The session the spans were stored in.")
    accepted_spans: int = Field(description="Spans stored (including ones already stored).")
    rejected_spans: int = Field(description="Spans refused; see `rejections`.")
    rejections: list[str] = Field(description="Why each refused span was refused.")
    warnings: list[str] = Field(
        description="Dubious values in the stored spans (stored, but flagged), one per line."
    )


class WarningOut(ResponseBody):
    code: str = Field(
        description="token_count_text, token_count_invalid, token_sum_overflow, "
        "end_before_start, parent_cycle, value_too_long, cost_overflow, "
        "correlation_key_misspelled or content_after_run."
    )
    message: str = Field(description="What was odd, naming the field, and what Neens did.")


class SessionOut(ResponseBody):
    id: str = Field(description="The session id: the trace id.")
    source: str = Field(description='How it arrived first: "otlp" or "native".')
    agent_name: str | None = Field(description="The agent that ran; null when none was recorded.")
    input: str | None = Field(description="The root span's input.")
    output: str | None = Field(description="The root span's output.")
    models: list[str] = Field(description="Models the LLM spans report, in call order.")
    input_tokens: int | None = Field(description="Prompt tokens over LLM spans; null if none.")
    output_tokens: int | None = Field(description="Completion tokens; null if none reported.")
    latency_ms: float | None = Field(description="First span start to last span end.")
    step_count: int = Field(description="LLM and tool spans.")
    span_count: int = Field(description="All spans.")
    cost_usd: float | None = Field(
        description="Model cost in USD; null when any LLM span is unpriced (never 0 for unknown)."
    )
    cost_status: str = Field(
        description='"priced", "unpriced", "cost_overflow" (too large to represent) or '
        '"no_llm_calls".'
    )
    unpriced_models: list[str] = Field(description="What made the cost unknown, by model.")
    status: str = Field(description='"error" when any span failed, else "ok".')
    started_at: datetime | None = Field(description="Earliest span start (UTC).")
    ended_at: datetime | None = Field(description="Latest span end (UTC).")
    eval_run_id: str | None = Field(description=f"`{EVAL_RUN_ID_KEY}` on the trace, if any.")
    dataset_item_id: str | None = Field(description=f"`{DATASET_ITEM_ID_KEY}`, if any.")
    version_label: str | None = Field(description=f"`{VERSION_LABEL_KEY}`, if any.")
    warnings: list[WarningOut] = Field(
        description="Dubious values in the session's spans, one per kind; empty when none."
    )
    created_at: datetime = Field(description="When the first span arrived.")
    updated_at: datetime = Field(description="When the last span arrived.")


class SessionList(ResponseBody):
    sessions: list[SessionOut] = Field(description="Newest first.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` (with the same filters) for the next page; null on the last."
    )


class SpanOut(ResponseBody):
    span_id: str = Field(description="The span's id.")
    parent_span_id: str | None = Field(description="The parent's id; null for a root.")
    name: str = Field(description="The span's name.")
    kind: str = Field(description="agent, llm, tool, chain, … or span when unknown.")
    start_time: datetime | None = Field(description="Start (UTC).")
    end_time: datetime | None = Field(description="End (UTC).")
    duration_ms: float | None = Field(description="End minus start.")
    status: str | None = Field(description='"ok", "error" or null when unset.')
    status_message: str | None = Field(description="The error message, if any.")
    input: str | None = Field(description="The span's input.")
    output: str | None = Field(description="The span's output.")
    model: str | None = Field(description="The model an LLM span reports.")
    input_tokens: int | None = Field(description="Prompt tokens.")
    output_tokens: int | None = Field(description="Completion tokens.")
    cost_usd: float | None = Field(description="This span's model cost; null when unpriced.")
    unpriced_reason: str | None = Field(description="Why an LLM span has no cost.")
    attributes: dict[str, Any] = Field(description="Every attribute, resource ones included.")
    resource_attributes: dict[str, Any] = Field(description="The resource's own attributes.")
    events: list[dict[str, Any]] = Field(description="Span events.")
    warnings: list[WarningOut] = Field(description="Dubious values in this span.")
    children: list[SpanOut] = Field(
        description="Child spans by start time; a span at the 64th level lists all its "
        "descendants here, depth first."
    )


class SessionDetail(SessionOut):
    spans: list[SpanOut] = Field(description="The span tree: root spans with their children.")
