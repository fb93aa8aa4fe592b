"""Model sweep: a Neens sweep against bare client loops making the same calls, its throughput
with 1, 2 and 4 `neens worker` processes on PostgreSQL, and a worker killed mid-sweep.

A stand-in agent (the steady simulated agent of `neens.demo.endpoints`) answers at its own path
for each arm (`/arm0`, `/arm1`, ...), all in one process under uvicorn, `{"output": "answer N"}`
for `"question N"` after a fixed latency (50 ms by default), so every item passes. Neens gets a
golden dataset of `--items` prompts and one agent connection per arm. Three parts:

- **wall**: a sweep of `--arms` arms x `--k` runs x `--items` items on one `neens serve`
  (`NEENS_PUSH_CONCURRENCY=--concurrency`, workers in the server), timed from `POST
  /model-sweeps` until a poll of `GET /model-sweeps/{id}` sees it `completed`, against a bare
  httpx loop and a bare aiohttp loop making the same calls (each arm's path gets each prompt k
  times) at the same concurrency. Interleaved rounds, each side going first in turn; the target
  (<= 1.3x) is judged against the faster loop of each round.
- **workers** (needs PostgreSQL): the API server with `NEENS_WORKERS_IN_PROCESS=false` and 1, 2,
  then 4 `neens worker` processes doing the work; calls per second for each, side by side.
- **fault**: 2 `neens worker` processes; once part of the sweep is done, the one holding the most
  jobs is killed with SIGKILL and the other finishes. Every (arm, run, item, judge) must have
  exactly one verdict in the scores table: printed as `lost N, doubled M`.

After every sweep, each arm must have passed with k runs and every item of every run scored
(from the API), and the scores table must hold one verdict per (run, item, judge): a sweep that
did not score everything is no verdict, and the exit code is 1.

    python bench/sweep.py                        # wall and fault, SQLite in a temp dir
    python bench/sweep.py --quick                # a smoke run
    python bench/sweep.py --postgres postgresql+psycopg://postgres@127.0.0.1:5432/neens_bench

It is a measurement, not a test: it exits 0 whether or not a target is met, and 1 only when the
run itself is not trustworthy (a server failed to start, a baseline call failed, or a sweep did
not score every item).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import _support
import httpx
import push_run
from _load import ProcessStats
from _support import ServerProcess, Workspace, console
from push_run import LoadResult, answer_for, create_dataset, process_cpu_seconds
from rich.table import Table
from sqlalchemy import bindparam, create_engine, make_url, text

from neens.demo import endpoints
from neens.domain.sweeps import SWEEP_TERMINAL, arm_shares

TARGET_RATIO = 1.3
DEFAULTS = {"arms": 6, "k": 3, "items": 1_000, "worker_items": 300, "fault_items": 300}
QUICK = {"arms": 3, "k": 2, "items": 100, "worker_items": 100, "fault_items": 300}
WORKER_START_TIMEOUT_S = 60.0
COMPLETED_AT_WAIT_S = 10.0
READ_SAMPLES = 5


def arm_path(arm: int) -> str:
    return f"/arm{arm}"


def _check(response: httpx.Response, what: str) -> dict[str, Any]:
    return push_run._check(response, what)


# ---------------------------------------------------------------------------------------------
# The size of a sweep, and the floors it cannot beat
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    arms: int
    k: int
    items: int

    @property
    def calls(self) -> int:
        return self.arms * self.k * self.items

    def __str__(self) -> str:
        return f"{self.arms} arms x k={self.k} x {self.items:,} items ({self.calls:,} calls)"

    def prompts(self) -> list[str]:
        """Each prompt once per arm and run, arm i's calls at positions i, i + arms, ...: the
        bare loops send prompt n to `arm_path(n % arms)`."""
        one_run = [f"question {n}" for n in range(self.items) for _ in range(self.arms)]
        return one_run * self.k

    def loop_floor(self, concurrency: int, latency_ms: float) -> float:
        """A bare loop's time if calling cost nothing."""
        return math.ceil(self.calls / concurrency) * latency_ms / 1000

    def sweep_floor(self, concurrency: int, latency_ms: float) -> float:
        """A sweep's time if calling cost nothing: each arm runs its k runs one after another on
        its share of the concurrency, so the arm with the smallest share finishes last."""
        smallest = min(arm_shares(concurrency, self.arms))
        return self.k * math.ceil(self.items / smallest) * latency_ms / 1000


# ---------------------------------------------------------------------------------------------
# Neens: the API server, its dataset and connections, and `neens worker` processes
# ---------------------------------------------------------------------------------------------


@dataclass
class SweepTarget(push_run.NeensTarget):
    """A Neens server with a dataset of the prompts, one of warm-up prompts, and a connection
    per arm."""

    database_url: str = ""
    warm_dataset_id: str = ""
    connection_ids: list[str] = field(default_factory=list)
    workers: list[ServerProcess] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        """The processes doing Neens' work: the server and its live workers."""
        return [self.server.popen.pid] + [
            w.popen.pid for w in self.workers if w.popen.poll() is None
        ]


