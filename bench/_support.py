"""What the benchmarks share: a temp workspace with a Neens database, server processes started,
health-checked and stopped, an API key, the stand-in server's ASGI plumbing, a load loop over
one httpx client, rows written in bulk straight through the database driver, and the machine
report.

The scripts run as `python bench/<name>.py`, which puts bench/ on sys.path, so they
`import _support`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
from rich.console import Console
from sqlalchemy import create_engine, text

from neens.secrets import generate_key

STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
LOAD_WARNING = 0.5
"""1-min load average above which a run warns that the machine is not quiet."""

console = Console(highlight=False)

# ---------------------------------------------------------------------------------------------
# Stand-in servers: raw ASGI callables, run by the benchmark's own file under uvicorn
# ---------------------------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


async def respond(
    send: Send, status: int, body: bytes, content_type: bytes = b"application/json"
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def handle_common(scope: Scope, receive: Receive, send: Send) -> bool:
    """Answers the lifespan protocol, ignores non-HTTP scopes and answers GET /healthz with 200
    (so the harness waits for every target the same way). True if it did any of these, and the
    app has nothing left to do."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return True
    if scope["type"] != "http":
        return True
    if scope["method"] == "GET" and scope["path"] == "/healthz":
        await respond(send, 200, b'{"status":"ok"}')
        return True
    return False


def run_asgi(app: App, port: int) -> int:
    import uvicorn

    # The same call `neens serve` makes: uvicorn.run with one worker and default loop/http.
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    return 0


# ---------------------------------------------------------------------------------------------
# Server processes
# ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    name: str
    url: str
    log_path: Path
    popen: subprocess.Popen[bytes]

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"

    def stop(self) -> None:
        if self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(STOP_TIMEOUT_S)


def start_server(
    name: str, cmd: list[str], port: int, workdir: Path, env: dict[str, str]
) -> ServerProcess:
    log_path = workdir / f"{name.lower()}.log"
    with log_path.open("wb") as log:
        popen = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches only the harness, which stops it cleanly.
        )
    return ServerProcess(name, f"http://127.0.0.1:{port}", log_path, popen)


def wait_healthy(server: ServerProcess, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if server.popen.poll() is not None:
            raise RuntimeError(
                f"{server.name} exited with code {server.popen.returncode} during startup:\n"
                f"{server.log_tail()}"
            )
        try:
            response = httpx.get(f"{server.url}/healthz", timeout=2.0)
            if response.status_code == 200:
                return
            last_error = f"HTTP {response.status_code}: {response.text[:200]}"
        except httpx.HTTPError as exc:
            last_error = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)
    raise RuntimeError(
        f"{server.name} was not healthy after {timeout_s:.0f}s ({last_error}):\n{server.log_tail()}"
    )


def create_api_key(database_url: str, workdir: Path, env: dict[str, str]) -> str:
    cmd = [
        sys.executable,
        "-m",
        "neens_eval",
        "keys",
        "create",
        "--company",
        "Bench",
        "--project",
        "Bench",
        "--role",
        "admin",
        "--json",
        "--database-url",
        database_url,
    ]
    done = subprocess.run(
        cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        stderr_tail = "\n".join(done.stderr.splitlines()[-15:])
        raise RuntimeError(f"`neens keys create` failed ({done.returncode}):\n{stderr_tail}")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return str(json.loads(line)["key"])
    raise RuntimeError(f"`neens keys create --json` printed no JSON:\n{done.stdout}")


def neens_serve_command(port: int, database_url: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "neens_eval",
        "serve",
        "--port",
        str(port),
        "--database-url",
        database_url,
        "--log-level",
        "warning",
    ]


@dataclass
class Workspace:
    """A temp dir for logs and NEENS_HOME, the database URL, and the servers started in it."""

    workdir: Path
    database_url: str
    env: dict[str, str]
    servers: list[ServerProcess] = field(default_factory=list)

    @property
    def db_label(self) -> str:
        return self.database_url.split("://", 1)[0]

    def create_api_key(self) -> str:
        return create_api_key(self.database_url, self.workdir, self.env)

    def start(
        self, name: str, cmd: list[str], port: int, env: dict[str, str] | None = None
    ) -> ServerProcess:
        server = start_server(name, cmd, port, self.workdir, self.env if env is None else env)
        self.servers.append(server)
        return server

    def start_script(self, name: str, script: str, args: list[str], port: int) -> ServerProcess:
        """Runs `script` (a benchmark's own file) again with `args`, as the stand-in server."""
        return self.start(name, [sys.executable, str(Path(script).resolve()), *args], port)

    def start_neens(self, port: int, env: dict[str, str] | None = None) -> ServerProcess:
        return self.start("Neens", neens_serve_command(port, self.database_url), port, env)

    def wait_healthy(self) -> None:
        for server in self.servers:
            wait_healthy(server)


@contextmanager
def workspace(database_url: str | None) -> Iterator[Workspace]:
    """A fresh temp dir (and a SQLite file in it unless `database_url` is given); on the way out,
    every server started in it is stopped, then the dir is removed."""
    with tempfile.TemporaryDirectory(prefix="neens-bench-") as tmp:
        workdir = Path(tmp)
        ws = Workspace(
            workdir=workdir,
            database_url=database_url or f"sqlite:///{workdir / 'neens.db'}",
            env={
                # The key encrypting stored secrets: required on PostgreSQL, shared by all servers.
                "NEENS_SECRET_KEYS": generate_key(),
                **os.environ,
                "NEENS_HOME": str(workdir / "home"),
                "PYTHONUNBUFFERED": "1",
            },
        )
        try:
            yield ws
        finally:
            for server in reversed(ws.servers):
                server.stop()


def add_database_url_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        metavar="URL",
        default=None,
        help="database for the Neens server (default: a fresh SQLite file in a temp dir); "
        "it must be empty or a Neens database, and the run adds rows to it",
    )


