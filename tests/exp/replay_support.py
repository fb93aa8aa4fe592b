"""For the `exp replay` / `exp ab` tests: traces ingested for real, and a stand-in provider.

The stand-in provider is a real HTTP server on loopback that speaks the two wire formats the
replay uses, OpenAI Chat Completions (`POST /v1/chat/completions`) and Anthropic Messages
(`POST /v1/messages`). It does not think: each model answers by a script (`Script`), and every
request it receives is kept so a test can read exactly what was sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from neens.api.app import create_app
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import create_key
from tests.support.otlp import export_request, span

RECORDED_SYSTEM = "You are the support agent of Acme. Look orders up before answering."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Find an order by its number",
            "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}},
        },
    }
]


def genai_call(trace: bytes, span_id: bytes, parent: bytes, start_ms: int, **extra: Any) -> Any:
    """A chat call traced with the OpenTelemetry GenAI conventions: the system prompt, a user
    question, and a reply that calls `lookup_order`."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 40,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": RECORDED_SYSTEM}]),
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "Where is order 17?"}]}]
        ),
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool_call",
                            "id": "call_a1",
                            "name": "lookup_order",
                            "arguments": {"number": 17},
                        }
                    ],
                }
            ]
        ),
        "gen_ai.tool.definitions": json.dumps(TOOLS),
        **extra,
    }
    return span(trace, span_id, "chat gpt-4o", parent=parent, start_ms=start_ms, **attributes)


def openinference_call(trace: bytes, span_id: bytes, parent: bytes, start_ms: int) -> Any:
    """The follow-up call traced with OpenInference's flattened attributes: the conversation
    so far, the tool's result, and a text reply."""
    m = "llm.input_messages"
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o",
        "llm.provider": "openai",
        "llm.token_count.prompt": 1300,
        "llm.token_count.completion": 25,
        "llm.invocation_parameters": json.dumps({"temperature": 0.2, "max_tokens": 300}),
        f"{m}.0.message.role": "system",
        f"{m}.0.message.content": RECORDED_SYSTEM,
        f"{m}.1.message.role": "user",
        f"{m}.1.message.content": "Where is order 17?",
        f"{m}.2.message.role": "assistant",
        f"{m}.2.message.tool_calls.0.tool_call.id": "call_a1",
        f"{m}.2.message.tool_calls.0.tool_call.function.name": "lookup_order",
        f"{m}.2.message.tool_calls.0.tool_call.function.arguments": '{"number": 17}',
        f"{m}.3.message.role": "tool",
        f"{m}.3.message.tool_call_id": "call_a1",
        f"{m}.3.message.content": '{"status": "shipped", "on": "3 June"}',
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Order 17 shipped on 3 June.",
        "llm.tools.0.tool.json_schema": json.dumps(TOOLS[0]),
    }
    return span(trace, span_id, "ChatCompletion", parent=parent, start_ms=start_ms, **attributes)


def agent_turn(trace: bytes | None = None) -> tuple[bytes, list[Any]]:
    """One turn of a support agent: a root span, the call that looks the order up, the tool,
    and the call that answers."""
    trace = trace or os.urandom(16)
    root, first, tool, second = (
        bytes.fromhex(h)
        for h in ("1f2e3d4c5b6a7988", "846c7980db841642", "2a2b2c2d2e2f3031", "9d8c7b6a59483726")
    )
    spans = [
        span(
            trace,
            root,
            "agent.run",
            end_ms=900,
            **{"openinference.span.kind": "AGENT", "input.value": "Where is order 17?"},
        ),
        genai_call(trace, first, root, 10),
        span(trace, tool, "lookup_order", parent=root, start_ms=320, end_ms=400),
        openinference_call(trace, second, root, 410),
    ]
    return trace, spans


def ingest(database_url: str, turns: list[list[Any]]) -> str:
    """POST each turn to /v1/traces of the real app, as an agent's exporter does; the project
    id."""

    async def run() -> str:
        db = Database(database_url)
        try:
            key = await create_key(db, company="Acme", project="Support agent", role="ingest")
            app = create_app(
                Settings(database_url=database_url, migrate_on_start=False), database=db
            )
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                    for spans in turns:
                        r = await c.post(
                            "/v1/traces",
                            content=export_request(spans).SerializeToString(),
                            headers={
                                "Authorization": f"Bearer {key.key}",
                                "Content-Type": "application/x-protobuf",
                            },
                        )
                        assert r.status_code == 200, r.text
            return key.project_id
        finally:
            await db.dispose()

    return asyncio.run(run())


@dataclass
class Script:
    """How the stand-in answers: per model in `tool`, that tool is called while the last
    message is the user's and text is said once a tool has answered (as an agent's model does);
    any other model always says text. `fail` answers a model with an HTTP status instead;
    `judge` is the score "judge-model" gives."""

    tool: dict[str, str] = field(default_factory=dict)
    fail: dict[str, int] = field(default_factory=dict)
    judge: float = 1.0


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class StandIn:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.received: list[Received] = []
        self.lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with stand_in.lock:
                    stand_in.received.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                status, reply = stand_in.answer(self.path, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        model = body["model"]
        if model in self.script.fail:
            return self.script.fail[model], {"error": {"message": f"{model} is unavailable"}}
        if path == "/v1/messages":
            last = body["messages"][-1]["content"]
            answered = any(block.get("type") == "tool_result" for block in last)
            tool = None if answered else self.script.tool.get(model)
            content: list[dict[str, Any]] = (
                [{"type": "tool_use", "id": "toolu_1", "name": tool, "input": {"number": 17}}]
                if tool
                else [{"type": "text", "text": "Let me think about order 17."}]
            )
            usage = {"input_tokens": 1000, "output_tokens": 30}
            return 200, {"type": "message", "model": model, "content": content, "usage": usage}
        if path != "/v1/chat/completions":
            return 404, {"error": {"message": f"no route {path}"}}
        if model == "judge-model":
            text = json.dumps({"score": self.script.judge, "reason": "meets the criterion"})
            message: dict[str, Any] = {"role": "assistant", "content": text}
        elif body["messages"][-1]["role"] == "user" and (tool := self.script.tool.get(model)):
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_x",
                        "type": "function",
                        "function": {"name": tool, "arguments": '{"number": 17}'},
                    }
                ],
            }
        else:
            message = {"role": "assistant", "content": "Order 17 shipped on 3 June."}
        usage = {"prompt_tokens": 1000, "completion_tokens": 30}
        return 200, {"model": model, "choices": [{"message": message}], "usage": usage}

    def sent(self, model: str) -> list[Received]:
        return [r for r in self.received if r.body.get("model") == model]


def serve(script: Script) -> Iterator[StandIn]:
    stand_in = StandIn(script)
    thread = threading.Thread(target=stand_in.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        stand_in.server.shutdown()
        stand_in.server.server_close()