def start_stack(
    ws: Workspace, args: argparse.Namespace, size: Size, *, workers_in_process: bool
) -> tuple[ServerProcess, SweepTarget]:
    """The agent process and a Neens server, healthy, with the datasets and connections."""
    key = ws.create_api_key()
    agent_port, neens_port = _support.free_port(), _support.free_port()
    agent = ws.start_script(
        "Agent",
        __file__,
        [
            "--agent-port",
            str(agent_port),
            "--arms",
            str(size.arms),
            "--latency-ms",
            str(args.latency_ms),
        ],
        agent_port,
    )
    neens = ws.start_neens(neens_port, neens_env(ws, args, workers_in_process=workers_in_process))
    ws.wait_healthy()
    target = SweepTarget(neens, key, database_url=ws.database_url)
    asyncio.run(set_up(target, agent, size, args.warmup))
    return agent, target


def neens_env(
    ws: Workspace, args: argparse.Namespace, *, workers_in_process: bool
) -> dict[str, str]:
    return {
        **ws.env,
        "NEENS_PUSH_CONCURRENCY": str(args.concurrency),
        "NEENS_WORKERS_IN_PROCESS": "true" if workers_in_process else "false",
    }


async def set_up(target: SweepTarget, agent: ServerProcess, size: Size, warmup: int) -> None:
    prompts = [f"question {n}" for n in range(size.items)]
    async with target.client() as client:
        target.dataset_id = await create_dataset(client, f"sweep-{target.tag}", prompts)
        if warmup:
            warm = [f"question {n}" for n in range(size.items, size.items + warmup)]
            target.warm_dataset_id = await create_dataset(
                client, f"sweep-warmup-{target.tag}", warm
            )
        for arm in range(size.arms):
            connection = _check(
                await client.post(
                    "/agent-connections",
                    json={
                        "name": f"sweep-arm{arm}-{target.tag}",
                        "url": f"{agent.url}{arm_path(arm)}",
                        "requestFormat": "neens",
                    },
                ),
                "POST /agent-connections",
            )
            target.connection_ids.append(str(connection["id"]))


def start_workers(
    ws: Workspace, args: argparse.Namespace, count: int, label: str
) -> list[ServerProcess]:
    """`count` `neens worker` processes, waited for until each logs that it started."""
    env = neens_env(ws, args, workers_in_process=False)
    started = []
    for n in range(1, count + 1):
        cmd = [
            sys.executable,
            "-m",
            "neens_eval",
            "worker",
            "--database-url",
            ws.database_url,
            "--log-level",
            "info",
        ]
        worker = _support.start_server(f"worker-{label}-{n}", cmd, 0, ws.workdir, env)
        ws.servers.append(worker)  # stopped with the workspace if not before
        started.append(worker)
    deadline = time.monotonic() + WORKER_START_TIMEOUT_S
    for worker in started:
        while "started" not in worker.log_tail(200):
            if worker.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{worker.name} did not start:\n{worker.log_tail()}")
            time.sleep(0.1)
    return started


def stop_workers(target: SweepTarget) -> None:
    for worker in target.workers:
        worker.stop()
    target.workers = []


def calls_answered(agent: ServerProcess) -> int:
    response = httpx.get(f"{agent.url}{endpoints.CALLS_PATH}", timeout=5.0)
    response.raise_for_status()
    return int(response.json()["total"])


# ---------------------------------------------------------------------------------------------
# One sweep: create, poll until it ends, check that every item was scored exactly once
# ---------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """Verdicts in the scores table for the sweep's (arm, run, item, judge)."""

    expected: int
    lost: int
    """(arm, run slot, item, judge) without a verdict (a run slot never launched counts all)."""
    doubled: int
    """(run, item, judge) with more than one verdict."""


@dataclass
class SweepResult:
    size: Size
    sweep_id: str = ""
    status: str = "not started"
    sweep: dict[str, Any] = field(default_factory=dict)
    create_seconds: float = 0.0
    total_seconds: float | None = None
    """Until a poll first saw a final status."""
    server_seconds: float | None = None
    """The sweep's own createdAt -> completedAt."""
    cpu_seconds: float | None = None
    """CPU of the Neens processes (server and workers) over the sweep."""
    polls: int = 0
    completed_at_polls: int = 0
    """Polls after the sweep read `completed` until its completedAt was set."""
    calls_answered: int | None = None
    timed_out: bool = False
    problems: list[str] = field(default_factory=list)
    tally: Tally | None = None
    read_ms: float | None = None
    """The median `GET /model-sweeps/{id}` of the ended sweep."""

    @property
    def trustworthy(self) -> bool:
        return (
            not self.timed_out
            and not self.problems
            and self.tally is not None
            and self.tally.lost == 0
            and self.tally.doubled == 0
        )

    @property
    def calls_per_s(self) -> float | None:
        return self.size.calls / self.total_seconds if self.total_seconds else None


