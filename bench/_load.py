"""A load generator that is not the bottleneck, and what a server process used while it ran.

httpx spends about 100 µs of client CPU per request, so on a small machine an httpx loop caps a
do-nothing sink well below what the sink can take, and every ratio against that sink is
flattered. Here each client process runs an aiohttp session (its C HTTP parser costs a fraction
of that) over pre-serialized bodies, and a run may use several client processes started together
from one barrier: wall time is from the earliest start to the latest finish, every process
counting on the same monotonic clock.

`ProcessStats` reads a server's CPU seconds and peak RSS from /proc, so a ratio can be shown next
to what it cost.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import aiohttp

Accept = Callable[[bytes], int]
"""Reads a 200 answer's body; returns how many units (spans) it refused, 0 for none."""


@dataclass
class LoadRun:
    """One timed load run over all client processes."""

    requests: int = 0
    ok: int = 0
    refused_units: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    first_error: str | None = None

    @property
    def failures(self) -> int:
        return self.requests - self.ok

    def latency_ms(self, quantile: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] * 1000


def _client_main(
    conn: Connection,
    barrier: Any,
    url: str,
    headers: dict[str, str],
    bodies: Sequence[bytes],
    concurrency: int,
    accept: Accept,
    timeout_s: float,
) -> None:
    """One client process: waits at the barrier, sends `bodies`, reports through `conn`."""

    async def run() -> dict[str, Any]:
        report: dict[str, Any] = {
            "requests": 0,
            "ok": 0,
            "refused": 0,
            "latencies": [],
            "errors": Counter(),
            "first_error": None,
        }
        connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        async with aiohttp.ClientSession(
            connector=connector, headers=headers, timeout=timeout
        ) as session:
            next_index = iter(range(len(bodies)))

            async def worker() -> None:
                for i in next_index:
                    sent = time.perf_counter()
                    report["requests"] += 1
                    try:
                        async with session.post(url, data=bodies[i]) as response:
                            body = await response.read()
                            status = response.status
                    except (TimeoutError, aiohttp.ClientError) as exc:
                        report["errors"][type(exc).__name__] += 1
                        report["first_error"] = report["first_error"] or f"{exc!r}"
                        continue
                    report["latencies"].append(time.perf_counter() - sent)
                    if status != 200:
                        report["errors"][f"HTTP {status}"] += 1
                        report["first_error"] = report["first_error"] or (
                            f"HTTP {status}: {body[:300]!r}"
                        )
                        continue
                    report["ok"] += 1
                    report["refused"] += accept(body)

            barrier.wait()
            report["start"] = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            report["end"] = time.perf_counter()
        return report

    try:
        conn.send(asyncio.run(run()))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, never lost
        conn.send({"crashed": f"{type(exc).__name__}: {exc}"})
    finally:
        conn.close()


def send(
    url: str,
    headers: dict[str, str],
    bodies: Sequence[bytes],
    *,
    concurrency: int,
    processes: int,
    accept: Accept,
    timeout_s: float = 60.0,
) -> LoadRun:
    """POST every body to `url` from `processes` client processes, `concurrency` requests in
    flight in total (split between them). The bodies are dealt out round-robin."""
    context = mp.get_context("fork")  # the children inherit the bodies instead of pickling them
    processes = max(1, min(processes, len(bodies)))
    barrier = context.Barrier(processes + 1)
    children: list[tuple[Any, Connection]] = []
    for p in range(processes):
        parent_end, child_end = context.Pipe(duplex=False)
        share = concurrency // processes + (1 if p < concurrency % processes else 0)
        child = context.Process(
            target=_client_main,
            args=(
                child_end,
                barrier,
                url,
                headers,
                bodies[p::processes],
                max(1, share),
                accept,
                timeout_s,
            ),
            daemon=True,
        )
        child.start()
        child_end.close()
        children.append((child, parent_end))
    barrier.wait()
    run = LoadRun()
    starts: list[float] = []
    ends: list[float] = []
    for child, parent_end in children:
        report = parent_end.recv()
        child.join()
        if "crashed" in report:
            raise RuntimeError(f"a client process crashed: {report['crashed']}")
        run.requests += report["requests"]
        run.ok += report["ok"]
        run.refused_units += report["refused"]
        run.latencies.extend(report["latencies"])
        run.errors.update(report["errors"])
        run.first_error = run.first_error or report["first_error"]
        starts.append(report["start"])
        ends.append(report["end"])
    run.seconds = max(ends) - min(starts)
    return run


@dataclass(frozen=True)
class ProcessStats:
    """A process's CPU seconds so far (user + system, all threads) and peak resident memory."""

    cpu_s: float
    peak_rss_mb: float

    @classmethod
    def of(cls, pid: int) -> ProcessStats:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        peak_kb = 0
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    peak_kb = int(line.split()[1])
        return cls(cpu, peak_kb / 1024)


def wait_until_idle(pid: int, *, window_s: float = 0.5, timeout_s: float = 30.0) -> float:
    """Wait until the process uses under 2% of a core over `window_s`: a server finishes its
    startup work (`neens serve` loads the statistics libraries in the background, about a second
    of CPU) before its CPU is counted against a load. Returns the seconds waited."""
    start = time.monotonic()
    before = ProcessStats.of(pid).cpu_s
    while time.monotonic() - start < timeout_s:
        time.sleep(window_s)
        now = ProcessStats.of(pid).cpu_s
        if now - before < 0.02 * window_s:
            break
        before = now
    return time.monotonic() - start
