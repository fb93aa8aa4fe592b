"""A stand-in for the Neens server's documented wire contract, for the neens-eval tests.

`FakeNeens` runs a tiny `http.server` on 127.0.0.1 with scripted JSON replies: JSON bodies,
`{"error": {"code", "message", "field"?}}` error bodies, the /datasets routes. It lets the tests
check request shape, retries and error mapping with the standard library alone; end-to-end tests
against the real server are written separately. (The name is unique on purpose: test helper
modules share one import namespace with the rest of the repository's tests.)
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int
    body: Any = None
    raw: bytes | None = None
    """Sent as-is instead of `body` encoded as JSON."""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering, to make the client time out."""


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


class FakeNeens:
    """Scripted replies per (method, path); each request is recorded.

    Replies queued for a route are used in order, and the last one keeps being used, so
    `reply("GET", "/x", Reply(503), Reply(503), Reply(200, {...}))` fails twice then succeeds.
    A route with no replies answers 404 in the server's error shape.
    """

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._routes: dict[tuple[str, str], list[Reply]] = {}
        self._lock = threading.Lock()
        self.url = ""

    def reply(self, method: str, path: str, *replies: Reply) -> None:
        self._routes[(method, path)] = list(replies)

    def next_reply(self, method: str, path: str) -> Reply:
        with self._lock:
            queue = self._routes.get((method, path))
            if not queue:
                return Reply(404, {"error": {"code": "not_found", "message": f"no {path}"}})
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def paths(self) -> list[str]:
        return [f"{request.method} {request.path}" for request in self.requests]


def _handler_for(fake: FakeNeens) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            split = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            fake.requests.append(
                Recorded(
                    method=self.command,
                    path=split.path,
                    query=urllib.parse.parse_qs(split.query),
                    headers={key.lower(): value for key, value in self.headers.items()},
                    body=json.loads(raw) if raw else None,
                )
            )
            reply = fake.next_reply(self.command, split.path)
            if reply.delay:
                time.sleep(reply.delay)
            payload = reply.raw if reply.raw is not None else b""
            if reply.raw is None and reply.body is not None:
                payload = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (timeout test); nothing to answer

        do_GET = do_POST = do_PUT = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out closes its socket; that is the point of those tests


@contextmanager
def running_fake_neens(fake: FakeNeens | None = None, *, port: int = 0) -> Iterator[FakeNeens]:
    """Serve `fake` (a new one by default) on `port` (any free one by default), so a test can
    also stop a server and start it again on the same port, as a restart does."""
    fake = fake if fake is not None else FakeNeens()
    server = _QuietServer(("127.0.0.1", port), _handler_for(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