def _cpu(pids: Sequence[int]) -> dict[int, float]:
    return {pid: cpu for pid in pids if (cpu := process_cpu_seconds(pid)) is not None}


def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


async def run_sweep(
    target: SweepTarget,
    size: Size,
    dataset_id: str,
    label: str,
    args: argparse.Namespace,
    agent: ServerProcess | None = None,
    on_poll: Callable[[dict[str, Any]], None] | None = None,
) -> SweepResult:
    """Create a sweep and poll it every `--poll-ms` until it ends; then check it (API and
    database). `on_poll` sees every poll's sweep while it runs."""
    result = SweepResult(size=size)
    body = {
        "name": label,
        "versionLabel": label,
        "datasetId": dataset_id,
        "passK": size.k,
        "arms": [
            {"label": f"arm{arm}", "agentConnectionId": target.connection_ids[arm]}
            for arm in range(size.arms)
        ],
    }
    poll_s = args.poll_ms / 1000
    async with target.client() as client:
        before_calls = calls_answered(agent) if agent is not None else 0
        start_cpu = _cpu(target.pids)
        start = time.perf_counter()
        sweep = _check(await client.post("/model-sweeps", json=body), "POST /model-sweeps")
        result.create_seconds = time.perf_counter() - start
        result.sweep_id = str(sweep["id"])
        for _ in range(math.ceil(args.max_seconds / poll_s) + 1):  # bounded; and in time below
            now = time.perf_counter() - start
            result.status, result.sweep = sweep["status"], sweep
            if sweep["status"] in SWEEP_TERMINAL:
                result.total_seconds = now
                break
            if now > args.max_seconds:
                break
            if on_poll is not None:
                on_poll(sweep)
            await asyncio.sleep(poll_s)
            result.polls += 1
            sweep = _check(
                await client.get(f"/model-sweeps/{result.sweep_id}"), "GET /model-sweeps/{id}"
            )
        end_cpu = _cpu(target.pids)
        result.timed_out = result.total_seconds is None
        # Killed workers are not in end_cpu: only the processes alive throughout are counted.
        result.cpu_seconds = sum(end_cpu[p] - start_cpu[p] for p in end_cpu if p in start_cpu)
        if agent is not None:
            result.calls_answered = calls_answered(agent) - before_calls
        if result.total_seconds is not None and sweep["completedAt"] is None:
            # A read rolls the sweep up from its runs, so it can say `completed` before the
            # last run's roll-up job has stored when: wait for it, untimed.
            for _ in range(round(COMPLETED_AT_WAIT_S / poll_s)):
                await asyncio.sleep(poll_s)
                sweep = _check(
                    await client.get(f"/model-sweeps/{result.sweep_id}"),
                    "GET /model-sweeps/{id}",
                )
                result.completed_at_polls += 1
                if sweep["completedAt"] is not None:
                    break
        created, completed = _parse_time(sweep["createdAt"]), _parse_time(sweep["completedAt"])
        if created is not None and completed is not None:
            result.server_seconds = (completed - created).total_seconds()
        result.problems = await api_problems(client, sweep, size)
        if result.total_seconds is not None:
            result.read_ms = await read_ms(client, result.sweep_id)
    result.tally = count_verdicts(target, sweep, size)
    return result


async def read_ms(client: httpx.AsyncClient, sweep_id: str) -> float:
    """The median time of `GET /model-sweeps/{id}` on the ended sweep, one request at a time:
    a read rolls the sweep up from its child runs."""
    times = []
    for _ in range(READ_SAMPLES):
        start = time.perf_counter()
        _check(await client.get(f"/model-sweeps/{sweep_id}"), "GET /model-sweeps/{id}")
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def api_problems(client: httpx.AsyncClient, sweep: dict[str, Any], size: Size) -> list[str]:
    """What the API says went short: the sweep not completed, an arm not passed, without k
    runs or with items not done, a run not completed or with an item not scored."""
    problems = []
    if sweep["status"] != "completed":
        problems.append(f"sweep {sweep['id']} ended {sweep['status']} ({sweep.get('reason')})")
    for arm in sweep["arms"]:
        name, progress = arm["label"], arm["progress"]
        if arm["passed"] is not True:
            problems.append(f"{name}: passed is {arm['passed']} ({arm['status']}, {arm['error']})")
        if len(arm["runIds"]) != size.k or progress["runsFinished"] != size.k:
            problems.append(
                f"{name}: {len(arm['runIds'])} runs, {progress['runsFinished']} finished, "
                f"for k={size.k}"
            )
        if not progress["itemsDone"] == progress["itemsTotal"] == size.k * size.items:
            problems.append(
                f"{name}: {progress['itemsDone']:,} of {progress['itemsTotal']:,} items done, "
                f"for {size.k * size.items:,}"
            )
        for run_id in arm["runIds"]:
            run = _check(await client.get(f"/preprod-evals/{run_id}"), "GET /preprod-evals/{id}")
            if run["status"] != "completed" or run["counts"].get("scored") != size.items:
                problems.append(
                    f"{name}: run {run_id} ended {run['status']} with counts {run['counts']}"
                )
    return problems


