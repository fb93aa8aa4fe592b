"""The model calls `neens exp replay` can send again, read from stored LLM spans.

A span records a call in whichever vocabulary its instrumentation speaks, so the request is put
back together from the first of these that the span carries:

- messages: `gen_ai.input.messages` (OpenTelemetry GenAI, with `gen_ai.system_instructions`),
  `llm.input_messages.N.message.*` (OpenInference), `gen_ai.prompt.N.*` / `llm.prompts.N.*`
  (OpenLLMetry), the request body in `input.value` (its `messages` and `system`), the GenAI
  content events, and the native format's `input` (a message list, or one user text);
- tools: `gen_ai.tool.definitions`, `llm.tools.N.tool.json_schema`, `llm.request.functions.N.*`,
  the request body's `tools`;
- parameters: `gen_ai.request.temperature` / `top_p` / `max_tokens`, `llm.invocation_parameters`,
  the request body's own.

The recorded reply is read the same way (`gen_ai.output.messages`, `llm.output_messages.N`,
`gen_ai.completion.N`, `output.value`, `gen_ai.choice` events, the native `output`) down to its
first action: the name of its first tool call, or "text" when it answered in text. A span whose
request has no message is not replayable, and is never guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from neens.domain.conventions import SpanView
from neens.domain.messages import indexed_items, parsed_json
from neens.domain.spans import SpanRecord

ActionKind = Literal["tool", "text"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str | None
    name: str
    arguments: str
    """The arguments as JSON text, as OpenAI sends them."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a request, provider-neutral."""

    role: Literal["user", "assistant", "tool"]
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str | None
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Action:
    """A reply's first action: a tool call by name, or text."""

    kind: ActionKind
    name: str | None = None

    def label(self) -> str:
        return f"tool {self.name}" if self.kind == "tool" else "text"

    def matches(self, other: Action) -> bool:
        return self.kind == other.kind and self.name == other.name


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One stored LLM call, ready to be sent again."""

    trace_id: str
    span_id: str
    index: int
    """Its position among its session's replayable calls, in start order."""
    model: str | None
    """The model requested (the one the agent asked for), else the one that served it."""
    provider: str | None
    system: str | None
    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    """temperature, top_p, max_tokens when recorded."""
    action: Action | None = None
    """The recorded reply's first action; None when the span kept no reply."""
    input_tokens: int | None = None
    output_tokens: int | None = None

    @property
    def case_id(self) -> str:
        return f"call{self.index:03d}-{self.span_id}"

    def prompt_text(self) -> str:
        """The last user message: what a person reads as this call's input."""
        for message in reversed(self.messages):
            if message.role == "user" and message.text:
                return message.text
        return self.messages[-1].text if self.messages else ""


_PARAMS: Final = ("temperature", "top_p", "max_tokens")


def recorded_call(record: SpanRecord, view: SpanView, index: int) -> RecordedCall | None:
    """The call `record` made, or None when its request messages were not recorded."""
    attributes = record.attributes
    body = parsed_json(attributes.get("input.value"))
    body = body if isinstance(body, Mapping) else {}
    system, messages = _request_messages(record, body)
    if not messages:
        return None
    return RecordedCall(
        trace_id=record.trace_id,
        span_id=record.span_id,
        index=index,
        model=view.request_model or view.model,
        provider=view.provider,
        system=system,
        messages=tuple(messages),
        tools=tuple(_tools(attributes, body)),
        params=_params(attributes, body),
        action=reply_action(_reply(record)),
        input_tokens=view.input_tokens,
        output_tokens=view.output_tokens,
    )


# --- messages ----------------------------------------------------------------------------


def _request_messages(
    record: SpanRecord, body: Mapping[str, Any]
) -> tuple[str | None, list[Message]]:
    attributes = record.attributes
    candidates: list[object] = [attributes.get("gen_ai.input.messages")]
    openinference = indexed_items(attributes, "llm.input_messages.")
    candidates.append([_openinference_message(item) for item in openinference] or None)
    for prefix in ("gen_ai.prompt.", "llm.prompts."):
        candidates.append(indexed_items(attributes, prefix) or None)
    candidates.append(body.get("messages"))
    candidates.append(_event_messages(record.events))
    candidates.append(record.input)
    for candidate in candidates:
        system, messages = _messages(candidate)
        if messages:
            instructions = content_text(parsed_json(attributes.get("gen_ai.system_instructions")))
            return instructions or content_text(body.get("system")) or system, messages
    return None, []


