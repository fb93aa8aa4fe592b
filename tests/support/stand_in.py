"""A stand-in for a third-party HTTP API (GitHub, GitLab): a real HTTP server on loopback, in a
thread, whose answers a test writes as one function of the request."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class StandInRequest:
    method: str
    path: str
    """As sent, query string included."""
    headers: Message
    """Read case-insensitively, as HTTP headers are."""
    body: bytes


Answer = tuple[int, Any]
"""A status and a JSON document."""


@contextmanager
def stand_in_server(answer: Callable[[StandInRequest], Answer]) -> Iterator[str]:
    """Serve `answer` on a free loopback port for the block; yields the server's base URL."""

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            request = StandInRequest(self.command, self.path, self.headers, body)
            status, document = answer(request)
            payload = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