def sync_url(database_url: str) -> str:
    """The database's URL for a synchronous SQLAlchemy engine."""
    url = make_url(database_url)
    driver = "postgresql+psycopg" if url.get_backend_name() == "postgresql" else "sqlite"
    return url.set(drivername=driver).render_as_string(hide_password=False)


def count_verdicts(target: SweepTarget, sweep: dict[str, Any], size: Size) -> Tally:
    """Counts, in the scores table, the verdicts of every (arm, run slot, item, judge) the sweep
    planned: none is lost, two or more for one (run, item, judge) is doubled."""
    engine = create_engine(sync_url(target.database_url))
    run_ids = [run_id for arm in sweep["arms"] for run_id in arm["runIds"]]
    try:
        with engine.connect() as conn:
            items = list(
                conn.execute(
                    text("SELECT id FROM dataset_items WHERE version_id = :version"),
                    {"version": sweep["datasetVersionId"]},
                ).scalars()
            )
            rows = conn.execute(
                text(
                    "SELECT run_id, item_id, judge_id, count(*) FROM scores "
                    "WHERE run_id IN :runs GROUP BY run_id, item_id, judge_id"
                ).bindparams(bindparam("runs", expanding=True)),
                {"runs": run_ids or [""]},
            ).all()
    finally:
        engine.dispose()
    verdicts = {(run, item, judge): int(n) for run, item, judge, n in rows}
    judges = sweep["judgeDeploymentIds"]
    per_run = len(items) * len(judges)
    lost = 0
    for arm in sweep["arms"]:
        lost += per_run * max(0, size.k - len(arm["runIds"]))
        for run_id in arm["runIds"]:
            lost += sum(
                1 for item in items for judge in judges if (run_id, item, judge) not in verdicts
            )
    doubled = sum(1 for n in verdicts.values() if n > 1)
    return Tally(expected=per_run * size.arms * size.k, lost=lost, doubled=doubled)


def report_problems(name: str, result: SweepResult) -> None:
    if result.timed_out:
        console.print(f"[red]{name}: the sweep did not end (last status {result.status})[/red]")
    for problem in result.problems[:10]:
        console.print(f"[red]{name}: {problem}[/red]")
    if len(result.problems) > 10:
        console.print(f"[red]{name}: ... and {len(result.problems) - 10} more[/red]")
    if result.tally is not None and (result.tally.lost or result.tally.doubled):
        console.print(
            f"[red]{name}: {result.tally.lost:,} verdicts lost, {result.tally.doubled:,} "
            f"doubled, of {result.tally.expected:,}[/red]"
        )


def _ratio(value: float | None, baseline: float) -> str:
    return f"{value / baseline:.2f}x" if value is not None and baseline > 0 else "n/a"


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x (min {min(values):.2f}, max {max(values):.2f})"