def _messages(value: object) -> tuple[str | None, list[Message]]:
    """(system text, the other messages) of a message list in any of the shapes above; a
    plain text is one user message."""
    value = parsed_json(value)
    if value is None:
        return None, []
    if isinstance(value, str):
        return None, ([Message("user", value)] if value.strip() else [])
    if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if not isinstance(value, list | tuple):
        return None, []
    systems: list[str] = []
    messages: list[Message] = []
    for raw in value:
        if not isinstance(raw, Mapping):
            continue
        role = str(raw.get("role") or "user").strip().lower()
        if role in ("system", "developer"):
            if text := content_text(raw.get("content", raw.get("parts"))):
                systems.append(text)
            continue
        messages.extend(_message(role, raw))
    return ("\n\n".join(systems) or None), messages


def _message(role: str, raw: Mapping[str, Any]) -> list[Message]:
    content = raw.get("content", raw.get("parts"))
    calls = [*tool_calls_in(raw.get("tool_calls")), *tool_calls_in(content)]
    results = _tool_results(content)
    if role == "tool" or results:
        if results:
            return [Message("tool", text, tool_call_id=cid) for cid, text in results]
        return [
            Message("tool", content_text(content) or "", tool_call_id=_str(raw.get("tool_call_id")))
        ]
    if role in ("assistant", "ai", "model"):
        return [Message("assistant", content_text(content) or "", tuple(calls))]
    text = content_text(content)
    return [Message("user", text)] if text else []


def content_text(content: object) -> str | None:
    """The text of a message's content: a string, or its text parts joined. A string holding
    JSON that is not a list of parts (a tool's result) is that string."""
    if isinstance(content, str):
        parsed = parsed_json(content)
        if not isinstance(parsed, list) or not any(
            isinstance(part, Mapping) and "type" in part for part in parsed
        ):
            return content if content.strip() else None
        content = parsed
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list | tuple):
        return None
    texts = [
        text
        for part in content
        if isinstance(part, Mapping)
        and part.get("type", "text") == "text"
        and isinstance(text := part.get("content", part.get("text")), str)
    ]
    return "\n".join(texts) or None


def tool_calls_in(value: object) -> list[ToolCall]:
    """Tool calls in OpenAI's `tool_calls`, GenAI's `tool_call` parts or Anthropic's `tool_use`
    blocks."""
    if not isinstance(value, list | tuple):
        return []
    calls = []
    for item in value:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        function = item.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            calls.append(
                ToolCall(_str(item.get("id")), function["name"], _json(function.get("arguments")))
            )
        elif kind in ("tool_call", "tool_use") and isinstance(item.get("name"), str):
            arguments = item.get("arguments", item.get("input"))
            calls.append(ToolCall(_str(item.get("id")), item["name"], _json(arguments)))
    return calls


def _tool_results(content: object) -> list[tuple[str | None, str]]:
    """Tool results carried as GenAI `tool_call_response` parts or Anthropic `tool_result`."""
    if not isinstance(content, list | tuple):
        return []
    results = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") in ("tool_call_response", "tool_result"):
            value = part.get("response", part.get("content"))
            text = content_text(value) if not isinstance(value, Mapping) else None
            results.append((_str(part.get("id", part.get("tool_use_id"))), text or _json(value)))
    return results


def _openinference_message(item: Mapping[str, Any]) -> dict[str, Any]:
    content = item.get("message.content")
    if content is None:
        parts = indexed_items(item, "message.contents.")
        content = [{"type": "text", "text": p.get("message_content.text")} for p in parts]
    calls = [
        {
            "id": call.get("tool_call.id"),
            "function": {
                "name": call.get("tool_call.function.name"),
                "arguments": call.get("tool_call.function.arguments"),
            },
        }
        for call in indexed_items(item, "message.tool_calls.")
    ]
    return {
        "role": item.get("message.role"),
        "content": content,
        "tool_calls": calls,
        "tool_call_id": item.get("message.tool_call_id"),
    }


