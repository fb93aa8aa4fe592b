"""Sending a recorded call again to a model provider, over httpx, in its own wire format.

Two formats cover the providers people replay against:

- `openai`: Chat Completions, `POST {OPENAI_BASE_URL}/chat/completions` (default base
  `https://api.openai.com/v1`), `Authorization: Bearer $OPENAI_API_KEY`. Any OpenAI-compatible
  server (a gateway, vLLM, Ollama) works through OPENAI_BASE_URL.
- `anthropic`: Messages, `POST {ANTHROPIC_BASE_URL}/v1/messages` (default base
  `https://api.anthropic.com`), `x-api-key: $ANTHROPIC_API_KEY`, `anthropic-version: 2023-06-01`.
  `max_tokens` is required there: the recorded one, else 1024.

Keys come from the person's own environment only, never from anything Neens stores. A reply
is read down to what a replay grades (its first action: a tool call by name, or text), the text
shown for it, and its token usage for the cost.

Errors: transport failures, 408, 429 and 5xx are retried (`retries` times, backing off) and then
are `ProviderError(kind="infra")`; any other refusal (400, 401, 404, …) is not retried and is
`ProviderError(kind="agent")` with the provider's own message, as is a reply that is not JSON.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import httpx

from neens.exp.replay_calls import (
    Action,
    Message,
    RecordedCall,
    Tool,
    ToolCall,
    content_text,
    reply_action,
    tool_calls_in,
)

ProviderName = Literal["openai", "anthropic"]
PROVIDERS: Final[tuple[ProviderName, ...]] = ("openai", "anthropic")
KEY_ENV: Final[Mapping[ProviderName, str]] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
BASE_URL_ENV: Final[Mapping[ProviderName, str]] = {
    "openai": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
}
DEFAULT_BASE_URL: Final[Mapping[ProviderName, str]] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
ANTHROPIC_VERSION: Final = "2023-06-01"
ANTHROPIC_DEFAULT_MAX_TOKENS: Final = 1024
_RETRIED: Final = frozenset({408, 429, 500, 502, 503, 504, 529})
_ERROR_CHARS: Final = 300


def provider_for(model: str, recorded: str | None) -> ProviderName:
    """The wire format a model is called with: Anthropic's for `claude…` models, or when the
    span recorded Anthropic as the provider of this very model; OpenAI's otherwise."""
    if model.lower().startswith("claude"):
        return "anthropic"
    if recorded is not None and "anthropic" in recorded.lower():
        return "anthropic"
    return "openai"


@dataclass(frozen=True, slots=True)
class Endpoint:
    provider: ProviderName
    base_url: str
    api_key: str

    def __repr__(self) -> str:
        return f"Endpoint({self.provider!r}, {self.base_url!r})"


@dataclass(frozen=True, slots=True)
class Request:
    """One call as an arm sends it: the recorded call with the arm's changes."""

    model: str
    system: str | None
    messages: tuple[Message, ...]
    tools: tuple[Tool, ...]
    params: dict[str, Any]
    """Request fields sent as they are (temperature, max_tokens, …); the arm's win."""

    @classmethod
    def of(cls, call: RecordedCall, model: str, changes: Mapping[str, Any]) -> Request:
        system = changes["system"] if "system" in changes else call.system
        params = {**call.params, **{k: v for k, v in changes.items() if k != "system"}}
        return cls(model, system, call.messages, call.tools, params)


@dataclass(frozen=True, slots=True)
class Reply:
    action: Action | None
    text: str
    """What is stored as the answer: the text, or `tool NAME(ARGUMENTS)`."""
    model: str | None
    input_tokens: int | None
    output_tokens: int | None


class ProviderError(Exception):
    """The provider did not give a usable reply; `kind` is "infra" or "agent"."""

    def __init__(self, kind: Literal["infra", "agent"], message: str) -> None:
        super().__init__(message)
        self.kind = kind


def openai_body(request: Request) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if request.system is not None:
        messages.append({"role": "system", "content": request.system})
    ids = _ToolIds()
    for message in request.messages:
        if message.role == "tool":
            messages.append(
                {"role": "tool", "tool_call_id": ids.result(message), "content": message.text}
            )
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": ids.call(call),
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in message.tool_calls
                ]
            messages.append(entry)
        else:
            messages.append({"role": "user", "content": message.text})
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    **({"description": tool.description} if tool.description else {}),
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
    body.update(request.params)
    return body