def _seconds(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "n/a"


def warm_up(target: SweepTarget, size: Size, args: argparse.Namespace, name: str) -> None:
    """An untimed sweep of k=1 over the warm-up prompts, on every arm."""
    if not args.warmup:
        return
    warm = asyncio.run(
        run_sweep(
            target,
            Size(size.arms, 1, args.warmup),
            target.warm_dataset_id,
            f"warmup-{name}-{uuid.uuid4().hex[:6]}",
            args,
        )
    )
    if not warm.trustworthy:
        console.print(f"[yellow]{name}: the warm-up sweep fell short[/yellow]")
        report_problems(f"{name} warm-up", warm)


# ---------------------------------------------------------------------------------------------
# Part 1, wall: a sweep against the bare loops
# ---------------------------------------------------------------------------------------------


@dataclass
class WallRound:
    httpx: LoadResult
    aiohttp: LoadResult
    neens: SweepResult

    @property
    def floor(self) -> LoadResult:
        """The faster of the two bare loops: the figure the target is judged against."""
        return min(self.httpx, self.aiohttp, key=lambda loop: loop.seconds)


def part_wall(args: argparse.Namespace) -> bool:
    size = Size(args.arms, args.k, args.items)
    prompts = size.prompts()
    paths = [arm_path(arm) for arm in range(size.arms)]
    warm_prompts = [f"question {n}" for n in range(args.warmup * size.arms)]
    with _support.workspace(args.database_url) as ws:
        try:
            agent, target = start_stack(ws, args, size, workers_in_process=True)
            warm_up(target, size, args, "wall")
            for measure in (push_run.measure_httpx, push_run.measure_aiohttp):
                asyncio.run(
                    measure(agent.url, [], warm_prompts, args.concurrency, args.max_seconds, paths)
                )
            rounds: list[WallRound] = []
            for round_no in range(1, args.rounds + 1):
                sides = ["httpx", "aiohttp", "neens"]
                shift = (round_no - 1) % len(sides)  # each side goes first in turn
                done: dict[str, Any] = {}
                for side in sides[shift:] + sides[:shift]:
                    if side == "neens":
                        done[side] = asyncio.run(
                            run_sweep(
                                target, size, target.dataset_id, f"wall-{round_no}", args, agent
                            )
                        )
                        continue
                    measure = (
                        push_run.measure_httpx if side == "httpx" else push_run.measure_aiohttp
                    )
                    done[side] = asyncio.run(
                        measure(agent.url, [], prompts, args.concurrency, args.max_seconds, paths)
                    )[1]
                rounds.append(WallRound(done["httpx"], done["aiohttp"], done["neens"]))
                console.print(f"round {round_no}/{args.rounds} done")
            peak = ProcessStats.of(target.server.popen.pid).peak_rss_mb
            trustworthy = report_wall(rounds, args, size, ws.db_label, peak)
        except (RuntimeError, httpx.HTTPError, subprocess.TimeoutExpired) as exc:
            console.print(f"[red]wall: the benchmark could not run: {exc}[/red]")
            trustworthy = False
        if not trustworthy:
            for server in ws.servers:
                console.print(f"[dim]{server.name} log tail:\n{server.log_tail(15)}[/dim]")
        return trustworthy


def report_wall(
    rounds: list[WallRound], args: argparse.Namespace, size: Size, db_label: str, peak_mb: float
) -> bool:
    loop_floor = size.loop_floor(args.concurrency, args.latency_ms)
    sweep_floor = size.sweep_floor(args.concurrency, args.latency_ms)
    table = Table(
        title=f"Sweep wall time: {size}, {args.concurrency} in flight, {args.latency_ms:g} ms "
        f"endpoints, Neens on {db_label}, {len(rounds)} interleaved rounds (latency floor: "
        f"bare loop {loop_floor:.1f} s, sweep {sweep_floor:.1f} s)"
    )
    for column in (
        "round",
        "httpx s",
        "httpx cpu s",
        "aiohttp s",
        "aiohttp cpu s",
        "neens s",
        "server-side s",
        "neens cpu s",
        "neens / faster loop",
        "neens / httpx",
        "failed",
    ):
        table.add_column(column, justify="right")
    for i, r in enumerate(rounds, start=1):
        table.add_row(
            f"{i}",
            f"{r.httpx.seconds:.2f}",
            f"{r.httpx.cpu_seconds:.2f}",
            f"{r.aiohttp.seconds:.2f}",
            f"{r.aiohttp.cpu_seconds:.2f}",
            _seconds(r.neens.total_seconds),
            _seconds(r.neens.server_seconds),
            _seconds(r.neens.cpu_seconds),
            _ratio(r.neens.total_seconds, r.floor.seconds),
            _ratio(r.neens.total_seconds, r.httpx.seconds),
            f"{r.httpx.failures + r.aiohttp.failures + len(r.neens.problems):,}",
        )
    console.print(table)
    last = rounds[-1].neens
    cpu_ms = (last.cpu_seconds or 0) / size.calls * 1000
    console.print(
        f"Last sweep {last.sweep_id}: {last.status}; POST /model-sweeps took "
        f"{last.create_seconds * 1000:.0f} ms; {last.polls} polls; the endpoints answered "
        f"{last.calls_answered:,} calls; {cpu_ms:.2f} ms of Neens server CPU a call; Neens peak "
        f"RSS {peak_mb:,.0f} MB; GET /model-sweeps/{{id}} of the ended sweep "
        f"{_seconds(last.read_ms and last.read_ms / 1000)} s (median of {READ_SAMPLES})"
    )
    if last.tally is not None:
        console.print(
            f"Scores table, last sweep: {last.tally.expected:,} (arm, run, item, judge) planned, "
            f"lost {last.tally.lost}, doubled {last.tally.doubled}"
        )
    lagging = [i for i, r in enumerate(rounds, start=1) if r.neens.completed_at_polls]
    if lagging:
        console.print(
            f"[yellow]rounds {lagging}: GET /model-sweeps/{{id}} answered `completed` with "
            "completedAt still null (the read rolls up the runs before the last roll-up job "
            "stores the end)[/yellow]"
        )
    console.print(
        "[dim]'neens s' is from POST /model-sweeps until a poll (every "
        f"{args.poll_ms:g} ms) sees the sweep completed: every arm's k runs one after another, "
        "each call answered, recorded and scored with the default judge. 'server-side s' is the "
        "sweep's createdAt -> completedAt. 'cpu s' is the CPU of the side making the calls: this "
        "process for the bare loops, the Neens server (all threads) for Neens. The sweep floor "
        "is above the bare loop's: each arm holds only its share of the concurrency, so the arms "
        "with the smallest share finish last, with the others' slots idle.[/dim]"
    )
    trustworthy = True
    for i, r in enumerate(rounds, start=1):
        for name, loop in (("httpx", r.httpx), ("aiohttp", r.aiohttp)):
            if not _support.report_failures(f"round {i} {name} loop", loop, "calls"):
                trustworthy = False
        if not r.neens.trustworthy:
            trustworthy = False
            report_problems(f"round {i} neens", r.neens)
        if r.neens.calls_answered is not None and r.neens.calls_answered != size.calls:
            console.print(
                f"[yellow]round {i}: the endpoints answered {r.neens.calls_answered:,} calls "
                f"during the sweep, for {size.calls:,} planned[/yellow]"
            )
    if not trustworthy:
        console.print("[red]NO VERDICT: the run had errors (see above)[/red]")
        return False
    complete = [(r.neens.total_seconds or math.inf) / r.floor.seconds for r in rounds]
    versus_httpx = [(r.neens.total_seconds or math.inf) / r.httpx.seconds for r in rounds]
    server_side = [
        r.neens.server_seconds / r.floor.seconds for r in rounds if r.neens.server_seconds
    ]
    console.print(f"paired ratio sweep / httpx loop: {_spread(versus_httpx)} (shown)")
    if server_side:
        console.print(
            f"paired ratio sweep server-side / faster loop: {_spread(server_side)} (shown)"
        )
    median = statistics.median(complete)
    verdict = "[green]target met[/green]" if median <= TARGET_RATIO else "[red]TARGET MISSED[/red]"
    console.print(
        f"paired ratio sweep / faster loop: {_spread(complete)} (target <= {TARGET_RATIO:.1f}x): "
        f"{verdict}"
    )
    return True


# ---------------------------------------------------------------------------------------------
# Part 2, workers: the same sweep with 1, 2 and 4 `neens worker` processes on PostgreSQL
# ---------------------------------------------------------------------------------------------


def part_workers(args: argparse.Namespace) -> bool:
    size = Size(args.arms, args.k, args.worker_items)
    results: dict[int, SweepResult] = {}
    with _support.workspace(args.postgres) as ws:
        try:
            agent, target = start_stack(ws, args, size, workers_in_process=False)
            prompts = size.prompts()
            paths = [arm_path(arm) for arm in range(size.arms)]
            loop = asyncio.run(
                push_run.measure_aiohttp(
                    agent.url, [], prompts, args.concurrency, args.max_seconds, paths
                )
            )[1]
            for count in args.worker_counts:
                target.workers = start_workers(ws, args, count, f"{count}")
                warm_up(target, size, args, f"{count} workers")
                results[count] = asyncio.run(
                    run_sweep(target, size, target.dataset_id, f"workers-{count}", args, agent)
                )
                stop_workers(target)
                console.print(f"{count} workers done")
            trustworthy = report_workers(results, loop, args, size)
        except (RuntimeError, httpx.HTTPError, subprocess.TimeoutExpired) as exc:
            console.print(f"[red]workers: the benchmark could not run: {exc}[/red]")
            trustworthy = False
        if not trustworthy:
            for server in ws.servers:
                console.print(f"[dim]{server.name} log tail:\n{server.log_tail(15)}[/dim]")
        return trustworthy


def report_workers(
    results: dict[int, SweepResult], loop: LoadResult, args: argparse.Namespace, size: Size
) -> bool:
    table = Table(
        title=f"Sweep throughput by `neens worker` processes on PostgreSQL: {size}, "
        f"{args.concurrency} in flight, {args.latency_ms:g} ms endpoints (bare aiohttp loop: "
        f"{size.calls / loop.seconds:,.0f} calls/s; sweep latency floor "
        f"{size.calls / size.sweep_floor(args.concurrency, args.latency_ms):,.0f} calls/s)"
    )
    for column in ("workers", "sweep s", "calls/s", "vs 1 worker", "cpu s", "cpu ms/call", "ok"):
        table.add_column(column, justify="right")
    first = results[min(results)].calls_per_s if results else None
    for count, result in results.items():
        rate = result.calls_per_s
        cpu = result.cpu_seconds
        table.add_row(
            f"{count}",
            _seconds(result.total_seconds),
            f"{rate:,.0f}" if rate else "n/a",
            f"{rate / first:.2f}x" if rate and first else "n/a",
            _seconds(cpu),
            f"{cpu / size.calls * 1000:.2f}" if cpu is not None else "n/a",
            "yes" if result.trustworthy else "[red]no[/red]",
        )
    console.print(table)
    console.print(
        "[dim]The API server runs with NEENS_WORKERS_IN_PROCESS=false; the workers take every "
        "job. Each worker count gets fresh worker processes and an untimed warm-up sweep first. "
        "'cpu s' adds up the API server and the workers (PostgreSQL's own processes are not "
        "counted). The sweep's concurrency is the same for every count, so more workers help "
        "only where one worker's CPU was the limit.[/dim]"
    )
    trustworthy = _support.report_failures("aiohttp loop", loop, "calls")
    for count, result in results.items():
        if not result.trustworthy:
            trustworthy = False
            report_problems(f"{count} workers", result)
    if not trustworthy:
        console.print("[red]NO VERDICT: the run had errors (see above)[/red]")
    return trustworthy


# ---------------------------------------------------------------------------------------------
# Part 3, fault: kill -9 a worker mid-sweep
# ---------------------------------------------------------------------------------------------


def jobs_by_worker(database_url: str) -> dict[str, int]:
    """Running jobs per worker name (`host:pid:...`)."""
    engine = create_engine(sync_url(database_url))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT worker, count(*) FROM jobs WHERE status = 'running' GROUP BY worker")
            ).all()
    finally:
        engine.dispose()
    return {str(worker): int(n) for worker, n in rows if worker}


