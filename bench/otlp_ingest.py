"""OTLP/HTTP trace ingest throughput: the Neens server against a minimal sink, in one run.

Both targets run as separate processes under uvicorn (one worker, log level warning, the same
event loop and HTTP implementation), and the same httpx client sends them the same kind of load:
protobuf ExportTraceServiceRequests, one 5-span agent trace per request, at a fixed concurrency.
The sink only parses each request and answers with an empty ExportTraceServiceResponse, so it
measures the floor set by the transport, the client and protobuf decoding; the ratio
`sink spans/s / Neens spans/s` is how much Neens' real work (auth, decoding to records,
committing spans and re-deriving the session) costs on top of that floor.

    python bench/otlp_ingest.py                    # 5,000 traces, SQLite in a temp dir
    python bench/otlp_ingest.py --quick            # 500 traces, a smoke run
    python bench/otlp_ingest.py --database-url postgresql+psycopg://user@host:5432/db

It is a measurement, not a test: it exits 0 whether or not the target is met, and 1 only when
the run itself is not trustworthy (a server failed to start, or any request failed).
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
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from rich.console import Console
from rich.table import Table

REPO_ROOT = Path(__file__).resolve().parent.parent
SPANS_PER_TRACE = 5
TARGET_RATIO = 3.0
DEFAULT_TRACES = 5_000
QUICK_TRACES = 500
PROTOBUF = "application/x-protobuf"
STARTUP_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

console = Console(highlight=False)

# ---------------------------------------------------------------------------------------------
# The sink: a raw ASGI callable, run by this same file with --sink-port (see _run_sink)
# ---------------------------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_EMPTY_EXPORT_RESPONSE = ExportTraceServiceResponse().SerializeToString()


async def _respond(send: Send, status: int, body: bytes, content_type: bytes) -> None:
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


async def sink_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the body, parses it as an ExportTraceServiceRequest, answers 200 (400 if it is
    not one). GET /healthz answers 200 so the harness can wait for both targets the same way."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    if scope["method"] == "GET" and scope["path"] == "/healthz":
        await _respond(send, 200, b'{"status":"ok"}', b"application/json")
        return
    if scope["method"] != "POST" or scope["path"] != "/v1/traces":
        await _respond(send, 404, b"not found", b"text/plain")
        return
    chunks: list[bytes] = []
    more_body = True
    while more_body:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        chunks.append(message.get("body", b""))
        more_body = message.get("more_body", False)
    try:
        request = ExportTraceServiceRequest.FromString(b"".join(chunks))
    except Exception as exc:  # noqa: BLE001 - any parse failure is the client's fault here
        await _respond(send, 400, f"bad protobuf: {exc}".encode(), b"text/plain")
        return
    if not request.resource_spans:
        await _respond(send, 400, b"no resource_spans", b"text/plain")
        return
    await _respond(send, 200, _EMPTY_EXPORT_RESPONSE, PROTOBUF.encode())


def _run_sink(port: int) -> int:
    import uvicorn

    # The same call `neens serve` makes: uvicorn.run with one worker and default loop/http.
    uvicorn.run(sink_app, host="127.0.0.1", port=port, log_level="warning")
    return 0


# ---------------------------------------------------------------------------------------------
# Payloads
# ---------------------------------------------------------------------------------------------


def build_payloads(count: int) -> list[bytes]:
    """`count` serialized ExportTraceServiceRequests, one fresh 5-span agent trace each."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from tests.support.otlp import agent_trace, export_request

    payloads: list[bytes] = []
    for _ in range(count):
        _trace_id, spans = agent_trace()
        assert len(spans) == SPANS_PER_TRACE
        payloads.append(export_request(spans).SerializeToString())
    return payloads


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


# ---------------------------------------------------------------------------------------------
# Load
# ---------------------------------------------------------------------------------------------


@dataclass
class LoadResult:
    requests: int = 0
    ok: int = 0
    spans: int = 0
    rejected_spans: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    first_error: str | None = None
    unsent: int = 0

    @property
    def failures(self) -> int:
        return self.requests - self.ok

    @property
    def spans_per_s(self) -> float:
        return self.spans / self.seconds if self.seconds > 0 else 0.0

    def latency_ms(self, quantile: float) -> float:
        if len(self.latencies) < 2:
            return self.latencies[0] * 1000 if self.latencies else 0.0
        cuts = statistics.quantiles(self.latencies, n=100, method="inclusive")
        return cuts[min(98, max(0, round(quantile * 100) - 1))] * 1000


