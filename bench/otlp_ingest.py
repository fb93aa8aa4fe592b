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
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import _support
import httpx
from _support import Receive, Scope, Send, ServerProcess, console
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from rich.table import Table

REPO_ROOT = Path(__file__).resolve().parent.parent
SPANS_PER_TRACE = 5
TARGET_RATIO = 3.0
DEFAULT_TRACES = 5_000
QUICK_TRACES = 500
PROTOBUF = "application/x-protobuf"
REQUEST_TIMEOUT_S = 30.0

# ---------------------------------------------------------------------------------------------
# The sink: a raw ASGI callable, run by this same file with --sink-port (see main)
# ---------------------------------------------------------------------------------------------

_EMPTY_EXPORT_RESPONSE = ExportTraceServiceResponse().SerializeToString()


async def sink_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the body, parses it as an ExportTraceServiceRequest, answers 200 (400 if it is
    not one). GET /healthz answers 200 so the harness can wait for both targets the same way."""
    if await _support.handle_common(scope, receive, send):
        return
    if scope["method"] != "POST" or scope["path"] != "/v1/traces":
        await _support.respond(send, 404, b"not found", b"text/plain")
        return
    body = await _support.read_body(receive)
    if body is None:
        return
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the client's fault here
        await _support.respond(send, 400, f"bad protobuf: {exc}".encode(), b"text/plain")
        return
    if not request.resource_spans:
        await _support.respond(send, 400, b"no resource_spans", b"text/plain")
        return
    await _support.respond(send, 200, _EMPTY_EXPORT_RESPONSE, PROTOBUF.encode())


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
# Load
# ---------------------------------------------------------------------------------------------


@dataclass
class LoadResult(_support.LoadResult):
    spans: int = 0
    rejected_spans: int = 0

    @property
    def spans_per_s(self) -> float:
        return self.spans / self.seconds if self.seconds > 0 else 0.0


def _accept(result: LoadResult, response: httpx.Response) -> None:
    rejected = 0
    if response.content:  # an empty ExportTraceServiceResponse is full success
        parsed = ExportTraceServiceResponse.FromString(response.content)
        rejected = parsed.partial_success.rejected_spans
    result.ok += 1
    result.rejected_spans += rejected
    result.spans += SPANS_PER_TRACE - rejected


async def send_all(
    client: httpx.AsyncClient, payloads: list[bytes], concurrency: int, max_seconds: float
) -> LoadResult:
    """POST every payload with `concurrency` worker tasks; every answer must be a 200."""

    async def post(payload: bytes) -> httpx.Response:
        return await client.post("/v1/traces", content=payload)

    return await _support.send_all(LoadResult(), payloads, post, _accept, concurrency, max_seconds)


async def measure(
    server: ServerProcess,
    headers: dict[str, str],
    warmup: list[bytes],
    payloads: list[bytes],
    concurrency: int,
    max_seconds: float,
) -> tuple[LoadResult, LoadResult]:
    """Warm up, then time the real run, over one client (connections stay open between)."""
    headers = {"Content-Type": PROTOBUF, **headers}
    async with _support.load_client(server.url, concurrency, REQUEST_TIMEOUT_S, headers) as client:
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
    _support.add_database_url_option(parser)
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
        if not _support.report_failures(name, r, "requests", r.rejected_spans):
            trustworthy = False

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
        f"{_support.machine_summary()}; "
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

    with _support.workspace(args.database_url) as ws:
        try:
            key = ws.create_api_key()
            sink_port, neens_port = _support.free_port(), _support.free_port()
            sink = ws.start_script("Sink", __file__, ["--sink-port", str(sink_port)], sink_port)
            neens = ws.start_neens(neens_port)
            ws.wait_healthy()

            results: dict[str, LoadResult] = {}
            for name, server, headers, warmup in (
                ("sink", sink, {}, sink_warmup),
                ("neens", neens, {"Authorization": f"Bearer {key}"}, neens_warmup),
            ):
                console.print(f"Sending to {name} ({server.url}) ...")
                warm, timed = asyncio.run(
                    measure(server, headers, warmup, payloads, args.concurrency, args.max_seconds)
                )
                _support.report_warmup(name, warm, "requests")
                results[name] = timed
                if server.popen.poll() is not None:
                    console.print(f"[red]{name} exited during the run:\n{server.log_tail()}[/red]")
            trustworthy = report(results, args, ws.db_label)
            if not trustworthy:
                console.print(f"[dim]Neens log tail:\n{neens.log_tail()}[/dim]")
            return 0 if trustworthy else 1
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            console.print(f"[red]benchmark could not run: {exc}[/red]")
            return 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.sink_port is not None:
        return _support.run_asgi(sink_app, args.sink_port)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