@dataclass
class Kill:
    """Kills the worker holding the most running jobs once `fraction` of the items are done."""

    target: SweepTarget
    fraction: float
    killed: ServerProcess | None = None
    jobs_held: int = 0
    at_items: int = 0
    at_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    def __call__(self, sweep: dict[str, Any]) -> None:
        if self.killed is not None:
            return
        done = sum(arm["progress"]["itemsDone"] for arm in sweep["arms"])
        total = sum(arm["progress"]["itemsTotal"] for arm in sweep["arms"])
        if total == 0 or done < self.fraction * total:
            return
        held = jobs_by_worker(self.target.database_url)
        by_pid = {w.popen.pid: w for w in self.target.workers}
        holding = [
            (n, by_pid[pid])
            for name, n in held.items()
            if (pid := _pid_of(name)) is not None and pid in by_pid
        ]
        if not holding:
            return  # between jobs: try again at the next poll
        self.jobs_held, victim = max(holding, key=lambda pair: pair[0])
        os.kill(victim.popen.pid, signal.SIGKILL)
        victim.popen.wait(10)
        self.killed, self.at_items = victim, done
        self.at_seconds = time.perf_counter() - self.started


def _pid_of(worker_name: str) -> int | None:
    parts = worker_name.split(":")
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else None


