"""A fake OpenAI-compatible chat-completions server on loopback, for testing LLM judges.

It stands in for an LLM provider, which cannot be reached offline (and whose replies could not be
scripted if it could). It is a real HTTP server (uvicorn in a thread, via `serve_in_thread`), so
the judge goes through the official `openai` client, its HTTP stack, retries and timeouts exactly
as it would against a provider; only the model is scripted.

    with fake_openai(reply='{"score": 0.9, "reason": "correct"}') as server:
        endpoint = LlmEndpoint(base_url=server.base_url, model="judge", api_key=None)
        ...
        assert server.requests[0].body["messages"][-1]["content"] == expected_prompt

`reply` is the assistant's text, a `Reply` (to send an error status, hang, return no choices or
an arbitrary body), or a callable from the request's JSON body to either.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.live import serve_in_thread


@dataclass(frozen=True)
class Reply:
    """One scripted response.

    - content: the assistant message's text (None sends `"content": null`).
    - status: an HTTP status; anything but 200 sends an OpenAI-style error body instead.
    - delay_s: seconds to wait before answering (a hang, when longer than the client's timeout;
      a waiting request is released as soon as the server is stopped).
    - no_choices: send `"choices": []`.
    - body: send this JSON body as is (status still applies), or raw text when it is a str.
    - retry_after_ms: sent on error statuses so the client's retries do not sleep for seconds.
    """

    content: str | None = ""
    status: int = 200
    delay_s: float = 0.0
    no_choices: bool = False
    body: Any = None
    retry_after_ms: int = 1


ReplyScript = str | Reply | Callable[[dict[str, Any]], "str | Reply"]


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received: its JSON body and its headers (lower-case names)."""

    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class FakeOpenAI:
    """The running server: where to reach it and what it was asked."""

    base_url: str
    requests: list[RecordedRequest] = field(default_factory=list)


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    choices = (
        []
        if reply.no_choices
        else [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ]
    )
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": choices,
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@contextmanager
def fake_openai(reply: ReplyScript = "") -> Iterator[FakeOpenAI]:
    """Run the fake on a free loopback port for the duration of the `with` block."""
    stopping = threading.Event()
    server: FakeOpenAI

    async def chat_completions(request: Request) -> Response:
        body = json.loads(await request.body())
        server.requests.append(RecordedRequest(body=body, headers=dict(request.headers)))
        scripted = reply(body) if callable(reply) else reply
        response = Reply(content=scripted) if isinstance(scripted, str) else scripted
        deadline = time.monotonic() + response.delay_s
        while time.monotonic() < deadline and not stopping.is_set():
            await asyncio.sleep(0.01)
        headers = {}
        if response.status != 200:
            headers["retry-after-ms"] = str(response.retry_after_ms)
        if isinstance(response.body, str):
            return Response(response.body, status_code=response.status, headers=headers)
        if response.body is not None:
            return JSONResponse(response.body, status_code=response.status, headers=headers)
        if response.status != 200:
            error = {
                "error": {
                    "message": f"scripted failure with status {response.status}",
                    "type": "server_error",
                    "code": None,
                }
            }
            return JSONResponse(error, status_code=response.status, headers=headers)
        return JSONResponse(_completion(body, response))

    app = Starlette(routes=[Route("/v1/chat/completions", chat_completions, methods=["POST"])])
    with serve_in_thread(app) as live:
        server = FakeOpenAI(base_url=f"{live.url}/v1")
        try:
            yield server
        finally:
            stopping.set()