async def send_all(
    client: httpx.AsyncClient, payloads: list[bytes], concurrency: int, max_seconds: float
) -> LoadResult:
    """POST every payload with `concurrency` worker tasks; every answer must be a 200."""
    result = LoadResult()
    indexes = iter(range(len(payloads)))
    start = time.perf_counter()
    stop_at = start + max_seconds

    async def worker() -> None:
        for i in indexes:  # shared iterator: bounded by len(payloads)
            if time.perf_counter() > stop_at:
                result.unsent += 1
                continue
            sent = time.perf_counter()
            result.requests += 1
            try:
                response = await client.post("/v1/traces", content=payloads[i])
            except httpx.HTTPError as exc:
                result.errors[type(exc).__name__] += 1
                result.first_error = result.first_error or f"{type(exc).__name__}: {exc}"
                continue
            result.latencies.append(time.perf_counter() - sent)
            if response.status_code != 200:
                result.errors[f"HTTP {response.status_code}"] += 1
                result.first_error = result.first_error or (
                    f"HTTP {response.status_code}: {response.text[:300]}"
                )
                continue
            rejected = 0
            if response.content:  # an empty ExportTraceServiceResponse is full success
                parsed = ExportTraceServiceResponse.FromString(response.content)
                rejected = parsed.partial_success.rejected_spans
            result.ok += 1
            result.rejected_spans += rejected
            result.spans += SPANS_PER_TRACE - rejected

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.seconds = time.perf_counter() - start
    return result


