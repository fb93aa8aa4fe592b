"""The text of a span's content, whichever shape carries it.

Instrumentations send content as plain text, as JSON text, as structured attributes, as
numbered attributes (`llm.input_messages.0.message.content`) or as span events. These readers
turn each into the text a person would read: the last user message for an input, the
assistant's reply for an output, and the value as JSON only when there is no text in it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal


def nonblank_text(value: object) -> str | None:
    """A non-blank string, else None: a model or agent called "" or 42 names nothing."""
    if isinstance(value, str) and value.strip():
        return value
    return None


def first_text(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        if (value := nonblank_text(attributes.get(key))) is not None:
            return value
    return None


def to_json(value: object) -> str:
    """Structured content as JSON text; `default=str` so an odd leaf never loses the whole value."""
    return json.dumps(value, ensure_ascii=False, default=str)


def as_text(value: object) -> str | None:
    """A content value as sent: text as is, anything structured as JSON, None when absent."""
    if value is None:
        return None
    return value if isinstance(value, str) else to_json(value)


# ---------------------------------------------------------------------------------------------
# Messages: the text of a conversation, whichever shape carries it
# ---------------------------------------------------------------------------------------------

Side = Literal["input", "output"]
_ROLES: Final[Mapping[Side, frozenset[str | None]]] = {
    "input": frozenset({"user", "human"}),
    "output": frozenset({"assistant", "ai", "model", None}),
}
"""Whose message is the input (the last user message) and the output (the assistant's)."""


def parsed_json(value: object) -> object:
    """JSON text decoded (instrumentations often send structured content as JSON strings)."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{", '"'):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _message_list(value: object) -> list[Mapping[str, Any]] | None:
    """The messages in `value`: a list of messages (GenAI, OpenAI), a chat request's
    `messages`, a chat response's `choices`, or one message; None when it holds none."""
    value = parsed_json(value)
    if isinstance(value, Mapping):
        if isinstance(value.get("messages"), list):
            value = value["messages"]
        elif isinstance(value.get("choices"), list):
            value = [
                choice.get("message") for choice in value["choices"] if isinstance(choice, Mapping)
            ]
        else:
            value = [value]
    if not isinstance(value, list | tuple):
        return None
    messages = [message for message in value if isinstance(message, Mapping)]
    return messages or None


def _message_text(message: Mapping[str, Any]) -> str | None:
    """The text of one message: `content` as text, or its text parts (GenAI `parts`, OpenAI
    content parts) joined by newlines; a `gen_ai.choice` body's `message` too."""
    content = message.get("content")
    if isinstance(content, str):
        return content if content.strip() else None
    parts = message.get("parts") if content is None else content
    if isinstance(parts, list | tuple):
        texts = [
            text
            for part in parts
            if isinstance(part, Mapping)
            and part.get("type", "text") == "text"
            and isinstance(text := part.get("content", part.get("text")), str)
            and text.strip()
        ]
        if texts:
            return "\n".join(texts)
    inner = message.get("message")
    if isinstance(inner, Mapping):
        return _message_text(inner)
    return None


def _role(message: Mapping[str, Any]) -> str | None:
    role = message.get("role")
    if role is None and isinstance(message.get("message"), Mapping):
        role = message["message"].get("role")
    return role.strip().lower() if isinstance(role, str) else None


def messages_text(messages: Sequence[Mapping[str, Any]], side: Side) -> str | None:
    """The last message of `side`'s roles that has text."""
    roles = _ROLES[side]
    for message in reversed(messages):
        if _role(message) in roles and (text := _message_text(message)) is not None:
            return text
    return None


def conversation_text(value: object, side: Side) -> str | None:
    """Message-carrying content as text: the side's message text, else the value as sent."""
    if value is None:
        return None
    messages = _message_list(value)
    if messages is not None and (text := messages_text(messages, side)) is not None:
        return text
    return as_text(value)


def indexed_items(attributes: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened numbered attributes as a list: `p.0.role`, `p.0.content`, `p.1.role` become
    `[{"role": ..., "content": ...}, {"role": ...}]`, ordered by number."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        number, dot, rest = key[len(prefix) :].partition(".")
        if dot and number.isdigit() and len(number) < 7:
            items.setdefault(int(number), {})[rest] = value
    return [items[number] for number in sorted(items)]


def event_content(events: Sequence[Mapping[str, Any]], side: Side) -> str | None:
    """Content from a span's events: the GenAI content events (`gen_ai.user.message`,
    `gen_ai.choice`, ..., `gen_ai.client.inference.operation.details`), whether the instrumentation
    sent them as span events or as OTLP log records, and the older `gen_ai.content.prompt` /
    `gen_ai.content.completion` span events."""
    if not events:
        return None
    messages: list[Mapping[str, Any]] = []
    raw: object = None
    for event in events:
        name = event.get("name")
        attributes = event.get("attributes")
        attributes = attributes if isinstance(attributes, Mapping) else {}
        body = parsed_json(event.get("body"))
        if body is None and name in _GENAI_MESSAGE_EVENTS:
            # A span event has no body: its content is an attribute, the whole body as JSON in
            # `gen_ai.event.content` (azure-ai-inference, Semantic Kernel), or the message's
            # own fields (`content`, `message`, `role`, `tool_calls`) as attributes.
            body = parsed_json(attributes.get("gen_ai.event.content"))
            if body is None and not _MESSAGE_FIELDS.isdisjoint(attributes):
                body = {
                    key: parsed_json(value) if key in ("message", "tool_calls") else value
                    for key, value in attributes.items()
                    if key in _MESSAGE_FIELDS
                }
        if name in _GENAI_MESSAGE_EVENTS and (side == "input") != (name == "gen_ai.choice"):
            message = dict(body) if isinstance(body, Mapping) else {"content": body}
            message.setdefault("role", _GENAI_MESSAGE_EVENTS[name])
            messages.append(message)
        else:
            key = _EVENT_CONTENT_KEYS.get((name, side))
            if key is not None and (value := attributes.get(key)) is not None:
                messages.extend(_message_list(value) or ())
                raw = value
    if messages and (text := messages_text(messages, side)) is not None:
        return text
    return as_text(raw)


_MESSAGE_FIELDS: Final = frozenset({"content", "message", "role", "tool_calls", "index"})
"""A content event's body fields, when a span event carries them as attributes."""
_GENAI_MESSAGE_EVENTS: Final[Mapping[object, str | None]] = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
    "gen_ai.choice": None,
}
"""GenAI's per-message content events, with the role each implies."""
GENAI_CONTENT_EVENTS: Final = frozenset(
    {
        *(name for name in _GENAI_MESSAGE_EVENTS if isinstance(name, str)),
        "gen_ai.client.inference.operation.details",
        "gen_ai.content.prompt",
        "gen_ai.content.completion",
    }
)
"""The event names whose records the log receiver attaches to their span."""
_EVENT_CONTENT_KEYS: Final[Mapping[tuple[object, Side], str]] = {
    ("gen_ai.client.inference.operation.details", "input"): "gen_ai.input.messages",
    ("gen_ai.client.inference.operation.details", "output"): "gen_ai.output.messages",
    ("gen_ai.content.prompt", "input"): "gen_ai.prompt",
    ("gen_ai.content.completion", "output"): "gen_ai.completion",
}
