"""Push-mode pre-prod run: a Neens push run against bare client loops calling the same endpoint.

A stand-in agent endpoint (a steady simulated agent from `neens.demo.endpoints`) runs in its own
process under uvicorn and answers `{"output": "answer N"}` for `"question N"` after a fixed
latency (50 ms by default). The same run times three things against it:

- **httpx** and **aiohttp**: one client with `--concurrency` worker tasks POSTing `--items`
  prompts, each answer checked for a 200 and a JSON `output`: the calls and nothing else. The
  faster of the two in each round is the floor the target is judged against (httpx's pool
  spends milliseconds of CPU per call at 32 connections, so its loop alone would flatter).
- **neens**: `neens serve` (its own process, `NEENS_PUSH_CONCURRENCY=--concurrency`) runs a
  push-mode pre-prod run over a golden dataset of the same `--items` prompts. Neens calls the
  endpoint once per item, records each answer as a session, links it to its item and scores it
  with the project's default judge (built-in fuzzy similarity).

Neens is timed from `POST /preprod-evals` until every item is captured and until the run is
`completed` (every call answered, recorded and scored: the figure the target is set on), both
read by polling `GET /preprod-evals/{id}` every 50 ms. The three sides run in `--rounds`
interleaved rounds (each side going first in turn), each round giving a paired ratio; the median
and spread of those ratios are the result.

    python bench/push_run.py                     # 1,000 items, SQLite in a temp dir
    python bench/push_run.py --quick             # 200 items, a smoke run
    python bench/push_run.py --database-url postgresql+psycopg://user@host:5432/db

It is a measurement, not a test: it exits 0 whether or not the target is met, and 1 only when
the run itself is not trustworthy (a server failed to start, a baseline call failed, or the Neens
run did not score every item).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import _support
import aiohttp
import httpx
from _load import ProcessStats
from _support import ServerProcess, console
from rich.table import Table

from neens.demo import endpoints

TARGET_RATIO = 1.3
DEFAULT_ITEMS = 1_000
QUICK_ITEMS = 200
POLL_INTERVAL_S = 0.050
FINAL_STATUSES = frozenset({"completed", "completed_with_regressions", "failed", "cancelled"})
REQUEST_TIMEOUT_S = 60.0

# ---------------------------------------------------------------------------------------------
# The agent endpoint: a steady simulated agent, run by this same file with --agent-port
# ---------------------------------------------------------------------------------------------

AGENT_PATH = "/agent"


def answer_for(prompt: str) -> str:
    """`answer N` for `question N`: the golden expected output, so every item passes."""
    return "answer " + prompt.removeprefix("question ")


# ---------------------------------------------------------------------------------------------
# Server processes
# ---------------------------------------------------------------------------------------------


def answered_count(agent: ServerProcess) -> int:
    """Calls the agent endpoint has received since it started."""
    response = httpx.get(f"{agent.url}{endpoints.CALLS_PATH}", timeout=5.0)
    response.raise_for_status()
    return int(response.json()["paths"][AGENT_PATH])


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far, all threads (Linux /proc; None elsewhere)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after "pid (comm)": state is fields[0]
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------
# The baselines: a bare httpx loop and a bare aiohttp loop
# ---------------------------------------------------------------------------------------------


@dataclass
class LoadResult(_support.LoadResult):
    cpu_seconds: float = 0.0
    """CPU of this (the client's) process during the loop."""


def _accept(result: LoadResult, response: httpx.Response) -> None:
    try:
        output = response.json()["output"]
    except (ValueError, KeyError, TypeError) as exc:
        result.fail("no output", f"no JSON output ({exc}): {response.text[:300]}")
        return
    if not isinstance(output, str):
        result.fail("no output", f"output is not a string: {response.text[:300]}")
        return
    result.ok += 1


def _calls(prompts: list[str], paths: Sequence[str]) -> list[tuple[str, str]]:
    """(path, prompt) of each call: prompt i goes to `paths[i % len(paths)]`."""
    return [(paths[i % len(paths)], prompt) for i, prompt in enumerate(prompts)]


async def send_all(
    client: httpx.AsyncClient,
    prompts: list[str],
    concurrency: int,
    max_seconds: float,
    paths: Sequence[str] = (AGENT_PATH,),
) -> LoadResult:
    """POST every prompt with `concurrency` worker tasks, prompt i to `paths[i % len(paths)]`;
    each answer must be a 200 with a JSON string `output`."""

    async def post(call: tuple[str, str]) -> httpx.Response:
        return await client.post(call[0], json={"input": call[1]})

    start_cpu = time.process_time()
    result = await _support.send_all(
        LoadResult(), _calls(prompts, paths), post, _accept, concurrency, max_seconds
    )
    result.cpu_seconds = time.process_time() - start_cpu
    return result


async def measure_httpx(
    agent_url: str,
    warmup: list[str],
    prompts: list[str],
    concurrency: int,
    max_seconds: float,
    paths: Sequence[str] = (AGENT_PATH,),
) -> tuple[LoadResult, LoadResult]:
    """Warm up, then time the real loop, over one client (connections stay open between)."""
    async with _support.load_client(agent_url, concurrency, REQUEST_TIMEOUT_S) as client:
        warm = await send_all(client, warmup, concurrency, max_seconds, paths)
        timed = await send_all(client, prompts, concurrency, max_seconds, paths)
    return warm, timed


async def _aiohttp_loop(
    session: aiohttp.ClientSession,
    prompts: list[str],
    concurrency: int,
    max_seconds: float,
    paths: Sequence[str],
) -> LoadResult:
    """The same loop over aiohttp: `concurrency` worker tasks, the same checks on each answer."""
    result = LoadResult()
    calls = _calls(prompts, paths)
    indexes = iter(range(len(calls)))
    start = time.perf_counter()
    start_cpu = time.process_time()
    stop_at = start + max_seconds

    async def worker() -> None:
        for i in indexes:  # shared iterator: bounded by len(prompts)
            if time.perf_counter() > stop_at:
                result.unsent += 1
                continue
            sent = time.perf_counter()
            result.requests += 1
            try:
                path, prompt = calls[i]
                async with session.post(path, json={"input": prompt}) as response:
                    status, body = response.status, await response.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                result.fail(type(exc).__name__, f"{type(exc).__name__}: {exc}")
                continue
            result.latencies.append(time.perf_counter() - sent)
            if status != 200:
                result.fail(f"HTTP {status}", f"HTTP {status}: {body[:300]!r}")
                continue
            try:
                output = json.loads(body)["output"]
            except (ValueError, KeyError, TypeError) as exc:
                result.fail("no output", f"no JSON output ({exc}): {body[:300]!r}")
                continue
            if isinstance(output, str):
                result.ok += 1
            else:
                result.fail("no output", f"output is not a string: {body[:300]!r}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.seconds = time.perf_counter() - start
    result.cpu_seconds = time.process_time() - start_cpu
    return result


async def measure_aiohttp(
    agent_url: str,
    warmup: list[str],
    prompts: list[str],
    concurrency: int,
    max_seconds: float,
    paths: Sequence[str] = (AGENT_PATH,),
) -> tuple[LoadResult, LoadResult]:
    """Warm up, then time the aiohttp loop, over one session with a connection per slot."""
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(agent_url, connector=connector, timeout=timeout) as session:
        warm = await _aiohttp_loop(session, warmup, concurrency, max_seconds, paths)
        timed = await _aiohttp_loop(session, prompts, concurrency, max_seconds, paths)
    return warm, timed


@dataclass
class Round:
    """One interleaved round: both bare loops and one Neens run, over the same prompts."""

    httpx: LoadResult
    aiohttp: LoadResult
    neens: PushResult

    @property
    def floor(self) -> LoadResult:
        """The faster of the two bare loops: the figure the target is judged against."""
        return min(self.httpx, self.aiohttp, key=lambda loop: loop.seconds)


# ---------------------------------------------------------------------------------------------
# Neens: a push-mode pre-prod run
# ---------------------------------------------------------------------------------------------


@dataclass
class PushResult:
    items: int
    run_id: str = ""
    status: str = "not started"
    error: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    create_seconds: float = 0.0
    """POST /preprod-evals, request to answer."""
    capture_seconds: float | None = None
    """Until a poll first saw every item captured, scored or errored."""
    total_seconds: float | None = None
    """Until a poll first saw a final status."""
    server_seconds: float | None = None
    """The run's own createdAt -> completedAt."""
    capture_cpu: float | None = None
    """CPU seconds of the Neens server process from the POST until `capture_seconds`."""
    total_cpu: float | None = None
    """... until `total_seconds`."""
    polls: int = 0
    passed: int | None = None
    calls_answered: int | None = None
    """POSTs the endpoint answered during the run (from its /stats)."""
    timed_out: bool = False

    @property
    def trustworthy(self) -> bool:
        return (
            not self.timed_out
            and self.status in ("completed", "completed_with_regressions")
            and self.counts.get("scored") == self.items
            and self.capture_seconds is not None
            and self.total_seconds is not None
        )


def _check(response: httpx.Response, what: str) -> dict[str, Any]:
    if response.status_code not in (200, 201):
        raise RuntimeError(f"{what}: HTTP {response.status_code}: {response.text[:500]}")
    body: dict[str, Any] = response.json()
    return body


def _parse_time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


async def create_dataset(client: httpx.AsyncClient, name: str, prompts: list[str]) -> str:
    dataset = _check(await client.post("/datasets", json={"name": name}), "POST /datasets")
    items = [{"input": p, "expected_output": answer_for(p)} for p in prompts]
    _check(
        await client.post(
            f"/datasets/{dataset['id']}/versions", json={"items": items, "golden": True}
        ),
        "POST /datasets/{id}/versions",
    )
    return str(dataset["id"])


async def push_run(
    client: httpx.AsyncClient,
    neens_pid: int,
    dataset_id: str,
    connection_id: str,
    version_label: str,
    items: int,
    max_seconds: float,
) -> PushResult:
    """Create a push run and poll it every 50 ms until it reaches a final status."""
    result = PushResult(items=items)
    body = {
        "dataset_id": dataset_id,
        "version_label": version_label,
        "runner_mode": "push",
        "agent_connection_id": connection_id,
    }
    start_cpu = process_cpu_seconds(neens_pid)
    start = time.perf_counter()
    run = _check(await client.post("/preprod-evals", json=body), "POST /preprod-evals")
    result.create_seconds = time.perf_counter() - start
    result.run_id = str(run["id"])
    max_polls = math.ceil(max_seconds / POLL_INTERVAL_S) + 1
    for _ in range(max_polls):  # bounded in count and, below, in time
        counts: dict[str, int] = run["counts"]
        now = time.perf_counter() - start
        cpu = process_cpu_seconds(neens_pid)
        cpu_used = cpu - start_cpu if cpu is not None and start_cpu is not None else None
        result.status, result.error, result.counts = run["status"], run["error"], counts
        if result.capture_seconds is None and (
            counts["captured"] + counts["scored"] + counts["error"] >= items
        ):
            result.capture_seconds, result.capture_cpu = now, cpu_used
        if run["status"] in FINAL_STATUSES:
            result.total_seconds, result.total_cpu = now, cpu_used
            created, completed = _parse_time(run["createdAt"]), _parse_time(run["completedAt"])
            if created is not None and completed is not None:
                result.server_seconds = (completed - created).total_seconds()
            break
        if now > max_seconds:
            result.timed_out = True
            break
        await asyncio.sleep(POLL_INTERVAL_S)
        result.polls += 1
        run = _check(await client.get(f"/preprod-evals/{result.run_id}"), "GET /preprod-evals/{id}")
    else:
        result.timed_out = True
    if result.total_seconds is not None:
        listing = _check(
            await client.get(f"/preprod-evals/{result.run_id}/items"),
            "GET /preprod-evals/{id}/items",
        )
        result.passed = sum(1 for item in listing["items"] if item["passed"] is True)
    return result


@dataclass
class NeensTarget:
    """A Neens server set up for the benchmark: a dataset of the prompts and a connection."""

    server: ServerProcess
    key: str
    dataset_id: str = ""
    connection_id: str = ""
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.server.url,
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=httpx.Timeout(REQUEST_TIMEOUT_S),
        )


async def set_up_neens(
    target: NeensTarget, agent: ServerProcess, warmup: list[str], prompts: list[str], args: Any
) -> PushResult | None:
    """Create the dataset and the connection, then run an untimed warm-up run."""
    async with target.client() as client:
        target.dataset_id = await create_dataset(client, f"bench-{target.tag}", prompts)
        connection = _check(
            await client.post(
                "/agent-connections",
                json={
                    "name": f"bench-agent-{target.tag}",
                    "url": f"{agent.url}{AGENT_PATH}",
                    "requestFormat": "neens",
                },
            ),
            "POST /agent-connections",
        )
        target.connection_id = str(connection["id"])
        if not warmup:
            return None
        warm_dataset = await create_dataset(client, f"bench-warmup-{target.tag}", warmup)
        return await push_run(
            client,
            target.server.popen.pid,
            warm_dataset,
            target.connection_id,
            f"warmup-{target.tag}",
            len(warmup),
            args.max_seconds,
        )


async def measure_neens(
    target: NeensTarget, agent: ServerProcess, round_no: int, items: int, max_seconds: float
) -> PushResult:
    """One timed push run over the prompts' dataset."""
    async with target.client() as client:
        before = answered_count(agent)
        timed = await push_run(
            client,
            target.server.popen.pid,
            target.dataset_id,
            target.connection_id,
            f"bench-{target.tag}-{round_no}",
            items,
            max_seconds,
        )
        timed.calls_answered = answered_count(agent) - before
    return timed


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Wall time of a Neens push-mode pre-prod run against bare httpx and "
        "aiohttp loops making the same calls to the same endpoint."
    )
    parser.add_argument(
        "--items",
        type=int,
        default=None,
        help=f"golden items (= endpoint calls) per target (default {DEFAULT_ITEMS})",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="calls in flight, for the bare loops and as NEENS_PUSH_CONCURRENCY (default 32)",
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=50.0,
        help="how long the agent endpoint takes to answer each call (default 50)",
    )
    _support.add_database_url_option(parser)
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: {QUICK_ITEMS} items (unless --items is given)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=32,
        help="untimed calls per target first: requests of each bare loop, and the items of one "
        "untimed Neens push run (default 32; 0 for none)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="give up on a target (a bare loop, or one Neens run) after this long (default 600)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="interleaved rounds of the bare loops and a Neens run (default 3; 2 with --quick)",
    )
    parser.add_argument("--agent-port", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.items is None:
        args.items = QUICK_ITEMS if args.quick else DEFAULT_ITEMS
    if args.rounds is None:
        args.rounds = 2 if args.quick else 3
    if (
        args.items < 1
        or args.rounds < 1
        or args.concurrency < 1
        or args.warmup < 0
        or args.latency_ms < 0
        or args.max_seconds <= 0
    ):
        parser.error(
            "--items and --concurrency must be >= 1, --warmup and --latency-ms >= 0, "
            "--max-seconds > 0"
        )
    return args


def _ratio(value: float | None, baseline: float) -> str:
    if value is None or baseline <= 0:
        return "n/a"
    return f"{value / baseline:.2f}x"


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x (min {min(values):.2f}, max {max(values):.2f})"


def report(
    rounds: list[Round],
    args: argparse.Namespace,
    db_label: str,
    peak_rss_mb: float | None,
) -> bool:
    floor = math.ceil(args.items / args.concurrency) * args.latency_ms / 1000
    table = Table(
        title=f"Push run, {args.items:,} items, {args.concurrency} in flight, "
        f"{args.latency_ms:g} ms endpoint, Neens on {db_label}, {len(rounds)} interleaved rounds "
        f"(latency floor {floor:.2f} s)"
    )
    for column in (
        "round",
        "httpx s",
        "httpx cpu s",
        "aiohttp s",
        "aiohttp cpu s",
        "neens captured s",
        "neens complete s",
        "neens cpu s",
        "complete / faster loop",
        "complete / httpx",
        "failed",
    ):
        table.add_column(column, justify="right")

    def seconds(value: float | None) -> str:
        return f"{value:.2f}" if value is not None else "n/a"

    for i, r in enumerate(rounds, start=1):
        neens = r.neens
        failed_items = neens.counts.get("error", 0) + neens.counts.get("pending", 0)
        table.add_row(
            f"{i}",
            f"{r.httpx.seconds:.2f}",
            f"{r.httpx.cpu_seconds:.2f}",
            f"{r.aiohttp.seconds:.2f}",
            f"{r.aiohttp.cpu_seconds:.2f}",
            seconds(neens.capture_seconds),
            seconds(neens.total_seconds),
            seconds(neens.total_cpu),
            _ratio(neens.total_seconds, r.floor.seconds),
            _ratio(neens.total_seconds, r.httpx.seconds),
            f"{r.httpx.failures + r.aiohttp.failures + failed_items:,}",
        )
    console.print(table)
    last = rounds[-1].neens
    c = last.counts
    passed = f"{last.passed:,}" if last.passed is not None else "n/a"
    console.print(
        f"Last Neens run {last.run_id}: status {last.status}; "
        f"counts pending {c.get('pending', 0):,}"
        f" / captured {c.get('captured', 0):,} / scored {c.get('scored', 0):,}"
        f" / error {c.get('error', 0):,}; {passed} passed; {last.polls} polls; "
        f"POST /preprod-evals took {last.create_seconds * 1000:.0f} ms"
        + (
            f"; server-side createdAt -> completedAt {last.server_seconds:.2f}s"
            if last.server_seconds is not None
            else ""
        )
        + (f"; Neens peak RSS {peak_rss_mb:,.0f} MB" if peak_rss_mb is not None else "")
    )
    console.print(
        "[dim]'complete' is from POST /preprod-evals until the run is completed: every call "
        "answered, recorded and scored with the default judge (built-in fuzzy similarity). "
        "Times are read by polling every "
        f"{POLL_INTERVAL_S * 1000:.0f} ms, so each can be late by up to one poll. 'cpu s' is "
        "the CPU of the side making the calls: this process for the bare loops, the Neens "
        "server process (all its threads) for Neens. The target is judged against the faster "
        "bare loop of each round: httpx's connection pool spends milliseconds of CPU per call "
        "at this concurrency, so a ratio against the httpx loop alone would flatter.[/dim]"
    )

    trustworthy = True
    for i, r in enumerate(rounds, start=1):
        neens = r.neens
        for name, loop in (("httpx", r.httpx), ("aiohttp", r.aiohttp)):
            if not _support.report_failures(f"round {i} {name} loop", loop, "calls"):
                trustworthy = False
        if not neens.trustworthy:
            trustworthy = False
            why = "timed out" if neens.timed_out else f"ended {neens.status}"
            console.print(
                f"[red]round {i} neens: the run did not score all {args.items:,} items ({why}; "
                f"scored {neens.counts.get('scored', 0):,})[/red]"
            )
            if neens.error:
                console.print(f"[red]  run error: {neens.error}[/red]")
        if neens.passed is not None and neens.passed != args.items:
            console.print(
                f"[yellow]round {i}: {neens.passed:,} of {args.items:,} items passed; the "
                "endpoint answers each item's expected output, so all should[/yellow]"
            )
        if neens.calls_answered is not None and neens.calls_answered != args.items:
            console.print(
                f"[yellow]round {i}: the endpoint answered {neens.calls_answered:,} calls "
                f"during the Neens run, for {args.items:,} items[/yellow]"
            )
    if not trustworthy:
        # A run that did not score every item is a failed benchmark, not a fast one.
        console.print("[red]NO VERDICT: the run had errors (see above)[/red]")
        return False
    complete = [(r.neens.total_seconds or math.inf) / r.floor.seconds for r in rounds]
    captured = [(r.neens.capture_seconds or math.inf) / r.floor.seconds for r in rounds]
    versus_httpx = [(r.neens.total_seconds or math.inf) / r.httpx.seconds for r in rounds]
    console.print(f"paired ratio neens complete / httpx loop: {_spread(versus_httpx)} (shown)")
    console.print(
        f"paired ratio neens captured / faster loop: {_spread(captured)} (shown alongside)"
    )
    median = statistics.median(complete)
    verdict = "[green]target met[/green]" if median <= TARGET_RATIO else "[red]TARGET MISSED[/red]"
    console.print(
        f"paired ratio neens complete / faster loop: {_spread(complete)} "
        f"(target <= {TARGET_RATIO:.1f}x): {verdict}"
    )
    return True


def run(args: argparse.Namespace) -> int:
    console.width = max(console.width, 132)  # the table is wide; keep it readable in a pipe
    load = _support.load_average()
    console.print(
        _support.machine_summary()
        + (f" (1-min load average {load:.2f} before starting)" if load is not None else "")
        + f"; {args.items:,} items, concurrency {args.concurrency}, endpoint latency "
        f"{args.latency_ms:g} ms, warm-up {args.warmup}"
    )
    _support.warn_if_busy(load)
    prompts = [f"question {n}" for n in range(args.items)]
    warmup = [f"question {n}" for n in range(args.items, args.items + args.warmup)]

    with _support.workspace(args.database_url) as ws:
        neens_env = {**ws.env, "NEENS_PUSH_CONCURRENCY": str(args.concurrency)}
        try:
            key = ws.create_api_key()
            agent_port, neens_port = _support.free_port(), _support.free_port()
            agent = ws.start_script(
                "Agent",
                __file__,
                ["--agent-port", str(agent_port), "--latency-ms", str(args.latency_ms)],
                agent_port,
            )
            neens = ws.start_neens(neens_port, neens_env)
            ws.wait_healthy()

            target = NeensTarget(neens, key)
            warm_run = asyncio.run(set_up_neens(target, agent, warmup, prompts, args))
            if warm_run is not None and not warm_run.trustworthy:
                console.print(
                    f"[red]neens: the warm-up run ended {warm_run.status} with counts "
                    f"{warm_run.counts} ({warm_run.error or 'no error'})[/red]"
                )
            for name, measure in (("httpx", measure_httpx), ("aiohttp", measure_aiohttp)):
                warm = asyncio.run(
                    measure(agent.url, [], warmup, args.concurrency, args.max_seconds)
                )[1]
                _support.report_warmup(name, warm, "calls")
            rounds: list[Round] = []
            for round_no in range(1, args.rounds + 1):
                sides = ["httpx", "aiohttp", "neens"]
                shift = (round_no - 1) % len(sides)  # each side goes first in turn
                done: dict[str, Any] = {}
                for side in sides[shift:] + sides[:shift]:
                    if side == "neens":
                        done[side] = asyncio.run(
                            measure_neens(target, agent, round_no, len(prompts), args.max_seconds)
                        )
                    else:
                        measure = measure_httpx if side == "httpx" else measure_aiohttp
                        done[side] = asyncio.run(
                            measure(agent.url, [], prompts, args.concurrency, args.max_seconds)
                        )[1]
                rounds.append(Round(done["httpx"], done["aiohttp"], done["neens"]))
                console.print(f"round {round_no}/{args.rounds} done")
            for server in ws.servers:
                if server.popen.poll() is not None:
                    console.print(f"[red]{server.name} exited during the run[/red]")
            peak = ProcessStats.of(neens.popen.pid).peak_rss_mb
            trustworthy = report(rounds, args, ws.db_label, peak)
            if not trustworthy:
                console.print(f"[dim]Neens log tail:\n{neens.log_tail()}[/dim]")
            return 0 if trustworthy else 1
        except (RuntimeError, httpx.HTTPError, subprocess.TimeoutExpired) as exc:
            console.print(f"[red]benchmark could not run: {exc}[/red]")
            for server in ws.servers:
                console.print(f"[dim]{server.name} log tail:\n{server.log_tail()}[/dim]")
            return 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.agent_port is not None:
        agent = endpoints.steady(answer_for, path=AGENT_PATH, latency_s=args.latency_ms / 1000)
        endpoints.run(agent, port=args.agent_port)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