async def measure(
    server: ServerProcess,
    headers: dict[str, str],
    warmup: list[bytes],
    payloads: list[bytes],
    concurrency: int,
    max_seconds: float,
) -> tuple[LoadResult, LoadResult]:
    """Warm up, then time the real run, over one client (connections stay open between)."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=server.url,
        headers={"Content-Type": PROTOBUF, **headers},
        limits=limits,
        timeout=httpx.Timeout(REQUEST_TIMEOUT_S),
    ) as client:
        warm = await send_all(client, warmup, concurrency, max_seconds)
        timed = await send_all(client, payloads, concurrency, max_seconds)
    return warm, timed


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="OTLP/HTTP trace ingest throughput of the Neens server against a minimal sink."
    )
    parser.add_argument(
        "--traces",
        type=int,
        default=None,
        help=f"traces to send to each target, one per request (default {DEFAULT_TRACES})",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    parser.add_argument(
        "--database-url",
        metavar="URL",
        default=None,
        help="database for the Neens server (default: a fresh SQLite file in a temp dir); "
        "it must be empty or a Neens database, and the run adds rows to it",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: {QUICK_TRACES} traces (unless --traces is given)",
    )
    parser.add_argument(
        "--warmup", type=int, default=50, help="untimed requests per target first (default 50)"
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="give up sending to a target after this long (default 600)",
    )
    parser.add_argument("--sink-port", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.traces is None:
        args.traces = QUICK_TRACES if args.quick else DEFAULT_TRACES
    if args.traces < 1 or args.concurrency < 1 or args.warmup < 0 or args.max_seconds <= 0:
        parser.error("--traces and --concurrency must be >= 1, --warmup >= 0, --max-seconds > 0")
    return args


def report(results: dict[str, LoadResult], args: argparse.Namespace, db_label: str) -> bool:
    table = Table(title=f"OTLP ingest, {args.concurrency} in flight, Neens on {db_label}")
    for column in ("target", "requests", "failed", "spans", "seconds", "spans/s"):
        table.add_column(column, justify="left" if column == "target" else "right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p99 ms", justify="right")
    for name, r in results.items():
        table.add_row(
            name,
            f"{r.requests:,}",
            f"{r.failures:,}",
            f"{r.spans:,}",
            f"{r.seconds:.2f}",
            f"{r.spans_per_s:,.0f}",
            f"{r.latency_ms(0.5):.1f}",
            f"{r.latency_ms(0.99):.1f}",
        )
    console.print(table)

    trustworthy = True
    for name, r in results.items():
        if r.failures or r.unsent or r.rejected_spans:
            trustworthy = False
            console.print(
                f"[red]{name}: {r.failures} failed requests {dict(r.errors)}, "
                f"{r.rejected_spans} rejected spans, {r.unsent} not sent (time limit)[/red]"
            )
            if r.first_error:
                console.print(f"[red]  first error: {r.first_error}[/red]")

    sink, neens = results["sink"], results["neens"]
    if neens.spans_per_s <= 0:
        console.print("[red]ratio sink/neens: n/a (Neens ingested nothing)[/red]")
        return False
    ratio = sink.spans_per_s / neens.spans_per_s
    met = ratio <= TARGET_RATIO
    verdict = "[green]target met[/green]" if met else "[red]TARGET MISSED[/red]"
    print(f"ratio sink/neens: {ratio:.2f}x (target <= {TARGET_RATIO:.1f}x)")
    if not trustworthy:
        verdict += " [red](but the run had errors: see above)[/red]"
    console.print(verdict)
    return trustworthy


def run(args: argparse.Namespace) -> int:
    console.print(
        f"Python {platform.python_version()} on {platform.system()}, {os.cpu_count()} CPUs; "
        f"{args.traces:,} traces x {SPANS_PER_TRACE} spans per target, "
        f"concurrency {args.concurrency}, warm-up {args.warmup}"
    )
    t0 = time.perf_counter()
    payloads = build_payloads(args.traces)
    sink_warmup = build_payloads(args.warmup)
    neens_warmup = build_payloads(args.warmup)  # fresh trace ids: no warm-up trace is re-sent
    size = sum(map(len, payloads)) / len(payloads)
    console.print(
        f"Built {len(payloads) + 2 * args.warmup:,} payloads "
        f"({size:.0f} bytes each) in {time.perf_counter() - t0:.1f}s"
    )

    servers: list[ServerProcess] = []
    with tempfile.TemporaryDirectory(prefix="neens-bench-") as tmp:
        workdir = Path(tmp)
        database_url = args.database_url or f"sqlite:///{workdir / 'neens.db'}"
        db_label = database_url.split("://", 1)[0]
        env = {**os.environ, "NEENS_HOME": str(workdir / "home"), "PYTHONUNBUFFERED": "1"}
        try:
            key = create_api_key(database_url, workdir, env)
            sink_port, neens_port = free_port(), free_port()
            servers.append(
                start_server(
                    "Sink",
                    [sys.executable, str(Path(__file__).resolve()), "--sink-port", str(sink_port)],
                    sink_port,
                    workdir,
                    env,
                )
            )
            servers.append(
                start_server(
                    "Neens",
                    [
                        sys.executable,
                        "-m",
                        "neens_eval",
                        "serve",
                        "--port",
                        str(neens_port),
                        "--database-url",
                        database_url,
                        "--log-level",
                        "warning",
                    ],
                    neens_port,
                    workdir,
                    env,
                )
            )
            for server in servers:
                wait_healthy(server)
            sink, neens = servers

            results: dict[str, LoadResult] = {}
            for name, server, headers, warmup in (
                ("sink", sink, {}, sink_warmup),
                ("neens", neens, {"Authorization": f"Bearer {key}"}, neens_warmup),
            ):
                console.print(f"Sending to {name} ({server.url}) ...")
                warm, timed = asyncio.run(
                    measure(server, headers, warmup, payloads, args.concurrency, args.max_seconds)
                )
                if warm.failures:
                    console.print(
                        f"[red]{name}: {warm.failures}/{warm.requests} warm-up requests failed; "
                        f"first error: {warm.first_error}[/red]"
                    )
                results[name] = timed
                if server.popen.poll() is not None:
                    console.print(f"[red]{name} exited during the run:\n{server.log_tail()}[/red]")
            trustworthy = report(results, args, db_label)
            if not trustworthy:
                console.print(f"[dim]Neens log tail:\n{neens.log_tail()}[/dim]")
            return 0 if trustworthy else 1
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            console.print(f"[red]benchmark could not run: {exc}[/red]")
            return 1
        finally:
            for server in reversed(servers):
                server.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.sink_port is not None:
        return _run_sink(args.sink_port)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