_EVENT_ROLES: Final = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_messages(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    messages = []
    for event in events:
        role = _EVENT_ROLES.get(str(event.get("name")))
        if role is None:
            continue
        body = parsed_json(event.get("body"))
        message = dict(body) if isinstance(body, Mapping) else {"content": body}
        message.setdefault("role", role)
        message.setdefault("tool_call_id", message.get("id"))
        messages.append(message)
    return messages or None


# --- tools and parameters --------------------------------------------------------------------


def _tools(attributes: Mapping[str, Any], body: Mapping[str, Any]) -> list[Tool]:
    candidates: list[object] = [parsed_json(attributes.get("gen_ai.tool.definitions"))]
    candidates.append(
        [parsed_json(t.get("tool.json_schema")) for t in indexed_items(attributes, "llm.tools.")]
    )
    candidates.append(indexed_items(attributes, "llm.request.functions."))
    candidates.append(body.get("tools"))
    for candidate in candidates:
        if isinstance(candidate, list) and (tools := [t for t in map(_tool, candidate) if t]):
            return tools
    return []


def _tool(raw: object) -> Tool | None:
    if not isinstance(raw, Mapping):
        return None
    inner = raw.get("function")
    source = inner if isinstance(inner, Mapping) else raw
    name = source.get("name")
    if not isinstance(name, str) or not name:
        return None
    parameters = parsed_json(source.get("parameters", source.get("input_schema")))
    description = source.get("description")
    return Tool(
        name,
        description if isinstance(description, str) else None,
        dict(parameters) if isinstance(parameters, Mapping) else {"type": "object"},
    )


def _params(attributes: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    invocation = parsed_json(attributes.get("llm.invocation_parameters"))
    invocation = invocation if isinstance(invocation, Mapping) else {}
    found: dict[str, Any] = {}
    for name in _PARAMS:
        for value in (
            attributes.get(f"gen_ai.request.{name}"),
            invocation.get(name),
            body.get(name),
        ):
            if isinstance(value, int | float) and not isinstance(value, bool):
                found[name] = value
                break
    return found


# --- the recorded reply --------------------------------------------------------------------


def _reply(record: SpanRecord) -> list[Mapping[str, Any]]:
    """The recorded reply's assistant messages (or Anthropic content blocks), first found."""
    attributes = record.attributes
    candidates: list[object] = [attributes.get("gen_ai.output.messages")]
    candidates.append(
        [_openinference_message(i) for i in indexed_items(attributes, "llm.output_messages.")]
    )
    completions = indexed_items(attributes, "gen_ai.completion.")
    for item in completions:
        item["tool_calls"] = [
            {"type": "tool_call", "name": c.get("name"), "arguments": c.get("arguments")}
            for c in indexed_items(item, "tool_calls.")
        ]
    candidates.append(completions)
    candidates.append(attributes.get("output.value"))
    candidates.append(
        [
            parsed_json(event.get("body"))
            for event in record.events
            if event.get("name") == "gen_ai.choice"
        ]
    )
    candidates.append(record.output)
    for candidate in candidates:
        messages = _reply_messages(candidate)
        if messages:
            return messages
    return []


def _reply_messages(value: object) -> list[Mapping[str, Any]]:
    value = parsed_json(value)
    if isinstance(value, str):
        return [{"content": value}] if value.strip() else []
    if isinstance(value, Mapping):
        if isinstance(value.get("choices"), list):
            value = [c.get("message") for c in value["choices"] if isinstance(c, Mapping)]
        elif value.get("type") == "message" and isinstance(value.get("content"), list):
            return [{"content": value["content"]}]  # an Anthropic response
        else:
            value = [value]
    if not isinstance(value, list | tuple):
        return []
    found = []
    for item in value:
        if isinstance(item, Mapping) and isinstance(item.get("message"), Mapping):
            item = item["message"]
        if isinstance(item, Mapping):
            found.append(item)
    return found


def reply_action(messages: Sequence[Mapping[str, Any]]) -> Action | None:
    """The first action of a reply: its first tool call's name, else "text" when it has text;
    None when it has neither."""
    for message in messages:
        content = message.get("content", message.get("parts"))
        calls = [*tool_calls_in(message.get("tool_calls")), *tool_calls_in(content)]
        if calls:
            return Action("tool", calls[0].name)
    for message in messages:
        if content_text(message.get("content", message.get("parts"))):
            return Action("text")
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _json(value: object) -> str:
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