def part_fault(args: argparse.Namespace) -> bool:
    size = Size(args.arms, args.k, args.fault_items)
    with _support.workspace(args.postgres or args.database_url) as ws:
        try:
            agent, target = start_stack(ws, args, size, workers_in_process=False)
            target.workers = start_workers(ws, args, args.fault_workers, "fault")
            warm_up(target, size, args, "fault")
            kill = Kill(target, args.kill_at)
            result = asyncio.run(
                run_sweep(target, size, target.dataset_id, "fault", args, agent, on_poll=kill)
            )
            trustworthy = report_fault(result, kill, args, size, ws.db_label)
        except (RuntimeError, httpx.HTTPError, subprocess.TimeoutExpired) as exc:
            console.print(f"[red]fault: the benchmark could not run: {exc}[/red]")
            trustworthy = False
        if not trustworthy:
            for server in ws.servers:
                console.print(f"[dim]{server.name} log tail:\n{server.log_tail(15)}[/dim]")
        return trustworthy


def report_fault(
    result: SweepResult, kill: Kill, args: argparse.Namespace, size: Size, db_label: str
) -> bool:
    console.print(
        f"[bold]Fault run[/bold]: {size} on {db_label}, {args.fault_workers} `neens worker` "
        f"processes, one killed with SIGKILL once {args.kill_at:.0%} of the items were done"
    )
    if kill.killed is None:
        console.print(
            "[red]NO VERDICT: the sweep ended before a worker holding a job could be killed "
            "(raise --fault-items)[/red]"
        )
        return False
    answered = result.calls_answered or 0
    console.print(
        f"killed {kill.killed.name} (pid {kill.killed.popen.pid}, holding {kill.jobs_held} "
        f"running jobs) after {kill.at_seconds:.1f} s, at {kill.at_items:,} of "
        f"{size.k * size.items * size.arms:,} items done; the sweep ended {result.status} "
        f"after {_seconds(result.total_seconds)} s; the endpoints answered {answered:,} calls "
        f"for {size.calls:,} planned ({answered - size.calls:,} asked again after the kill)"
    )
    if result.tally is None:
        return False
    tally = result.tally
    met = tally.lost == 0 and tally.doubled == 0
    colour = "green" if met else "red"
    console.print(
        f"[{colour}]lost {tally.lost}, doubled {tally.doubled}[/{colour}] of {tally.expected:,} "
        "(arm, run, item, judge) verdicts, counted in the scores table (target: lost 0, "
        f"doubled 0): {'[green]target met[/green]' if met else '[red]TARGET MISSED[/red]'}"
    )
    if result.timed_out or result.problems:
        report_problems("fault", result)
        console.print("[red]NO VERDICT: the sweep did not finish cleanly (see above)[/red]")
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="A Neens model sweep against bare client loops making the same calls; its "
        "throughput with 1, 2 and 4 workers on PostgreSQL; and a worker killed mid-sweep."
    )
    parser.add_argument(
        "--part",
        choices=["wall", "workers", "fault", "all"],
        default="all",
        help="what to run (default all: wall and fault, and workers when a PostgreSQL database "
        "is given)",
    )
    for name, what in (
        ("arms", "arms (agent endpoints)"),
        ("k", "runs per arm (passK)"),
        ("items", "golden items of the wall part"),
        ("worker-items", "golden items of the workers part"),
        ("fault-items", "golden items of the fault part"),
    ):
        key = name.replace("-", "_")
        parser.add_argument(
            f"--{name}",
            type=int,
            default=None,
            help=f"{what} (default {DEFAULTS[key]:,}; {QUICK[key]:,} with --quick)",
        )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="calls in flight, for the bare loops and as NEENS_PUSH_CONCURRENCY (default 32)",
    )
    parser.add_argument(
        "--latency-ms", type=float, default=50.0, help="each endpoint's latency (default 50)"
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="interleaved rounds of the wall part (default 2)"
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=32,
        help="items of the untimed k=1 warm-up sweep before the timed ones, and calls per arm "
        "of each bare loop's warm-up (default 32; 0 for none)",
    )
    _support.add_database_url_option(parser)
    parser.add_argument(
        "--postgres",
        metavar="URL",
        default=None,
        help="PostgreSQL database for the workers and fault parts (default: --database-url when "
        "it is PostgreSQL); the run adds rows to it",
    )
    parser.add_argument(
        "--worker-counts",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 2, 4],
        help="`neens worker` processes to try, comma-separated (default 1,2,4)",
    )
    parser.add_argument(
        "--fault-workers", type=int, default=2, help="workers of the fault part (default 2)"
    )
    parser.add_argument(
        "--kill-at",
        type=float,
        default=0.3,
        help="fraction of the items done when a worker is killed (default 0.3)",
    )
    parser.add_argument(
        "--poll-ms", type=float, default=200.0, help="GET /model-sweeps/{id} every (default 200)"
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=900.0,
        help="give up on a bare loop or a sweep after this long (default 900)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: the --quick sizes above, unless given",
    )
    parser.add_argument("--agent-port", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else DEFAULTS
    for key, value in sizes.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.postgres is None and args.database_url is not None:
        if make_url(args.database_url).get_backend_name() == "postgresql":
            args.postgres = args.database_url
    if args.agent_port is None:
        if args.part == "workers" and args.postgres is None:
            parser.error("--part workers needs PostgreSQL: give --postgres URL")
        if (
            min(args.arms, args.k, args.items, args.worker_items, args.fault_items) < 1
            or args.arms < 2
            or args.concurrency < 1
            or args.rounds < 1
            or args.warmup < 0
            or args.fault_workers < 2
            or not 0 < args.kill_at < 1
            or min(args.worker_counts) < 1
        ):
            parser.error(
                "--arms must be >= 2, --fault-workers >= 2, the sizes, --concurrency, --rounds "
                "and --worker-counts >= 1, --warmup >= 0, and --kill-at between 0 and 1"
            )
    return args


def run(args: argparse.Namespace) -> int:
    console.width = max(console.width, 132)  # the tables are wide; keep them readable in a pipe
    load = _support.load_average()
    console.print(
        _support.machine_summary()
        + (f" (1-min load average {load:.2f} before starting)" if load is not None else "")
        + f"; concurrency {args.concurrency}, endpoint latency {args.latency_ms:g} ms"
    )
    _support.warn_if_busy(load)
    parts = [args.part] if args.part != "all" else ["wall", "workers", "fault"]
    if "workers" in parts and args.postgres is None:
        parts.remove("workers")
        console.print("[dim]workers part skipped: it needs --postgres URL[/dim]")
    trustworthy = True
    for part in parts:
        console.rule(part)
        ok = {"wall": part_wall, "workers": part_workers, "fault": part_fault}[part](args)
        trustworthy = trustworthy and ok
        load = _support.load_average()
        if load is not None:
            console.print(f"[dim]1-min load average after the {part} part: {load:.2f}[/dim]")
    return 0 if trustworthy else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.agent_port is not None:
        latency = args.latency_ms / 1000
        arms = [
            endpoints.steady(answer_for, path=arm_path(arm), latency_s=latency)
            for arm in range(args.arms)
        ]
        endpoints.run(*arms, port=args.agent_port)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
