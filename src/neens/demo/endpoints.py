"""Simulated endpoints: stand-ins for what cannot be had offline, speaking the real wire format.

A model provider cannot be reached offline, and an agent is the user's own code; neither could be
told to fail on the third call if it could. These are real HTTP servers on loopback (a raw ASGI
app under uvicorn), so whatever calls them goes through its own HTTP stack, retries and timeouts
exactly as it would against the real thing; only the answers are scripted.

    agent = steady({"Where is order 17?": "It shipped."}, latency_s=0.05)
    with serve(agent, flaky(fraction=0.5), judge('{"score": 1}')) as server:
        agent.url               # POST {"input": ...} here, get {"output": ...} back
        agent.call_count        # what it was asked, for assertions (also GET /_calls)

Each endpoint sits at its own path of one server and keeps its own calls:

- `Agent` answers by input, in the `neens`, `nested` or OpenAI `chat` shape, after a fixed
  latency, failing the first N calls or a fraction of them (`steady`, `flaky`, `priced`,
  `unpriced`); `agent_suite` mounts one of each behaviour at the paths the tests use.
- `ChatModel` is an OpenAI-compatible `/v1/chat/completions` endpoint: an LLM judge (`judge`).
- `Fixed` sends the same reply every time: `slow`, `server_error`, `garbage`, `empty`,
  `oversize`, `wrong_shape`.
- `Scripted` answers any other path from queues of replies per method and path.
- `refused_url` is an address where nothing listens; `hang_up_server` accepts and closes.

`serve` runs a server in a background thread for the duration of a `with` block (`serve_one`
for a single endpoint); `run` runs one in the foreground, for a process of its own (a benchmark,
`neens demo`).

It is one module of some 700 lines on purpose: tests, benchmarks and `neens demo` import one
thing, and the behaviours change together with the server that plays them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

DEFAULT_ANSWER = "I do not know."
"""What an agent answers to an input it has no answer for."""
PRICED_MODEL = "gpt-4o-mini"
"""A model with a public price, so usage reported for it has a cost."""
UNPRICED_MODEL = "neens-simulated-model"
"""A model no price list knows, so usage reported for it is unpriced."""
DEFAULT_USAGE: Mapping[str, int] = {
    "prompt_tokens": 1000,
    "completion_tokens": 400,
    "total_tokens": 1400,
}
JUDGE_USAGE: Mapping[str, int] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
CALLS_PATH = "/_calls"
"""GET answers `{"total": n, "paths": {path: n}}`: the counts of a server in another process."""
HEALTH_PATH = "/healthz"
JSON_LABEL: Mapping[str, str] = {"content-type": "application/json"}

E = TypeVar("E", bound="Endpoint")

Wire = Literal["neens", "nested", "chat"]
"""How an agent's answer travels: `{"output"}`, `{"data": {"answers": [{"text"}]}}`, or an
OpenAI chat completion whose prompt is the last message's content."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass(frozen=True)
class Call:
    """One request an endpoint received. `body` is the parsed JSON, or None when the body was
    empty or not JSON (`raw` has the bytes either way); header names are lower-case."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw: bytes
    body: Any


@dataclass(frozen=True)
class Reply:
    """One HTTP answer. `body` is sent as JSON (labelled so), except str and bytes, which are
    sent as they are with only the content type `headers` give (None sends an empty body).
    `delay_s` is waited before answering, on top of the endpoint's latency; a waiting request is
    released as soon as its server stops."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    def encoded(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


