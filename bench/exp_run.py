"""`neens exp run` against bare loops doing the same calls.

- **http**: `--cases` cases of an http task (the neens request format) against a stand-in agent
  endpoint answering after `--latency-ms` (50 ms), at `--concurrency` (32), every answer graded
  (`exact`) and saved as it finishes, against the bare httpx and aiohttp loops of
  `bench/push_run.py` making the same calls at the same concurrency. Target: <= 1.3x the faster
  loop.
- **command**: `--command-cases` cases of a command task (`cat`: the input comes back as the
  answer) against `xargs -P` running the same command once per input at the same concurrency.

Neens is timed in this process from the start of the `exp run` command to its end (store
opened and migrated, dataset read, every case run, graded and saved, the summary printed):
what a run costs, without the interpreter's start-up, which is printed apart (one `neens exp
list` process). Interleaved rounds; the median and spread of the paired ratios are the result.
Each run's summary is checked: every case passed, none errored.

    .venv/bin/python bench/exp_run.py            # 1,000 http cases, 200 command cases
    .venv/bin/python bench/exp_run.py --quick    # 200 http cases, 50 command cases
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _support
import push_run
from _support import console

TARGET_RATIO = 1.3


def _write_project(workdir: Path, agent_url: str, cases: int, command_cases: int) -> None:
    (workdir / "datasets").mkdir(exist_ok=True)
    with (workdir / "datasets" / "http.jsonl").open("w") as f:
        for n in range(cases):
            case = {"id": f"q{n}", "input": f"question {n}", "expected": f"answer {n}"}
            f.write(json.dumps(case) + "\n")
    with (workdir / "datasets" / "command.jsonl").open("w") as f:
        for n in range(command_cases):
            f.write(json.dumps({"id": f"c{n}", "input": f"input {n}", "expected": f"input {n}"}))
            f.write("\n")
    http = {
        "name": "bench-http",
        "dataset": "http",
        "task": {"kind": "http", "url": f"{agent_url}{push_run.AGENT_PATH}"},
        "graders": [{"kind": "exact"}],
    }
    command = {
        "name": "bench-command",
        "dataset": "command",
        "task": {"kind": "command", "command": "cat"},
        "graders": [{"kind": "exact"}],
    }
    (workdir / "http.json").write_text(json.dumps(http))
    (workdir / "command.json").write_text(json.dumps(command))


def _exp_run(spec: str, concurrency: int, database_url: str, expected: int) -> float:
    """Run `neens exp run` in this process; its wall time. RuntimeError unless every case
    passed."""
    from neens_eval.cli import main

    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "exp",
                "run",
                spec,
                "--concurrency",
                str(concurrency),
                "--json",
                "--database-url",
                database_url,
            ]
        )
    seconds = time.perf_counter() - started
    body = json.loads(out.getvalue())
    if code != 0 or body["passed"] != expected or body["errors"] != {"infra": 0, "agent": 0}:
        raise RuntimeError(f"exp run {spec} did not pass every case: {body}")
    return seconds


def _xargs(workdir: Path, inputs: list[str], concurrency: int) -> float:
    started = time.perf_counter()
    result = subprocess.run(
        ["xargs", "-0", "-P", str(concurrency), "-n", "1", "sh", "-c", 'printf %s "$0" | cat'],
        input="\0".join(inputs).encode(),
        cwd=workdir,
        capture_output=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"xargs failed: {result.stderr[:300]!r}")
    return seconds


def _startup_seconds(workdir: Path, database_url: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "neens_eval", "exp", "list", "--database-url", database_url],
        cwd=workdir,
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - started


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}x–{max(values):.2f}x" if len(values) > 1 else ""


def run(args: argparse.Namespace) -> int:
    console.print(
        f"{_support.machine_summary()}; {args.cases:,} http cases at {args.latency_ms:g} ms, "
        f"{args.command_cases:,} command cases, concurrency {args.concurrency}, "
        f"{args.rounds} rounds"
    )
    _support.warn_if_busy(_support.load_average())
    with _support.workspace(args.database_url) as ws:
        try:
            port = _support.free_port()
            agent = ws.start_script(
                "Agent",
                push_run.__file__,
                ["--agent-port", str(port), "--latency-ms", str(args.latency_ms)],
                port,
            )
            ws.wait_healthy()
            _write_project(ws.workdir, agent.url, args.cases, args.command_cases)
            os.chdir(ws.workdir)
            prompts = [f"question {n}" for n in range(args.cases)]
            inputs = [f"input {n}" for n in range(args.command_cases)]
            # Warm-up: the store migrated, the pools and the agent warmed.
            _exp_run("http.json", args.concurrency, ws.database_url, args.cases)
            http_ratios, command_ratios = [], []
            for round_no in range(1, args.rounds + 1):
                loops = {}
                for name, measure in (
                    ("httpx", push_run.measure_httpx),
                    ("aiohttp", push_run.measure_aiohttp),
                ):
                    timed = asyncio.run(
                        measure(agent.url, [], prompts, args.concurrency, args.max_seconds)
                    )[1]
                    if timed.ok != len(prompts):
                        raise RuntimeError(f"the {name} loop failed: {timed.first_error}")
                    loops[name] = timed.seconds
                neens = _exp_run("http.json", args.concurrency, ws.database_url, args.cases)
                floor = min(loops.values())
                http_ratios.append(neens / floor)
                xargs = _xargs(ws.workdir, inputs, args.concurrency)
                command = _exp_run(
                    "command.json", args.concurrency, ws.database_url, args.command_cases
                )
                command_ratios.append(command / xargs)
                console.print(
                    f"round {round_no}: http neens {neens:.2f} s, httpx {loops['httpx']:.2f} s, "
                    f"aiohttp {loops['aiohttp']:.2f} s ({http_ratios[-1]:.2f}x); command neens "
                    f"{command:.2f} s, xargs -P {xargs:.2f} s ({command_ratios[-1]:.2f}x)"
                )
            startup = _startup_seconds(ws.workdir, ws.database_url)
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            console.print(f"[red]benchmark could not run: {exc}[/red]")
            for server in ws.servers:
                console.print(f"[dim]{server.name} log tail:\n{server.log_tail()}[/dim]")
            return 1
    median = statistics.median(http_ratios)
    verdict = "meets" if median <= TARGET_RATIO else "misses"
    console.print(
        f"http: neens / the faster bare loop, median {median:.2f}x {_spread(http_ratios)} "
        f"({verdict} the <= {TARGET_RATIO}x target)"
    )
    console.print(
        f"command: neens / xargs -P, median {statistics.median(command_ratios):.2f}x "
        f"{_spread(command_ratios)}"
    )
    console.print(f"start-up of a `neens exp` process (not in the ratios): {startup:.2f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1_000)
    parser.add_argument("--command-cases", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--quick", action="store_true", help="200 http and 50 command cases")
    _support.add_database_url_option(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.cases, args.command_cases, args.rounds = 200, 50, 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
