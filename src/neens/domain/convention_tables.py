"""The instrumentation conventions Neens reads, one table each.

Each `Convention` says how one vocabulary names a span's kind, agent name, input, output,
provider and token counts; `neens.domain.conventions.span_view` asks them in order. docs/traces.md
has the same tables as a matrix, with the versions tested.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from neens.domain.messages import (
    Side,
    as_text,
    conversation_text,
    first_text,
    indexed_items,
    messages_text,
    parsed_json,
    to_json,
)
from neens.domain.spans import SpanRecord

SPAN_KINDS: Final = frozenset(
    {
        "llm",
        "agent",
        "tool",
        "chain",
        "retriever",
        "embedding",
        "reranker",
        "guardrail",
        "evaluator",
    }
)
"""The kinds Neens distinguishes; anything else is the catch-all "span"."""


# ---------------------------------------------------------------------------------------------
# The conventions, one table each
# ---------------------------------------------------------------------------------------------

KindReader = Callable[[SpanRecord], str | None]
FieldReader = Callable[[SpanRecord, str], str | None]
"""Reads a field of a span whose kind is already decided; None when the convention is silent."""


@dataclass(frozen=True, slots=True)
class Convention:
    """How one instrumentation vocabulary says what a span is (docs/traces.md has the matrix)."""

    name: str
    kind: KindReader
    agent_name: FieldReader
    input: FieldReader
    output: FieldReader
    keys: frozenset[str]
    """Every attribute its kind, agent name, input and output readers start from: a span with
    none of these (and no key under `prefixes`) is one this convention is silent about, so
    `span_view` does not ask it. (Logfire's readers read more keys, but only of a span whose
    `logfire.span_type` is set.) tests/domain/test_conventions.py checks the readers against it."""
    prefixes: tuple[str, ...] = ()
    """The numbered attributes its readers read (`llm.input_messages.` for `….0.message.role`)."""
    provider_keys: tuple[str, ...] = ()
    input_token_keys: tuple[str, ...] = ()
    output_token_keys: tuple[str, ...] = ()
    cache_read_token_keys: tuple[str, ...] = ()
    """Input tokens served from the provider's prompt cache: part of the input count, billed at
    the cache-read rate."""
    cache_write_token_keys: tuple[str, ...] = ()
    """Input tokens written to the prompt cache: part of the input count, billed at the
    cache-write rate."""

    def speaks_in(self, keys: Iterable[str]) -> bool:
        """Whether any of `keys` (a span's attribute keys) is one this convention reads."""
        return any(key in self.keys or key.startswith(self.prefixes) for key in keys)


def _kind_from(key: str, kinds: Mapping[str, str]) -> KindReader:
    def read(record: SpanRecord) -> str | None:
        value = record.attributes.get(key)
        return kinds.get(value.strip().lower()) if isinstance(value, str) else None

    return read


def _named(*keys: str, kinds: frozenset[str] | None = None) -> FieldReader:
    def read(record: SpanRecord, kind: str) -> str | None:
        if kinds is not None and kind not in kinds:
            return None
        return first_text(record.attributes, keys)

    return read


# --- OpenInference (Arize Phoenix instrumentations) ------------------------------------------

_OPENINFERENCE_KINDS: Final = {kind.lower(): kind.lower() for kind in SPAN_KINDS}


def _openinference_content(side: Side) -> FieldReader:
    value_key = f"{side}.value"
    messages_prefix = f"llm.{side}_messages."

    def read(record: SpanRecord, kind: str) -> str | None:
        attributes = record.attributes
        if kind == "llm":
            messages = [
                _openinference_message(item) for item in indexed_items(attributes, messages_prefix)
            ]
            if messages and (text := messages_text(messages, side)) is not None:
                return text
            if (value := attributes.get(value_key)) is not None:
                return conversation_text(value, side)
        return as_text(attributes.get(value_key))

    return read


def _openinference_message(item: Mapping[str, Any]) -> dict[str, Any]:
    """One flattened `llm.input_messages.N.message.*` entry as a message."""
    content = item.get("message.content")
    if content is None:
        parts = indexed_items(item, "message.contents.")
        content = [{"type": "text", "text": part.get("message_content.text")} for part in parts]
    return {"role": item.get("message.role"), "content": content}


OPENINFERENCE: Final = Convention(
    name="OpenInference",
    kind=_kind_from("openinference.span.kind", _OPENINFERENCE_KINDS),
    agent_name=_named("agent.name"),
    input=_openinference_content("input"),
    output=_openinference_content("output"),
    keys=frozenset({"openinference.span.kind", "agent.name", "input.value", "output.value"}),
    prefixes=("llm.input_messages.", "llm.output_messages."),
    provider_keys=("llm.provider", "llm.system"),
    input_token_keys=("llm.token_count.prompt",),
    output_token_keys=("llm.token_count.completion",),
    cache_read_token_keys=("llm.token_count.prompt_details.cache_read",),
    cache_write_token_keys=("llm.token_count.prompt_details.cache_write",),
)


# --- OpenTelemetry GenAI semantic conventions ------------------------------------------------

_GENAI_OPERATION_KINDS: Final[Mapping[str, str]] = {
    "chat": "llm",
    "text_completion": "llm",
    "generate_content": "llm",
    "invoke_agent": "agent",
    "create_agent": "agent",
    "execute_tool": "tool",
    "embeddings": "embedding",
}
_GENAI_CONTENT_KEYS: Final[Mapping[Side, tuple[str, str, str]]] = {
    # messages (newer), plain text (older), tool call
    "input": ("gen_ai.input.messages", "gen_ai.prompt", "gen_ai.tool.call.arguments"),
    "output": ("gen_ai.output.messages", "gen_ai.completion", "gen_ai.tool.call.result"),
}


def _genai_content(side: Side) -> FieldReader:
    messages_key, text_key, tool_key = _GENAI_CONTENT_KEYS[side]

    def read(record: SpanRecord, kind: str) -> str | None:
        attributes = record.attributes
        if kind == "tool" and (value := attributes.get(tool_key)) is not None:
            return as_text(value)
        for key in (messages_key, text_key):
            if (value := attributes.get(key)) is not None:
                return conversation_text(value, side)
        return None

    return read


GENAI: Final = Convention(
    name="OpenTelemetry GenAI",
    kind=_kind_from("gen_ai.operation.name", _GENAI_OPERATION_KINDS),
    agent_name=_named("gen_ai.agent.name"),
    input=_genai_content("input"),
    output=_genai_content("output"),
    keys=frozenset(
        {
            "gen_ai.operation.name",
            "gen_ai.agent.name",
            *(k for ks in _GENAI_CONTENT_KEYS.values() for k in ks),
        }
    ),
    provider_keys=("gen_ai.provider.name", "gen_ai.system"),
    input_token_keys=("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
    output_token_keys=("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
    # The semantic conventions' spelling, then OpenLLMetry's older one.
    cache_read_token_keys=(
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
    ),
    cache_write_token_keys=(
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
    ),
)


# --- OpenLLMetry (Traceloop) -----------------------------------------------------------------

_TRACELOOP_KINDS: Final[Mapping[str, str]] = {
    "agent": "agent",
    "tool": "tool",
    "workflow": "chain",
    "task": "chain",
}
_LLM_REQUEST_KINDS: Final[Mapping[str, str]] = {
    "chat": "llm",
    "completion": "llm",
    "embedding": "embedding",
    "rerank": "reranker",
}


_traceloop_kind: Final = _kind_from("traceloop.span.kind", _TRACELOOP_KINDS)
_llm_request_kind: Final = _kind_from("llm.request.type", _LLM_REQUEST_KINDS)


def _openllmetry_kind(record: SpanRecord) -> str | None:
    return _traceloop_kind(record) or _llm_request_kind(record)


_OPENLLMETRY_NUMBERED: Final[Mapping[Side, tuple[str, ...]]] = {
    "input": ("gen_ai.prompt.", "llm.prompts."),
    "output": ("gen_ai.completion.",),
}


def _openllmetry_content(side: Side) -> FieldReader:
    numbered = _OPENLLMETRY_NUMBERED[side]
    entity_key = f"traceloop.entity.{side}"

    def read(record: SpanRecord, kind: str) -> str | None:
        attributes = record.attributes
        for prefix in numbered if kind == "llm" else ():
            messages = indexed_items(attributes, prefix)
            if messages:
                if (text := messages_text(messages, side)) is not None:
                    return text
                return to_json(messages)
        value = attributes.get(entity_key)
        if value is None:
            return None
        return _entity_input(value, kind) if side == "input" else _entity_output(value)

    return read


def _entity_input(value: object, kind: str) -> str | None:
    """`traceloop.entity.input` (`{"args": [...], "kwargs": {...}}`): an agent's, workflow's or
    task's one text argument (a `@workflow` around the agent is often the root); a tool's
    keyword arguments as a JSON object when it has no positional ones (as GenAI's
    `gen_ai.tool.call.arguments`); else the value as sent."""
    data = parsed_json(value)
    if isinstance(data, Mapping):
        args = data.get("args")
        args = args if isinstance(args, list) else []
        kwargs = data.get("kwargs")
        kwargs = kwargs if isinstance(kwargs, Mapping) else {}
        values = [*args, *kwargs.values()]
        if kind in ("agent", "chain") and len(values) == 1 and isinstance(values[0], str):
            return values[0]
        if kind == "tool" and not args and kwargs:
            return to_json(kwargs)
    return as_text(value)


def _entity_output(value: object) -> str | None:
    """`traceloop.entity.output` (the return value as JSON): text as text."""
    data = parsed_json(value)
    return data if isinstance(data, str) else as_text(value)


OPENLLMETRY: Final = Convention(
    name="OpenLLMetry",
    kind=_openllmetry_kind,
    agent_name=_named("traceloop.entity.name", kinds=frozenset({"agent"})),
    input=_openllmetry_content("input"),
    output=_openllmetry_content("output"),
    keys=frozenset(
        {
            "traceloop.span.kind",
            "llm.request.type",
            "traceloop.entity.name",
            "traceloop.entity.input",
            "traceloop.entity.output",
        }
    ),
    prefixes=tuple(p for ps in _OPENLLMETRY_NUMBERED.values() for p in ps),
    input_token_keys=("llm.usage.prompt_tokens",),
    output_token_keys=("llm.usage.completion_tokens",),
)


# --- Logfire (Pydantic) ----------------------------------------------------------------------

_LOGFIRE_SCOPE: Final = "logfire"
_LOGFIRE_SPAN_TYPE: Final = "logfire.span_type"
_LOGFIRE_TAG_KINDS: Final[Mapping[str, str]] = {"agent": "agent", "tool": "tool", "llm": "llm"}
_RETURN_KEY: Final = "return"


def _is_logfire_span(record: SpanRecord) -> bool:
    return record.attributes.get(_LOGFIRE_SPAN_TYPE) == "span"


def _logfire_kind(record: SpanRecord) -> str | None:
    """A tag naming a kind (`_tags=["tool"]`), else a root span of `logfire.span` or
    `@logfire.instrument` is the agent."""
    if not _is_logfire_span(record):
        return None
    tags = record.attributes.get("logfire.tags")
    for tag in tags if isinstance(tags, list | tuple) else ():
        if isinstance(tag, str) and (kind := _LOGFIRE_TAG_KINDS.get(tag.strip().lower())):
            return kind
    if record.parent_span_id is None and record.scope_name == _LOGFIRE_SCOPE:
        return "agent"
    return None


def _logfire_arguments(record: SpanRecord) -> dict[str, Any]:
    """The span's own arguments: what `logfire.json_schema` lists, less the return value."""
    schema = parsed_json(record.attributes.get("logfire.json_schema"))
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return {}
    return {
        key: record.attributes[key]
        for key in properties
        if key != _RETURN_KEY
        and key in record.attributes
        and not key.startswith(("gen_ai.", "logfire.", "code."))
    }


def _logfire_input(record: SpanRecord, kind: str) -> str | None:
    """An agent's one argument as text; a tool's arguments as a JSON object (as GenAI's
    `gen_ai.tool.call.arguments`), so a tool call reads the same whoever traced it."""
    if kind not in ("agent", "tool") or not _is_logfire_span(record):
        return None
    arguments = _logfire_arguments(record)
    if kind == "agent" and len(arguments) == 1:
        return as_text(next(iter(arguments.values())))
    return to_json(arguments) if arguments else None


def _logfire_output(record: SpanRecord, kind: str) -> str | None:
    if kind not in ("agent", "tool") or not _is_logfire_span(record):
        return None
    return as_text(record.attributes.get(_RETURN_KEY))


LOGFIRE: Final = Convention(
    name="Logfire",
    kind=_logfire_kind,
    agent_name=lambda record, kind: None,
    input=_logfire_input,
    output=_logfire_output,
    keys=frozenset({_LOGFIRE_SPAN_TYPE}),
)


CONVENTIONS: Final = (OPENINFERENCE, GENAI, OPENLLMETRY, LOGFIRE)
"""In the order they are asked: the first convention that answers a field decides it."""
AGENT_NAME_ORDER: Final = (GENAI, OPENINFERENCE, OPENLLMETRY, LOGFIRE)
"""The standard's `gen_ai.agent.name` wins over OpenInference's `agent.name`."""
PROVIDER_KEYS: Final = tuple(key for c in (GENAI, OPENINFERENCE) for key in c.provider_keys)
INPUT_TOKEN_KEYS: Final = tuple(key for c in CONVENTIONS for key in c.input_token_keys)
OUTPUT_TOKEN_KEYS: Final = tuple(key for c in CONVENTIONS for key in c.output_token_keys)
CACHE_READ_TOKEN_KEYS: Final = tuple(key for c in CONVENTIONS for key in c.cache_read_token_keys)
CACHE_WRITE_TOKEN_KEYS: Final = tuple(key for c in CONVENTIONS for key in c.cache_write_token_keys)
TOKEN_KEYS: Final = INPUT_TOKEN_KEYS + OUTPUT_TOKEN_KEYS