def chat_completion(
    content: str | None,
    *,
    model: str,
    usage: Mapping[str, int] | None = None,
    finish_reason: str = "stop",
    message: Mapping[str, Any] | None = None,
    choices: list[Any] | None = None,
) -> dict[str, Any]:
    """An OpenAI `chat.completion` object: one assistant `message` (by default one with
    `content`), or the `choices` given as they are."""
    if choices is None:
        reply = dict(message) if message is not None else {"role": "assistant", "content": content}
        choices = [{"index": 0, "message": reply, "finish_reason": finish_reason, "logprobs": None}]
    completion: dict[str, Any] = {
        "id": "chatcmpl-simulated",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        completion["usage"] = dict(usage)
    return completion


def openai_error(status: int, message: str) -> Reply:
    """An error in OpenAI's shape, with a `retry-after-ms` the client's retries honour, so a
    retried call does not sleep for seconds."""
    body = {"error": {"message": message, "type": "server_error", "code": None}}
    return Reply(status, body, headers={"retry-after-ms": "1"})


class Endpoint:
    """One simulated endpoint at `path` of a server. The server records each call in `calls`
    before asking `respond` for the reply, then waits `latency_s` plus the reply's own delay."""

    default_path: ClassVar[str] = "/agent"

    def __init__(self, *, path: str | None = None, latency_s: float = 0.0) -> None:
        self.path = path or self.default_path
        self.latency_s = latency_s
        self.calls: list[Call] = []
        self.url = ""
        """Where to reach it, once served."""

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def respond(self, call: Call) -> Reply:
        raise NotImplementedError


class Agent(Endpoint):
    """An agent answering by input: `answers[input]` (a dict stays shared, so a test can change
    an answer mid-run), or `answers(input)`, else `default`.

    Failures, answered 500: the first `fail_first` calls, then `fail_fraction` of the rest spread
    evenly (0.5 fails every second call, starting with the second). With `wire="chat"` the reply
    is a chat completion reporting `model` (else the requested one) and `usage`, if given.
    """

    def __init__(
        self,
        answers: Mapping[str, str] | Callable[[str], str] | None = None,
        *,
        wire: Wire = "neens",
        path: str | None = None,
        latency_s: float = 0.0,
        default: str = DEFAULT_ANSWER,
        fail_first: int = 0,
        fail_fraction: float = 0.0,
        model: str | None = None,
        usage: Mapping[str, int] | None = None,
        agent_name: str | Callable[[str], str | None] | None = None,
    ) -> None:
        super().__init__(path=path, latency_s=latency_s)
        self.agent_name = agent_name
        """Put in each reply as `agent_name` (a callable gets the prompt); None: no name."""
        if not 0.0 <= fail_fraction <= 1.0:
            raise ValueError("fail_fraction is a fraction of calls, from 0 to 1")
        self.answers = answers if answers is not None else {}
        self.wire = wire
        self.default = default
        self.fail_first = fail_first
        self.fail_fraction = fail_fraction
        self.model = model
        self.usage = usage

    def answer(self, prompt: str) -> str:
        if callable(self.answers):
            return self.answers(prompt)
        return self.answers.get(prompt, self.default)

    def fails(self, index: int) -> bool:
        """Whether the call with this 0-based index fails."""
        if index < self.fail_first:
            return True
        later = index - self.fail_first
        return int((later + 1) * self.fail_fraction) > int(later * self.fail_fraction)

    def respond(self, call: Call) -> Reply:
        prompt = self._prompt(call.body)
        if prompt is None:
            expected = "messages" if self.wire == "chat" else "input"
            return Reply(400, {"error": f"bad request: no string {expected!r}"})
        if self.fails(len(self.calls) - 1):
            return Reply(500, {"error": "overloaded"})
        text = self.answer(prompt)
        name = self.agent_name(prompt) if callable(self.agent_name) else self.agent_name
        named = {} if name is None else {"agent_name": name}
        if self.wire == "nested":
            return Reply(200, {"data": {"answers": [{"text": text}]}, **named})
        if self.wire == "chat":
            model = self.model or str(call.body.get("model", "unknown"))
            return Reply(200, {**chat_completion(text, model=model, usage=self.usage), **named})
        return Reply(200, {"output": text, **named})

    def _prompt(self, body: Any) -> str | None:
        if not isinstance(body, dict):
            return None
        if self.wire != "chat":
            prompt = body.get("input")
            return prompt if isinstance(prompt, str) else None
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
            return None
        content = messages[-1].get("content")
        return content if isinstance(content, str) else None


ChatReply = str | None | Reply
ChatScript = ChatReply | Callable[[dict[str, Any]], ChatReply]


class ChatModel(Endpoint):
    """An OpenAI-compatible chat-completions endpoint, for an LLM judge or any OpenAI client.

    `reply` is the assistant's text (None sends `"content": null`), a `Reply` sent as it is, or
    a callable from the request's JSON body to either. A `Reply` with an error status and no body
    gets OpenAI's error body. Point a client at `base_url` (it ends in `/v1`).
    """

    default_path = "/v1/chat/completions"

    def __init__(
        self,
        reply: ChatScript = "",
        *,
        path: str | None = None,
        latency_s: float = 0.0,
        model: str | None = None,
        usage: Mapping[str, int] | None = JUDGE_USAGE,
    ) -> None:
        super().__init__(path=path, latency_s=latency_s)
        self.script = reply
        self.model = model
        self.usage = usage

    @property
    def base_url(self) -> str:
        return self.url.removesuffix("/chat/completions")

    def respond(self, call: Call) -> Reply:
        if not isinstance(call.body, dict):
            return openai_error(400, "the request body is not a JSON object")
        scripted = self.script(call.body) if callable(self.script) else self.script
        if isinstance(scripted, Reply):
            if scripted.status != 200 and scripted.body is None:
                error = openai_error(scripted.status, f"simulated failure {scripted.status}")
                return Reply(scripted.status, error.body, error.headers, scripted.delay_s)
            if scripted.status != 200 and "retry-after-ms" not in scripted.headers:
                headers = {**scripted.headers, "retry-after-ms": "1"}
                return Reply(scripted.status, scripted.body, headers, scripted.delay_s)
            return scripted
        model = self.model or str(call.body.get("model", "simulated-model"))
        return Reply(200, chat_completion(scripted, model=model, usage=self.usage))


class Fixed(Endpoint):
    """The same reply to every call."""

    def __init__(self, reply: Reply, *, path: str | None = None, latency_s: float = 0.0) -> None:
        super().__init__(path=path, latency_s=latency_s)
        self.reply = reply

    def respond(self, call: Call) -> Reply:
        return self.reply


class Scripted(Endpoint):
    """Scripted replies per (method, path), for every path the server has no other endpoint at.

    Replies queued for a route are used in order and the last one keeps being used, so
    `reply("GET", "/x", Reply(503), Reply(503), Reply(200, {...}))` fails twice then succeeds.
    A route with no replies answers 404 in Neens' error shape. Its `url` is the server's base.
    """

    default_path = "*"

    def __init__(self, *, latency_s: float = 0.0) -> None:
        super().__init__(path=self.default_path, latency_s=latency_s)
        self._routes: dict[tuple[str, str], list[Reply]] = {}
        self._lock = threading.Lock()

    def reply(self, method: str, path: str, *replies: Reply) -> None:
        with self._lock:
            self._routes[(method, path)] = list(replies)

    def respond(self, call: Call) -> Reply:
        with self._lock:
            queue = self._routes.get((call.method, call.path))
            if not queue:
                error = {"code": "not_found", "message": f"no {call.path}"}
                return Reply(404, {"error": error})
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def paths(self) -> list[str]:
        return [f"{call.method} {call.path}" for call in self.calls]


# ---------------------------------------------------------------------------------------------
# Behaviours by name
# ---------------------------------------------------------------------------------------------


def steady(
    answers: Mapping[str, str] | Callable[[str], str] | None = None,
    *,
    path: str = "/agent",
    latency_s: float = 0.0,
    wire: Wire = "neens",
) -> Agent:
    """An agent that always answers, after `latency_s`."""
    return Agent(answers, path=path, latency_s=latency_s, wire=wire)


def flaky(
    answers: Mapping[str, str] | Callable[[str], str] | None = None,
    *,
    fraction: float = 0.5,
    first: int = 0,
    path: str = "/flaky",
    latency_s: float = 0.0,
) -> Agent:
    """An agent answering 500 to its first `first` calls and `fraction` of the others."""
    return Agent(answers, path=path, latency_s=latency_s, fail_first=first, fail_fraction=fraction)


def priced(
    answers: Mapping[str, str] | Callable[[str], str] | None = None,
    *,
    usage: Mapping[str, int] = DEFAULT_USAGE,
    path: str = "/priced",
) -> Agent:
    """A chat-format agent reporting `usage` for a model with a known price."""
    return Agent(answers, wire="chat", path=path, model=PRICED_MODEL, usage=usage)


def unpriced(
    answers: Mapping[str, str] | Callable[[str], str] | None = None,
    *,
    usage: Mapping[str, int] = DEFAULT_USAGE,
    path: str = "/unpriced",
) -> Agent:
    """A chat-format agent reporting `usage` for a model no price list knows."""
    return Agent(answers, wire="chat", path=path, model=UNPRICED_MODEL, usage=usage)


def judge(reply: ChatScript = '{"score": 1, "reason": "correct"}', **kwargs: Any) -> ChatModel:
    """An OpenAI-compatible LLM judge giving `reply` (see `ChatModel`)."""
    return ChatModel(reply, **kwargs)


def slow(seconds: float = 5.0, *, path: str = "/slow") -> Fixed:
    """Answers, too late for any sensible timeout."""
    return Fixed(Reply(200, {"output": "too late"}, delay_s=seconds), path=path)


def server_error(*, path: str = "/500") -> Fixed:
    """A plain-text HTTP 500."""
    return Fixed(Reply(500, "internal error", {"content-type": "text/plain"}), path=path)


def garbage(*, path: str = "/garbage") -> Fixed:
    """A 200 labelled JSON whose body is not JSON, nor even text: a NUL and an invalid byte."""
    return Fixed(Reply(200, b"\x00\xffnot json", JSON_LABEL), path=path)


def empty(*, path: str = "/empty") -> Fixed:
    """A 200 labelled JSON with an empty body."""
    return Fixed(Reply(200, b"", JSON_LABEL), path=path)


def oversize(mib: int = 9, *, path: str = "/oversize") -> Fixed:
    """A well-formed answer of `mib` MiB."""
    return Fixed(Reply(200, b'{"output": "' + b"x" * (mib * 1024 * 1024) + b'"}'), path=path)


def wrong_shape(*, path: str = "/no-answer") -> Fixed:
    """Valid JSON without the answer where the `neens` shape puts it."""
    return Fixed(Reply(200, {"result": "the answer is somewhere else"}), path=path)


def agent_suite(
    answers: dict[str, str] | None = None, *, usage: Mapping[str, int] | None = None
) -> list[Endpoint]:
    """One endpoint per behaviour, sharing `answers`: /neens, /chat (reporting `usage`),
    /nested, /flaky, /slow, /500, /garbage, /empty, /oversize and /no-answer."""
    shared = answers if answers is not None else {}
    return [
        Agent(shared, path="/neens"),
        Agent(shared, path="/chat", wire="chat", usage=usage),
        Agent(shared, path="/nested", wire="nested"),
        flaky(shared),
        slow(),
        server_error(),
        garbage(),
        empty(),
        oversize(),
        wrong_shape(),
    ]


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------


class SimulatedServer:
    """The ASGI app serving `endpoints`, each at its path (a `Scripted` one takes the rest).
    GET /healthz and GET /_calls answer unless an endpoint has those paths."""

    def __init__(self, *endpoints: Endpoint) -> None:
        self.endpoints = {e.path: e for e in endpoints if not isinstance(e, Scripted)}
        scripted = [e for e in endpoints if isinstance(e, Scripted)]
        if len(scripted) > 1 or len(self.endpoints) + len(scripted) != len(endpoints):
            raise ValueError("two endpoints share a path")
        self.fallback = scripted[0] if scripted else None
        self.calls: list[Call] = []
        """Every call to every endpoint, in the order they arrived."""
        self.base_url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: set[asyncio.Future[None]] = set()
        self._stopped = False

    def url(self, path: str = "") -> str:
        return f"{self.base_url}{path}"

    def bind(self, base_url: str) -> None:
        self.base_url = base_url
        for endpoint in self.endpoints.values():
            endpoint.url = f"{base_url}{endpoint.path}"
        if self.fallback is not None:
            self.fallback.url = base_url

    def stop_waiting(self) -> None:
        """Release every request waiting out a delay (called from any thread)."""
        self._stopped = True
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._release)
            except RuntimeError:
                pass  # the loop is already closed: nothing is waiting

    def _release(self) -> None:
        for waiting in self._waiting:
            _resolve(waiting)

    async def _wait(self, seconds: float) -> None:
        """`asyncio.sleep`, but over as soon as the server stops (and as cheap: a benchmark's
        endpoint waits out its latency on every call)."""
        loop = asyncio.get_running_loop()
        waiting: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(seconds, _resolve, waiting)
        self._waiting.add(waiting)
        if self._stopped:
            waiting.set_result(None)
        try:
            await waiting
        finally:
            timer.cancel()
            self._waiting.discard(waiting)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        if raw is None:
            return  # the client left before sending its request
        method, path = scope["method"], scope["path"]
        endpoint = self.endpoints.get(path)
        if endpoint is None and method == "GET" and path in (HEALTH_PATH, CALLS_PATH):
            await _send(send, Reply(200, self._counts() if path == CALLS_PATH else {"ok": True}))
            return
        endpoint = endpoint or self.fallback
        if endpoint is None:
            await _send(send, Reply(404, {"error": {"code": "not_found", "message": path}}))
            return
        call = _call(scope, raw)
        endpoint.calls.append(call)
        self.calls.append(call)
        reply = endpoint.respond(call)
        wait = endpoint.latency_s + reply.delay_s
        if wait > 0:
            await self._wait(wait)
        await _send(send, reply)

    def _counts(self) -> dict[str, Any]:
        paths = {path: e.call_count for path, e in self.endpoints.items()}
        if self.fallback is not None:
            paths["*"] = self.fallback.call_count
        return {"total": len(self.calls), "paths": paths}


