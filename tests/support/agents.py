"""Real agent endpoints on loopback for push-mode tests: well-behaved, flaky, slow, dead,
oversize and garbage-returning, each at its own path of one uvicorn server.

    with agent_server({"Where is order 17?": "It shipped."}) as agents:
        url = agents.url("/chat")
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.live import free_port, serve_in_thread

DEFAULT_ANSWER = "I do not know."


@dataclass
class AgentServer:
    base: str
    answers: dict[str, str]
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """(path, JSON body) of every call received."""
    usage: dict[str, int] | None = None
    """Token usage to report on chat replies, if any."""

    def url(self, path: str) -> str:
        return f"{self.base}{path}"


def dead_url() -> str:
    """An address where nothing listens."""
    return f"http://127.0.0.1:{free_port()}/agent"


@contextmanager
def agent_server(
    answers: dict[str, str] | None = None, *, usage: dict[str, int] | None = None
) -> Iterator[AgentServer]:
    state = AgentServer("", dict(answers or {}), usage=usage)
    flaky = itertools.count()

    def answer(prompt: str) -> str:
        return state.answers.get(prompt, DEFAULT_ANSWER)

    async def chat(request: Request) -> Response:
        body = await request.json()
        state.requests.append(("/chat", body))
        prompt = body["messages"][-1]["content"]
        reply: dict[str, Any] = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body.get("model", "unknown"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer(prompt)},
                    "finish_reason": "stop",
                }
            ],
        }
        if state.usage is not None:
            reply["usage"] = state.usage
        return JSONResponse(reply)

    async def neens(request: Request) -> Response:
        body = await request.json()
        state.requests.append(("/neens", body))
        return JSONResponse({"output": answer(body["input"])})

    async def nested(request: Request) -> Response:
        body = await request.json()
        state.requests.append(("/nested", body))
        return JSONResponse({"data": {"answers": [{"text": answer(body["input"])}]}})

    async def flaky_endpoint(request: Request) -> Response:
        body = await request.json()
        state.requests.append(("/flaky", body))
        if next(flaky) % 2:
            return JSONResponse({"error": "overloaded"}, status_code=500)
        return JSONResponse({"output": answer(body["input"])})

    async def slow(request: Request) -> Response:
        state.requests.append(("/slow", await request.json()))
        await asyncio.sleep(5)
        return JSONResponse({"output": "too late"})

    async def error500(request: Request) -> Response:
        state.requests.append(("/500", await request.json()))
        return Response("internal error", status_code=500)

    async def garbage(request: Request) -> Response:
        state.requests.append(("/garbage", await request.json()))
        return Response(b"\x00\xffnot json", media_type="application/json")

    async def empty(request: Request) -> Response:
        state.requests.append(("/empty", await request.json()))
        return Response(b"", media_type="application/json")

    async def oversize(request: Request) -> Response:
        state.requests.append(("/oversize", await request.json()))
        return Response(
            b'{"output": "' + b"x" * (9 * 1024 * 1024) + b'"}', media_type="application/json"
        )

    async def no_answer(request: Request) -> Response:
        state.requests.append(("/no-answer", await request.json()))
        return JSONResponse({"result": "the answer is somewhere else"})

    app = Starlette(
        routes=[
            Route("/chat", chat, methods=["POST"]),
            Route("/neens", neens, methods=["POST"]),
            Route("/nested", nested, methods=["POST"]),
            Route("/flaky", flaky_endpoint, methods=["POST"]),
            Route("/slow", slow, methods=["POST"]),
            Route("/500", error500, methods=["POST"]),
            Route("/garbage", garbage, methods=["POST"]),
            Route("/empty", empty, methods=["POST"]),
            Route("/oversize", oversize, methods=["POST"]),
            Route("/no-answer", no_answer, methods=["POST"]),
        ]
    )
    with serve_in_thread(app) as server:
        state.base = server.url
        yield state
