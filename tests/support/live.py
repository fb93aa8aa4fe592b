"""Running an ASGI app under a real uvicorn server on loopback, in a background thread, and the
Neens app in process with its lifespan (workers included) for one test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from neens.api.app import create_app
from neens.settings import Settings
from neens.store.db import Database


@dataclass(frozen=True)
class LiveServer:
    url: str
    port: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_in_thread(app: Any, *, timeout: float = 20.0) -> Iterator[LiveServer]:
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the live server did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", port)
    finally:
        server.should_exit = True
        thread.join(timeout)


@asynccontextmanager
async def app_client(settings: Settings, db: Database) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the Neens app built from `settings` on `db`, started (its workers too) for the
    duration of the block."""
    app = create_app(settings, database=db)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            yield c
