"""Calling an agent endpoint once for one golden prompt, with every guardrail of push mode.

Each call is bounded: the prompt is truncated at 200,000 characters, the whole exchange must
finish within the timeout (60 s by default, enforced end to end, not per socket read, so a
server that drips bytes cannot hold an item forever), and the response body is read only up to
8 MiB. Every failure becomes an `AgentCallFailed` with a reason a person can act on; nothing is
ever invented in place of an answer. Text copied from the reply into that reason is bounded
(`destinations.excerpt`), the endpoint's URL is named without its userinfo, query or fragment
(`destinations.shown_url`: people who may not read the connection read its items' errors), and
the client is an `agent_client.AgentClient`, which refuses destinations the policy does not
allow and never follows redirects.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from neens.domain.conventions import token_count
from neens.domain.json_path import extract, parse_path
from neens.engine.agent_client import ResponseTooLarge, refused
from neens.engine.destinations import (
    DestinationRefused,
    excerpt,
    shown_url,
    without_url_secrets,
)
from neens.queue.worker import AgentPoster

MAX_PROMPT_CHARS = 200_000
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
DEFAULT_ANSWER_PATHS = {"chat": "choices[0].message.content", "neens": "output"}


@dataclass(frozen=True, slots=True)
class AgentEndpoint:
    url: str
    request_format: str
    """"chat" (OpenAI-style messages) or "neens" (input plus the correlation ids)."""
    answer_path: str | None
    headers: dict[str, str]
    model: str | None


@dataclass(frozen=True, slots=True)
class AgentReply:
    answer: str
    prompt_sent: str
    model: str | None
    """The model the reply says served it, when it says."""
    input_tokens: int | None
    output_tokens: int | None
    latency_ms: float
    agent_name: str | None = None
    """The agent the reply says answered (`agent_name`, a top-level string); None when it says
    nothing. Never the connection's name: a connection is an endpoint, not an agent."""


class AgentCallFailed(Exception):
    """The call produced no usable answer; `reason` says why.

    `transport` is set when no answer came back at all (the connection failed or was dropped)
    and `status` when the endpoint answered with a status other than 2xx, so a caller can tell
    a failure of the way to the agent from a failure of the agent itself."""

    def __init__(self, reason: str, *, status: int | None = None, transport: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.transport = transport


def request_body(
    endpoint: AgentEndpoint, prompt: str, *, run_id: str, item_id: str, version_label: str
) -> dict[str, Any]:
    if endpoint.request_format == "chat":
        body: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}]}
        if endpoint.model is not None:
            body = {"model": endpoint.model, **body}
        return body
    return {
        "input": prompt,
        "eval_run_id": run_id,
        "dataset_item_id": item_id,
        "version_label": version_label,
    }


async def call_agent(
    client: AgentPoster,
    endpoint: AgentEndpoint,
    prompt: str,
    *,
    run_id: str,
    item_id: str,
    version_label: str,
    timeout_s: float = 60.0,
) -> AgentReply:
    """POST the prompt and read the answer, or raise AgentCallFailed."""
    sent = prompt[:MAX_PROMPT_CHARS]
    body = request_body(endpoint, sent, run_id=run_id, item_id=item_id, version_label=version_label)
    encoded = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        async with asyncio.timeout(timeout_s):
            status, raw = await client.post_json(
                endpoint.url, encoded, endpoint.headers, max_bytes=MAX_RESPONSE_BYTES
            )
    except TimeoutError:
        raise AgentCallFailed(f"no complete answer within {timeout_s:g} s (timeout)") from None
    except DestinationRefused as exc:
        raise AgentCallFailed(f"refused to call {shown_url(endpoint.url)}: {exc}") from None
    except ResponseTooLarge as exc:
        raise AgentCallFailed(_too_large(exc.size)) from None
    except (aiohttp.ClientError, ValueError) as exc:
        # A refusal met while resolving a name arrives wrapped by aiohttp; a ValueError is a
        # URL or header aiohttp cannot send.
        policy = refused(exc)
        if policy is not None:
            raise AgentCallFailed(f"refused to call {shown_url(endpoint.url)}: {policy}") from None
        raise AgentCallFailed(
            f"could not reach {shown_url(endpoint.url)}: {_describe(exc)}", transport=True
        ) from None
    latency_ms = (loop.time() - started) * 1000
    if not 200 <= status < 300:
        raise AgentCallFailed(
            f"endpoint answered HTTP {status}: {excerpt(raw)}".rstrip(": "), status=status
        )
    if not raw.strip():
        raise AgentCallFailed("endpoint answered with an empty body")
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AgentCallFailed(f"endpoint did not answer JSON: {excerpt(str(exc))}") from None
    except ValueError:  # Python refuses integers of more than 4,300 digits
        raise AgentCallFailed(
            "endpoint did not answer JSON Neens can read: a number is too long"
        ) from None
    except RecursionError:
        raise AgentCallFailed(
            "endpoint did not answer JSON Neens can read: it nests too deeply"
        ) from None
    path_text = endpoint.answer_path or DEFAULT_ANSWER_PATHS[endpoint.request_format]
    found, answer = extract(document, parse_path(path_text, field="answerPath"))
    if not found or answer is None:
        raise AgentCallFailed(f"no answer at {path_text!r} in the endpoint's reply")
    if not isinstance(answer, str):
        raise AgentCallFailed(
            f"the answer at {path_text!r} is {type(answer).__name__}, not a string"
        )
    input_tokens, output_tokens = _usage(document)
    model = document.get("model") if isinstance(document, dict) else None
    agent_name = document.get("agent_name") if isinstance(document, dict) else None
    return AgentReply(
        answer=answer,
        prompt_sent=sent,
        model=model if isinstance(model, str) and model else None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        latency_ms=latency_ms,
        agent_name=_agent_name(agent_name),
    )


MAX_AGENT_NAME_CHARS = 200


def _agent_name(value: object) -> str | None:
    """The reply's agent name when it is a usable one: a non-blank string, cut to 200
    characters; anything else is no name (the session then has none, never a guessed one)."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:MAX_AGENT_NAME_CHARS]


def _too_large(size: int) -> str:
    return f"response is larger than the 8 MiB cap (at least {size:,} bytes)"


def _usage(document: Any) -> tuple[int | None, int | None]:
    """Token usage when the reply carries it (OpenAI `usage` or the neens format's)."""
    usage = document.get("usage") if isinstance(document, dict) else None
    if not isinstance(usage, dict):
        return None, None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    return token_count(prompt), token_count(completion)


def _describe(exc: Exception) -> str:
    """The first line of the client's error; a URL it quotes (aiohttp names the request's URL,
    query string included, in an error about the reply) is shown without its secrets."""
    text = str(exc) or type(exc).__name__
    return excerpt(without_url_secrets(text.splitlines()[0]))