# ---------------------------------------------------------------------------------------------
# Databases: emptied, their project found, rows written in bulk through the driver
# ---------------------------------------------------------------------------------------------


def empty_postgres(database_url: str) -> None:
    """Drops everything in the database's public schema: point it at one you can throw away."""
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
    finally:
        engine.dispose()


def project_of(database_url: str) -> str:
    """The id of the one project `neens keys create` made in a fresh database."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SELECT id FROM projects")).scalar_one())
    finally:
        engine.dispose()


def sqlite_stamp(value: datetime) -> str:
    """A UTC datetime as Neens' SQLite columns store it."""
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


def insert_sqlite(conn: Any, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """Prepared inserts of `rows` (tuples in the order of `columns`) through sqlite3."""
    marks = ", ".join("?" for _ in columns)
    conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)


def insert_postgres(conn: Any, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """`COPY` of `rows` (tuples in the order of `columns`) through psycopg."""
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


# ---------------------------------------------------------------------------------------------
# Load: one httpx client, a fixed number of requests in flight
# ---------------------------------------------------------------------------------------------


@dataclass
class LoadResult:
    requests: int = 0
    ok: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    first_error: str | None = None
    unsent: int = 0

    @property
    def failures(self) -> int:
        return self.requests - self.ok

    def fail(self, kind: str, detail: str) -> None:
        self.errors[kind] += 1
        self.first_error = self.first_error or detail

    def latency_ms(self, quantile: float) -> float:
        if len(self.latencies) < 2:
            return self.latencies[0] * 1000 if self.latencies else 0.0
        cuts = statistics.quantiles(self.latencies, n=100, method="inclusive")
        return cuts[min(98, max(0, round(quantile * 100) - 1))] * 1000


R = TypeVar("R", bound=LoadResult)
T = TypeVar("T")


async def send_all(
    result: R,
    items: Sequence[T],
    post: Callable[[T], Awaitable[httpx.Response]],
    accept: Callable[[R, httpx.Response], None],
    concurrency: int,
    max_seconds: float,
) -> R:
    """`post` every item with `concurrency` worker tasks, into `result`. Transport errors and
    non-200 answers are failures; `accept` judges each 200 (counting it ok, or a failure)."""
    indexes = iter(range(len(items)))
    start = time.perf_counter()
    stop_at = start + max_seconds

    async def worker() -> None:
        for i in indexes:  # shared iterator: bounded by len(items)
            if time.perf_counter() > stop_at:
                result.unsent += 1
                continue
            sent = time.perf_counter()
            result.requests += 1
            try:
                response = await post(items[i])
            except httpx.HTTPError as exc:
                result.fail(type(exc).__name__, f"{type(exc).__name__}: {exc}")
                continue
            result.latencies.append(time.perf_counter() - sent)
            if response.status_code != 200:
                result.fail(
                    f"HTTP {response.status_code}",
                    f"HTTP {response.status_code}: {response.text[:300]}",
                )
                continue
            accept(result, response)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.seconds = time.perf_counter() - start
    return result


def load_client(
    base_url: str, concurrency: int, timeout_s: float, headers: dict[str, str] | None = None
) -> httpx.AsyncClient:
    """One client with a connection per request in flight (they stay open between runs)."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(
        base_url=base_url, headers=headers, limits=limits, timeout=httpx.Timeout(timeout_s)
    )


def report_failures(
    name: str, result: LoadResult, what: str, rejected_spans: int | None = None
) -> bool:
    """Prints what went wrong in a timed load run, if anything; True if nothing did."""
    if not (result.failures or result.unsent or rejected_spans):
        return True
    rejected = f"{rejected_spans} rejected spans, " if rejected_spans is not None else ""
    console.print(
        f"[red]{name}: {result.failures} failed {what} {dict(result.errors)}, "
        f"{rejected}{result.unsent} not sent (time limit)[/red]"
    )
    if result.first_error:
        console.print(f"[red]  first error: {result.first_error}[/red]")
    return False


def report_warmup(name: str, warm: LoadResult, what: str) -> None:
    if warm.failures:
        console.print(
            f"[red]{name}: {warm.failures}/{warm.requests} warm-up {what} failed; "
            f"first error: {warm.first_error}[/red]"
        )


# ---------------------------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------------------------


def machine_summary() -> str:
    return (
        f"Python {platform.python_version()} on {platform.system()}, {os.cpu_count()} CPUs, "
        f"Python reference loop {python_reference_us():.0f} µs"
    )


def _reference_work() -> int:
    """Dict, string and integer work, as ingest's own Python code does."""
    counts: dict[str, int] = {}
    for i in range(1_000):
        key = f"gen_ai.usage.{i % 50}"
        counts[key] = counts.get(key, 0) + i
    return sum(counts.values())


def python_reference_us() -> float:
    """How long this interpreter on this machine takes for a fixed piece of pure-Python work
    (µs, best of 7): virtual machines run the same build at very different speeds from one day
    to the next, and an absolute figure means little without it."""
    import timeit

    return min(timeit.repeat(_reference_work, number=200, repeat=7)) / 200 * 1e6


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def warn_if_busy(load: float | None) -> None:
    if load is not None and load > LOAD_WARNING:
        console.print(
            f"[yellow]The machine is busy (load {load:.2f}): other work moves both numbers, "
            "and not always by the same amount. Compare ratios from quiet runs.[/yellow]"
        )