def _resolve(waiting: asyncio.Future[None]) -> None:
    if not waiting.done():
        waiting.set_result(None)


def _call(scope: Scope, raw: bytes) -> Call:
    query = scope.get("query_string", b"")
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    return Call(
        method=scope["method"],
        path=scope["path"],
        query=urllib.parse.parse_qs(query.decode("latin-1")) if query else {},
        headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
        raw=raw,
        body=body,
    )


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client disconnected first."""
    chunks: list[bytes] = []
    more_body = True
    while more_body:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        more_body = message.get("more_body", False)
    return b"".join(chunks)


async def _send(send: Send, reply: Reply) -> None:
    body = reply.encoded()
    raw = reply.body is None or isinstance(reply.body, str | bytes)
    headers = {} if raw else {"content-type": "application/json"}
    headers.update((k.lower(), v) for k, v in reply.headers.items())
    headers["content-length"] = str(len(body))
    await send(
        {
            "type": "http.response.start",
            "status": reply.status,
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _listening_socket(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # so a restart can take it again
    sock.bind(("127.0.0.1", port))
    return sock


@contextmanager
def serve(
    *endpoints: Endpoint, port: int = 0, startup_timeout_s: float = 20.0
) -> Iterator[SimulatedServer]:
    """Serve `endpoints` on 127.0.0.1:`port` (any free one by default) from a background thread,
    for the duration of the `with` block. Endpoints keep their calls after it, and can be served
    again (on the same port, as a restart does)."""
    import uvicorn

    app = SimulatedServer(*endpoints)
    sock = _listening_socket(port)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    try:
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the simulated endpoints did not start")
            time.sleep(0.01)
        app.bind(f"http://127.0.0.1:{sock.getsockname()[1]}")
        yield app
    finally:
        app.stop_waiting()
        server.should_exit = True
        thread.join(startup_timeout_s)
        sock.close()


@contextmanager
def serve_one(endpoint: E, *, port: int = 0) -> Iterator[E]:
    """`serve` for a single endpoint, yielding the endpoint itself."""
    with serve(endpoint, port=port):
        yield endpoint


def run(*endpoints: Endpoint, port: int) -> None:
    """Serve `endpoints` on 127.0.0.1:`port` in the foreground until interrupted: the same call
    `neens serve` makes (uvicorn, one worker, its default event loop and HTTP parser)."""
    import uvicorn

    uvicorn.run(SimulatedServer(*endpoints), host="127.0.0.1", port=port, log_level="warning")


# ---------------------------------------------------------------------------------------------
# Dead endpoints
# ---------------------------------------------------------------------------------------------


def refused_url(path: str = "/agent") -> str:
    """An address where nothing listens: connecting is refused at once."""
    with _listening_socket(0) as sock:
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


@dataclass
class HangUp:
    """A server that accepts each connection and closes it without a word."""

    url: str
    call_count: int = 0
    """Connections accepted and closed."""


@contextmanager
def hang_up_server(path: str = "/agent") -> Iterator[HangUp]:
    """Run a `HangUp` server for the duration of the `with` block."""
    sock = _listening_socket(0)
    sock.listen()
    sock.settimeout(0.05)
    state = HangUp(f"http://127.0.0.1:{sock.getsockname()[1]}{path}")
    stopping = threading.Event()

    def accept() -> None:
        while not stopping.is_set():
            try:
                connection, _ = sock.accept()
            except TimeoutError:
                continue
            with connection:
                state.call_count += 1
                connection.settimeout(1.0)
                try:
                    connection.recv(65536)  # the request line, so the client sees it was read
                    # The rest of the request too (a body may come in a later packet): closing
                    # with unread bytes would reset the connection instead of ending it.
                    connection.settimeout(0.2)
                    while connection.recv(65536):
                        pass
                except OSError:
                    pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stopping.set()
        thread.join(5.0)
        sock.close()
