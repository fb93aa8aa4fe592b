"""Reading what a span means, whichever instrumentation convention wrote it.

Agents reach Neens through several attribute vocabularies: OpenInference (Arize/Phoenix
instrumentations: `openinference.span.kind`, `input.value`, `llm.token_count.prompt`, ...), the
OpenTelemetry GenAI semantic conventions (`gen_ai.operation.name`, `gen_ai.usage.*`, ...),
OpenLLMetry and Logfire. The native session JSON is decoded into the same GenAI attribute names,
so `span_view` is the one place that decides what a span's kind, model, tokens and correlation
keys are. Everything downstream (pricing, session summaries, the API) reads a `SpanView` and
never an attribute name.

The mapping is deliberately conservative: when a value is malformed (a token count of -3, of
"12.5", of `True`) it becomes None rather than a guess, because a wrong number silently feeds
costs and comparisons while a missing one is visible. It is also flagged (`SpanView.flags`), so
"missing" and "sent but unusable" stay distinguishable.

The conventions' own tables are in `convention_tables`, the readers that turn message shapes
into text in `messages`, and whether a value can be stored at all in `storable`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Final, Literal

from neens.domain.convention_tables import (
    AGENT_NAME_ORDER,
    CACHE_READ_TOKEN_KEYS,
    CACHE_WRITE_TOKEN_KEYS,
    CONVENTIONS,
    INPUT_TOKEN_KEYS,
    OUTPUT_TOKEN_KEYS,
    PROVIDER_KEYS,
    SPAN_KINDS,
    Convention,
)
from neens.domain.messages import Side, event_content, first_text, nonblank_text, to_json
from neens.domain.records import hot_record
from neens.domain.spans import SpanRecord
from neens.domain.storable import safe_label

# ---------------------------------------------------------------------------------------------
# The view
# ---------------------------------------------------------------------------------------------

EVAL_RUN_ID_KEY: Final = "neens.eval_run_id"
DATASET_ITEM_ID_KEY: Final = "neens.dataset_item_id"
VERSION_LABEL_KEY: Final = "neens.version_label"

_DIGITS: Final = re.compile(r"[0-9]+")
_MAX_DIGITS: Final = 20
"""Longer digit strings are not token counts (and would hit Python's int-parsing limit)."""
MAX_TOKENS: Final = 2**63 - 1
"""The largest token count (and token total) Neens stores: a signed 64-bit integer."""
MAX_NAME_CHARS: Final = 500
"""The longest model, agent name or version label Neens stores."""
MAX_LINK_CHARS: Final = 200
"""The longest `neens.eval_run_id` or `neens.dataset_item_id` Neens stores (run and item ids
are far shorter; a longer value cannot name one)."""

FlagCode = Literal[
    "token_count_text",
    "token_count_invalid",
    "token_sum_overflow",
    "end_before_start",
    "parent_cycle",
    "value_too_long",
    "cost_overflow",
    "correlation_key_misspelled",
    "content_after_run",
]
"""The dubious values Neens stores but flags (docs/traces.md, "Warnings")."""


@dataclass(frozen=True, slots=True)
class Flag:
    """A dubious value that was stored as sent but not trusted as if it were fine."""

    code: FlagCode
    message: str
    """What was odd and what Neens did about it, naming the field or attribute."""


def is_push_trace_id(trace_id: str) -> bool:
    """Whether `trace_id` is in the namespace of push-run answers (`<run id>:<item id>`).

    Neens records each answer of a push run as the session `ppr_…:<item id>`; those ids are
    reserved so that no client can write spans into (and so change) a captured answer.
    """
    return trace_id.startswith("ppr_") and ":" in trace_id


@hot_record
class SpanView:
    """What a span means, independent of the convention that described it.

    `name` and `start_time` are copied from the record so that pricing and summaries can name
    the span and date its price without carrying the record around.
    """

    name: str
    start_time: datetime | None
    kind: str
    """One of `SPAN_KINDS`, or "span"."""
    input: str | None
    output: str | None
    model: str | None
    """The model that served the call when known, else the one requested."""
    request_model: str | None
    """`gen_ai.request.model` exactly as sent, kept so a swap by the provider stays visible."""
    response_model: str | None
    """`gen_ai.response.model` exactly as sent."""
    provider: str | None
    input_tokens: int | None
    output_tokens: int | None
    agent_name: str | None
    eval_run_id: str | None
    dataset_item_id: str | None
    version_label: str | None
    cache_read_tokens: int | None = None
    """Of `input_tokens`, those read from the provider's prompt cache (None: not reported)."""
    cache_write_tokens: int | None = None
    """Of `input_tokens`, those written to the prompt cache (None: not reported)."""
    flags: tuple[Flag, ...] = ()
    """Dubious values found while reading the span (a token count sent as text, an end before
    the start, a name too long to store); see `FlagCode`."""


def span_view(record: SpanRecord) -> SpanView:
    """Read a span's meaning from its attributes (resource attributes already overlaid).

    Each field is asked of the conventions in `CONVENTIONS` order (OpenInference, OpenTelemetry
    GenAI, OpenLLMetry, Logfire); the first that answers decides, then the record's own value
    (the native format's), then the fallbacks below. docs/traces.md lists, per convention, the
    attributes each field is read from; the tables are `OPENINFERENCE`, `GENAI`, `OPENLLMETRY`
    and `LOGFIRE`.

    - kind: one of `SPAN_KINDS`, else "span". OTLP's SpanKind (client, server, ...) says nothing
      about the agent and so never decides. When no convention names a kind: a span with
      `gen_ai.tool.name` is a tool call, and a span reporting a model and a token count is a
      model call.
    - input / output as text: for model calls, the last user message's text in and the
      assistant's text out, read from structured messages whichever convention carries them;
      the raw value (JSON-encoded when structured) only when no message has text. A span's
      events count too (GenAI content events, whether sent as span events or as OTLP logs).
    - agent name: the convention's attribute, the record's own, else, for a span a convention
      calls an agent, the span's name. Never `service.name`: that names the process, and many
      agents share one.
    - model: `gen_ai.response.model` (what actually served the call, which is what is billed),
      `llm.model_name`, `gen_ai.request.model`.
    - tokens: the first key present decides: a malformed value there gives None rather than a
      search for another value that may disagree with it. Prompt-cache reads and writes are
      read the same way, as parts of the input count (as every convention defines it).
    - correlation keys: exactly `neens.eval_run_id`, `neens.dataset_item_id`,
      `neens.version_label`. No other spelling is read, so a typo shows up as a missing link
      instead of being half-honoured.

    Dubious values are flagged (`SpanView.flags`), never silently trusted: a token count sent
    as digits in text is read and flagged `token_count_text`; one that is not a count at all is
    ignored and flagged `token_count_invalid`; a model, agent name or correlation key longer
    than Neens stores is ignored and flagged `value_too_long`; an end before the start is
    flagged `end_before_start`.
    """
    attributes = record.attributes
    flags: list[Flag] = []
    request_model = nonblank_text(attributes.get("gen_ai.request.model"))
    response_model = nonblank_text(attributes.get("gen_ai.response.model"))
    model = response_model or nonblank_text(attributes.get("llm.model_name")) or request_model
    if (
        record.end_time is not None
        and record.start_time is not None
        and record.end_time < record.start_time
    ):
        flags.append(
            Flag(
                "end_before_start",
                f"end_time {record.end_time.isoformat()} is before start_time "
                f"{record.start_time.isoformat()}; its duration is not counted",
            )
        )
    shape = _key_shape(attributes)
    input_tokens = _token_count_at(attributes, shape.input_token_key, flags)
    output_tokens = _token_count_at(attributes, shape.output_token_key, flags)
    cache_read_tokens = _token_count_at(attributes, shape.cache_read_token_key, flags)
    cache_write_tokens = _token_count_at(attributes, shape.cache_write_token_key, flags)
    flags.extend(shape.misspelled)
    kind, by_convention = _kind(record, shape, has_model=model is not None)
    bounded_model = _bounded(model, MAX_NAME_CHARS, "model", flags)
    agent_name = _bounded(
        _agent_name(record, shape.agent_name_order, kind, by_convention),
        MAX_NAME_CHARS,
        "agent name",
        flags,
    )
    links = _correlation_keys(attributes, flags) if shape.has_correlation_key else _NO_LINKS
    return SpanView(
        name=record.name,
        start_time=record.start_time,
        kind=kind,
        input=_content(record, shape.conventions, kind, "input"),
        output=_content(record, shape.conventions, kind, "output"),
        model=bounded_model,
        request_model=request_model,
        response_model=response_model,
        provider=first_text(attributes, shape.provider_keys),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
        agent_name=agent_name,
        eval_run_id=links[0],
        dataset_item_id=links[1],
        version_label=links[2],
        flags=tuple(flags),
    )


# ---------------------------------------------------------------------------------------------
# What a span's attribute keys alone decide
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _KeyShape:
    """What depends on a span's attribute keys and not on their values, worked out once for each
    set of keys: an instrumentation sends the same few shapes of span again and again."""

    conventions: tuple[Convention, ...]
    """The `CONVENTIONS` that read any of these keys, in their order; the others are silent."""
    agent_name_order: tuple[Convention, ...]
    """`AGENT_NAME_ORDER`, likewise."""
    misspelled: tuple[Flag, ...]
    """A `correlation_key_misspelled` flag for each key that looks like a correlation key."""
    input_token_key: str | None
    """The first of `INPUT_TOKEN_KEYS` present: it alone decides the count."""
    output_token_key: str | None
    cache_read_token_key: str | None
    cache_write_token_key: str | None
    provider_keys: tuple[str, ...]
    """Those of `PROVIDER_KEYS` present, in their order."""
    has_correlation_key: bool


def _shape_of(keys: tuple[str, ...]) -> _KeyShape:
    speaking = {convention.name for convention in CONVENTIONS if convention.speaks_in(keys)}
    present = set(keys)
    return _KeyShape(
        conventions=tuple(c for c in CONVENTIONS if c.name in speaking),
        agent_name_order=tuple(c for c in AGENT_NAME_ORDER if c.name in speaking),
        misspelled=tuple(_misspelled_correlation_keys(keys)),
        input_token_key=next((key for key in INPUT_TOKEN_KEYS if key in present), None),
        output_token_key=next((key for key in OUTPUT_TOKEN_KEYS if key in present), None),
        cache_read_token_key=next((key for key in CACHE_READ_TOKEN_KEYS if key in present), None),
        cache_write_token_key=next((key for key in CACHE_WRITE_TOKEN_KEYS if key in present), None),
        provider_keys=tuple(key for key in PROVIDER_KEYS if key in present),
        has_correlation_key=not present.isdisjoint(_CORRELATION_KEYS),
    )


_SHAPES: Final[dict[tuple[str, ...], _KeyShape]] = {}
_MAX_SHAPES: Final = 1024
"""Shapes remembered; when full, the memo starts again (a shape costs microseconds to redo)."""
_MAX_SHAPE_CHARS: Final = 4096
"""A span whose keys are longer in all is read without the memo, so that what it keeps stays
small (about 4 MB at most) whatever keys clients send."""


def _key_shape(attributes: Mapping[str, Any]) -> _KeyShape:
    keys = tuple(attributes)
    shape = _SHAPES.get(keys)
    if shape is not None:
        return shape
    shape = _shape_of(keys)
    if sum(map(len, keys)) <= _MAX_SHAPE_CHARS:
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        _SHAPES[keys] = shape
    return shape


_CORRELATION_KEYS: Final = (EVAL_RUN_ID_KEY, DATASET_ITEM_ID_KEY, VERSION_LABEL_KEY)
_SQUASH: Final = re.compile("[^a-z0-9]")
_CORRELATION_WORDS: Final = ("neens", "run", "item", "label")
"""Every key a correlation key could be mistaken for contains one of these."""
_SQUASHED_KEYS: Final = {_SQUASH.sub("", key): key for key in _CORRELATION_KEYS}
_SQUASHED_BARE: Final = {
    squashed.removeprefix("neens"): key for squashed, key in _SQUASHED_KEYS.items()
}


_LOOKALIKE_CHARS: Final = 40
"""Longer keys are not mistaken correlation keys (and are not remembered)."""


@lru_cache(maxsize=4096)
def _lookalike(key: str) -> str | None:
    """The correlation key `key` looks like without being it, else None. Remembered: every
    span asks this of each of its attribute keys, and a service's keys are few."""
    if key in _CORRELATION_KEYS:
        return None
    lowered = key.lower()
    if not any(word in lowered for word in _CORRELATION_WORDS):
        return None  # most keys: nothing like a correlation key, so no closer look
    squashed = _SQUASH.sub("", lowered)
    target = _SQUASHED_KEYS.get(squashed) or _SQUASHED_BARE.get(squashed)
    if target is None and squashed.startswith("neens"):
        target = next(
            (
                exact
                for candidate, exact in _SQUASHED_KEYS.items()
                if _within_two_edits(squashed, candidate)
            ),
            None,
        )
    return target


def _misspelled_correlation_keys(keys: Iterable[str]) -> list[Flag]:
    """Flags for attributes that look like a correlation key but are not spelled exactly.

    Only the exact keys are read (a half-honoured typo would link a trace to the wrong place);
    a near miss is flagged instead, so a run that waits for traces says why none arrived:
    another case or separator (`neens.evalRunId`, `neens_eval_run_id`), no `neens.` prefix
    (`eval_run_id`), or one or two letters off after the `neens` prefix (`neens.eval_runid`).
    """
    flags = []
    for key in keys:
        if len(key) <= _LOOKALIKE_CHARS and (target := _lookalike(key)) is not None:
            flags.append(
                Flag(
                    "correlation_key_misspelled",
                    f"attribute {safe_label(key)} looks like {target!r} but is not spelled "
                    f"exactly, so it is not read and this trace links to no pre-prod run item; "
                    f"name it {target!r}",
                )
            )
    return flags


def _within_two_edits(a: str, b: str) -> bool:
    """Levenshtein distance of at most 2 (the strings are short: a row of the table suffices)."""
    if abs(len(a) - len(b)) > 2:
        return False
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        if min(current) > 2:
            return False
        previous = current
    return previous[-1] <= 2


def _bounded(value: str | None, limit: int, what: str, flags: list[Flag]) -> str | None:
    """`value` when it fits the stored column, else None and a `value_too_long` flag."""
    if value is None or len(value) <= limit:
        return value
    flags.append(
        Flag(
            "value_too_long",
            f"{what} is {len(value)} characters long, more than the {limit} Neens stores; "
            "it is ignored",
        )
    )
    return None


def _kind(record: SpanRecord, shape: _KeyShape, *, has_model: bool) -> tuple[str, bool]:
    """The span's kind, and whether a convention named it (rather than the record's own kind
    or a fallback)."""
    for convention in shape.conventions:
        if (kind := convention.kind(record)) is not None:
            return kind, True
    if record.kind is not None and record.kind.strip().lower() in SPAN_KINDS:
        return record.kind.strip().lower(), False
    if nonblank_text(record.attributes.get("gen_ai.tool.name")) is not None:
        return "tool", False
    if has_model and (shape.input_token_key is not None or shape.output_token_key is not None):
        return "llm", False
    return "span", False


def _agent_name(
    record: SpanRecord, order: tuple[Convention, ...], kind: str, by_convention: bool
) -> str | None:
    for convention in order:
        if (name := convention.agent_name(record, kind)) is not None:
            return name
    if (name := nonblank_text(record.agent_name)) is not None:
        return name
    if kind == "agent" and by_convention:
        # An instrumentation's agent span is named after its agent; the native format names
        # the agent in the session itself, so its span names are not read as one.
        return nonblank_text(record.name.removeprefix(_INVOKE_AGENT_PREFIX))
    return None


_INVOKE_AGENT_PREFIX: Final = "invoke_agent "
"""GenAI names agent spans `invoke_agent {gen_ai.agent.name}`; the name is what follows."""


def _content(
    record: SpanRecord, conventions: tuple[Convention, ...], kind: str, side: Side
) -> str | None:
    for convention in conventions:
        read = convention.input if side == "input" else convention.output
        if (value := read(record, kind)) is not None:
            return value
    if (value := event_content(record.events, side)) is not None:
        return value
    return record.input if side == "input" else record.output


def _token_count_at(
    attributes: Mapping[str, Any], key: str | None, flags: list[Flag]
) -> int | None:
    """The count at `key` (the first token key present), flagged when it is text or no count."""
    if key is None:
        return None
    value = attributes[key]
    count = token_count(value)
    if count is None:
        flags.append(
            Flag(
                "token_count_invalid",
                f"attribute {safe_label(key)} is not a token count "
                f"({safe_label(to_json(value))}); it is ignored",
            )
        )
    elif isinstance(value, str):
        flags.append(
            Flag(
                "token_count_text",
                f"attribute {safe_label(key)} is the text {safe_label(value)}, "
                "not a number; it is read as a count of "
                f"{count} (send token counts as integers)",
            )
        )
    return count


_NO_LINKS: Final[tuple[None, None, None]] = (None, None, None)


def _correlation_keys(
    attributes: Mapping[str, Any], flags: list[Flag]
) -> tuple[str | None, str | None, str | None]:
    """`neens.eval_run_id`, `neens.dataset_item_id` and `neens.version_label`, each bounded."""
    return (
        _bounded(
            _correlation_key(attributes.get(EVAL_RUN_ID_KEY)),
            MAX_LINK_CHARS,
            EVAL_RUN_ID_KEY,
            flags,
        ),
        _bounded(
            _correlation_key(attributes.get(DATASET_ITEM_ID_KEY)),
            MAX_LINK_CHARS,
            DATASET_ITEM_ID_KEY,
            flags,
        ),
        _bounded(
            _correlation_key(attributes.get(VERSION_LABEL_KEY)),
            MAX_NAME_CHARS,
            VERSION_LABEL_KEY,
            flags,
        ),
    )


def token_count(value: object) -> int | None:
    """A token count as a non-negative int, or None when `value` is not clearly one.

    Accepted: ints (not bools), integral finite floats (some SDKs send every number as a double),
    and strings of ASCII digits (some instrumentations stringify every attribute; `span_view`
    reads them but flags them `token_count_text`). Refused: negatives, fractions, bools, signs,
    blanks, non-ASCII digits, and counts beyond a signed 64-bit integer (no real usage is that
    large, and no database column could hold it). Nothing is rounded.
    """
    count: int | None = None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        count = value
    elif isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            count = int(value)
    elif isinstance(value, str) and len(value) <= _MAX_DIGITS and _DIGITS.fullmatch(value):
        count = int(value)
    if count is None or not 0 <= count <= MAX_TOKENS:
        return None
    return count


def _correlation_key(value: object) -> str | None:
    """A correlation key as text; an int is accepted as its decimal form, anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return nonblank_text(value)