def anthropic_body(request: Request) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    ids = _ToolIds()

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)  # the API wants roles to alternate
        else:
            messages.append({"role": role, "content": blocks})

    for message in request.messages:
        if message.role == "tool":
            block = {"type": "tool_result", "tool_use_id": ids.result(message)}
            add("user", [{**block, "content": message.text}])
        elif message.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            blocks.extend(
                {"type": "tool_use", "id": ids.call(c), "name": c.name, "input": _input(c)}
                for c in message.tool_calls
            )
            if blocks:
                add("assistant", blocks)
        else:
            add("user", [{"type": "text", "text": message.text}])
    params = dict(request.params)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": params.pop("max_tokens", ANTHROPIC_DEFAULT_MAX_TOKENS),
        "messages": messages,
    }
    if request.system is not None:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {
                "name": tool.name,
                **({"description": tool.description} if tool.description else {}),
                "input_schema": tool.parameters,
            }
            for tool in request.tools
        ]
    body.update(params)
    return body


class _ToolIds:
    """Tool-call ids as recorded, or made up (`call_1`, …) when a span did not keep them, with
    each result given the id of the earliest call not yet answered."""

    def __init__(self) -> None:
        self._made = 0
        self._open: list[str] = []

    def call(self, call: ToolCall) -> str:
        if call.id is None:
            self._made += 1
        made = call.id or f"call_{self._made}"
        self._open.append(made)
        return made

    def result(self, message: Message) -> str:
        if message.tool_call_id is not None:
            if message.tool_call_id in self._open:
                self._open.remove(message.tool_call_id)
            return message.tool_call_id
        if self._open:
            return self._open.pop(0)
        self._made += 1
        return f"call_{self._made}"


def _input(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {"arguments": call.arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def read_openai(body: Mapping[str, Any]) -> Reply:
    choices = body.get("choices")
    message = choices[0].get("message") if isinstance(choices, list) and choices else None
    if not isinstance(message, Mapping):
        raise ProviderError("agent", "the reply has no choices[0].message")
    usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
    assert isinstance(usage, Mapping)
    return _reply(
        [message], body.get("model"), usage.get("prompt_tokens"), usage.get("completion_tokens")
    )


def read_anthropic(body: Mapping[str, Any]) -> Reply:
    content = body.get("content")
    if not isinstance(content, list):
        raise ProviderError("agent", "the reply has no content list")
    usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
    assert isinstance(usage, Mapping)
    return _reply(
        [{"content": content}],
        body.get("model"),
        usage.get("input_tokens"),
        usage.get("output_tokens"),
    )


def _reply(messages: list[Mapping[str, Any]], model: object, tin: object, tout: object) -> Reply:

    action = reply_action(messages)
    message = messages[0]
    content = message.get("content")
    calls = [*tool_calls_in(message.get("tool_calls")), *tool_calls_in(content)]
    if calls:
        text = f"tool {calls[0].name}({calls[0].arguments})"
    else:
        text = content_text(content) or ""
    return Reply(
        action,
        text,
        model if isinstance(model, str) else None,
        _count(tin),
        _count(tout),
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


async def send(
    client: httpx.AsyncClient, endpoint: Endpoint, request: Request, *, retries: int
) -> Reply:
    """Send `request` and read the reply; see the module docstring for what is retried."""
    if endpoint.provider == "anthropic":
        url = f"{endpoint.base_url.rstrip('/')}/v1/messages"
        headers = {"x-api-key": endpoint.api_key, "anthropic-version": ANTHROPIC_VERSION}
        body = anthropic_body(request)
    else:
        url = f"{endpoint.base_url.rstrip('/')}/chat/completions"
        headers = {"Authorization": f"Bearer {endpoint.api_key}"}
        body = openai_body(request)
    attempt = 0
    while True:
        try:
            response = await client.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            problem = f"{type(exc).__name__} calling {url}: {exc}"
            if attempt >= retries:
                raise ProviderError("infra", problem) from None
        else:
            if response.status_code < 300:
                return _read(endpoint.provider, response)
            problem = f"{url} answered {response.status_code}: {_excerpt(response.text)}"
            if response.status_code not in _RETRIED:
                raise ProviderError("agent", problem)
            if attempt >= retries:
                raise ProviderError("infra", problem)
        attempt += 1
        await asyncio.sleep(min(0.25 * 2**attempt, 8.0))


def _read(provider: ProviderName, response: httpx.Response) -> Reply:
    try:
        body = response.json()
    except ValueError:
        raise ProviderError("agent", f"the reply is not JSON: {_excerpt(response.text)}") from None
    if not isinstance(body, Mapping):
        raise ProviderError("agent", "the reply is not a JSON object")
    return read_anthropic(body) if provider == "anthropic" else read_openai(body)


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _ERROR_CHARS else text[:_ERROR_CHARS] + "…"
