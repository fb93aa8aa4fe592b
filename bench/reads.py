"""Reads at scale: does listing sessions stay as fast at 1,000,000 sessions as at 10,000?

Loads `--small` and then `--large` sessions (realistic rows, written straight into the database
in bulk, not through HTTP) into two fresh databases, starts `neens serve` on each in turn and
times, one request at a time, the first page of `GET /sessions`, a deep page reached by cursor,
each filter `GET /sessions` supports, and one `GET /sessions/{id}`. For each query it prints the
p50 and p99 at both sizes and the ratio large/small, against the target: <= 1.5x.

    .venv/bin/python bench/reads.py            # 10k vs 1M on SQLite (a few minutes)
    .venv/bin/python bench/reads.py --quick    # 10k vs 100k, for a smoke run
    .venv/bin/python bench/reads.py --postgres postgresql+psycopg://postgres@127.0.0.1/neens_bench
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import _load
import _support
import httpx
from _support import console
from sqlalchemy import create_engine, text

from neens.api.paging import encode_cursor
from neens.secrets import SecretBox, box_from_keys, parse_keys

TARGET_RATIO = 1.5
NEWEST = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
"""When the newest loaded session started; the others spread over the `DAYS` before it."""
DAYS = 30
AGENTS = 20
RUN_SIZE = 100
"""Sessions per pre-prod run; one session in `TAGGED_EVERY` belongs to a run."""
TAGGED_EVERY = 100
SPANS_EVERY = 100
"""One session in this many is stored with its spans (4 each), among them the one fetched."""
CHUNK = 20_000
LIMIT = 50


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------

MODELS = ["gpt-4o", "gpt-4o-mini", "claude-sonnet-4", "llama-3.1-70b"]
QUESTIONS = [
    "Where is my order {n}? It was supposed to arrive on Monday and the tracking page is empty.",
    "Can I change the shipping address of order {n} to my office instead of home?",
    "I was charged twice for order {n}; please refund the second charge to my card.",
    "What is the return policy for a jacket bought in the winter sale (order {n})?",
]


def _started(i: int, count: int) -> datetime:
    """Session `i` of `count` (0 = oldest) starts at an even spacing over `DAYS` days."""
    step = timedelta(days=DAYS) / count
    return NEWEST - step * (count - 1 - i)


def _run_id(i: int) -> str | None:
    if i % TAGGED_EVERY:
        return None
    return f"ppr_bench{i // (TAGGED_EVERY * RUN_SIZE):06d}"


SESSION_COLUMNS = (
    "pk project_id trace_id source agent_name input output models input_tokens output_tokens "
    "latency_ms step_count span_count cost_usd cost_status unpriced status started_at ended_at "
    "eval_run_id dataset_item_id version_label warnings created_at updated_at"
).split()
SPAN_COLUMNS = (
    "session_pk span_id parent_span_id name kind start_time end_time status_code attributes "
    "resource_attributes events input output agent_name model"
).split()
SPAN_SHAPES = [("agent.run", "agent"), ("chat", "llm"), ("lookup_order", "tool"), ("chat", "llm")]
MIX = 0x9E3779B97F4A7C15
"""An odd constant: i * MIX mod 2**128 is a different 128-bit trace id for every i."""


def _session_rows(
    project_id: str, start: int, stop: int, count: int, stamp: Any
) -> list[tuple[Any, ...]]:
    """Sessions `start`..`stop` of `count` as column tuples (`SESSION_COLUMNS`), values as the
    driver takes them (`stamp` formats a datetime)."""
    rows = []
    for i in range(start, stop):
        started = _started(i, count)
        latency = 400 + (i * 7919) % 8600
        ended = started + timedelta(milliseconds=latency)
        model = MODELS[i % len(MODELS)]
        tokens_in, tokens_out = 200 + (i * 31) % 5800, 20 + (i * 17) % 880
        run = _run_id(i)
        rows.append(
            (
                i + 1,  # the server adds no session during the run: no sequence to move
                project_id,
                f"{(i * MIX) % 2**128:032x}",
                "otlp",
                f"agent-{i % AGENTS:02d}",
                QUESTIONS[i % len(QUESTIONS)].format(n=100_000 + i),
                f"Thanks for reaching out about order {100_000 + i}. " * 3,
                f'["{model}"]',
                tokens_in,
                tokens_out,
                float(latency),
                1 + i % 8,
                4,
                (tokens_in * 2.5 + tokens_out * 10) / 1e6,
                "priced",
                "[]",
                "error" if i % 37 == 0 else "ok",
                stamp(started),
                stamp(ended),
                run,
                f"dsi_{i:010d}" if run else None,
                "release-2.1" if run else None,
                "[]",
                stamp(ended),
                stamp(ended),
            )
        )
    return rows


def _span_rows(sessions: list[tuple[Any, ...]], count: int, stamp: Any) -> list[tuple[Any, ...]]:
    """Four spans (`SPAN_COLUMNS`) for each of `sessions` whose index is a multiple of
    `SPANS_EVERY`."""
    rows = []
    for s in sessions:
        pk = s[0]
        if (pk - 1) % SPANS_EVERY:
            continue
        started = _started(pk - 1, count)
        agent, question, answer, model = s[4], s[5], s[6], MODELS[(pk - 1) % len(MODELS)]
        root = f"{pk:012x}{0:04x}"
        for n, (name, kind) in enumerate(SPAN_SHAPES):
            attributes = (
                {"gen_ai.request.model": model, "gen_ai.usage.input_tokens": s[8]}
                if kind == "llm"
                else {"input.value": question}
            )
            rows.append(
                (
                    pk,
                    f"{pk:012x}{n:04x}",
                    None if n == 0 else root,
                    name,
                    kind,
                    stamp(started + timedelta(milliseconds=10 * n)),
                    stamp(started + timedelta(milliseconds=s[10] - 10 * n)),
                    "OK",
                    json.dumps(attributes),
                    json.dumps({"service.name": agent}),
                    "[]",
                    question if n < 2 else None,
                    answer if n == 0 else None,
                    agent,
                    model if kind == "llm" else None,
                )
            )
    return rows


def load(database_url: str, project_id: str, count: int) -> float:
    """Writes `count` sessions (and the spans of one in `SPANS_EVERY`) in bulk, in one
    transaction, straight through the database driver; the seconds it took, statistics
    refreshed."""
    engine = create_engine(database_url)
    postgres = engine.dialect.name == "postgresql"
    stamp = (lambda value: value) if postgres else _support.sqlite_stamp
    write = _support.insert_postgres if postgres else _support.insert_sqlite
    begin = time.perf_counter()
    try:
        raw = engine.raw_connection()
        try:
            driver = raw.driver_connection
            for start in range(0, count, CHUNK):
                stop = min(count, start + CHUNK)
                sessions = _session_rows(project_id, start, stop, count, stamp)
                write(driver, "sessions", SESSION_COLUMNS, sessions)
                write(driver, "spans", SPAN_COLUMNS, _span_rows(sessions, count, stamp))
            raw.commit()
        finally:
            raw.close()
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    finally:
        engine.dispose()
    return time.perf_counter() - begin


# ---------------------------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------------------------


@dataclass
class Query:
    name: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    expect_rows: bool = True


def queries(count: int, fetched_trace_id: str, box: SecretBox) -> list[Query]:
    """The same questions at every size: the newest page, the page after 90% of the rows, each
    filter, and one session. Every list query fills its page at the small size too, so that both
    sizes answer the same number of rows."""
    deep_pk = count - int(count * 0.9)  # newest first: 90% of the rows are above this key
    day_before = (NEWEST - timedelta(days=1)).isoformat()
    week_before = (NEWEST - timedelta(days=7)).isoformat()  # an agent's week fills a page at 10k
    middle = (NEWEST - timedelta(days=DAYS / 2)).isoformat()
    middle_next_day = (NEWEST - timedelta(days=DAYS / 2 - 1)).isoformat()
    limit = {"limit": str(LIMIT)}
    return [
        Query("first page", "/sessions", limit),
        Query(
            "deep page (after 90%)",
            "/sessions",
            limit | {"cursor": encode_cursor("sessions", (deep_pk + 1,), box)},
        ),
        Query("agent_name", "/sessions", limit | {"agent_name": f"agent-{7:02d}"}),
        Query("eval_run_id", "/sessions", limit | {"eval_run_id": "ppr_bench000000"}),
        Query("start (last day)", "/sessions", limit | {"start": day_before}),
        Query("end (before mid)", "/sessions", limit | {"end": middle}),
        Query("start+end (a day)", "/sessions", limit | {"start": middle, "end": middle_next_day}),
        Query(
            "agent_name+start",
            "/sessions",
            limit | {"agent_name": f"agent-{7:02d}", "start": week_before},
        ),
        Query("one session", f"/sessions/{fetched_trace_id}", {}, expect_rows=False),
    ]


@dataclass
class Timing:
    seconds: list[float] = field(default_factory=list)

    def quantile_ms(self, q: float) -> float:
        cuts = statistics.quantiles(self.seconds, n=100, method="inclusive")
        return cuts[min(98, max(0, round(q * 100) - 1))] * 1000


def measure(
    client: httpx.Client,
    query: Query,
    requests: int,
    timings: dict[str, Timing],
    *,
    warm: bool = False,
) -> None:
    """Sends `query` `requests` times, one at a time, adding each latency to
    `timings[query.name]` (unless `warm`). Anything but a 200 with rows fails the run."""
    timing = timings.setdefault(query.name, Timing())
    for _ in range(requests):
        sent = time.perf_counter()
        response = client.get(query.path, params=query.params)
        elapsed = time.perf_counter() - sent
        if response.status_code != 200:
            raise RuntimeError(f"{query.name}: HTTP {response.status_code}: {response.text[:300]}")
        if query.expect_rows and not response.json()["sessions"]:
            raise RuntimeError(f"{query.name}: no sessions listed; the query measures nothing")
        if not warm:
            timing.seconds.append(elapsed)


def fetched_trace(database_url: str) -> str:
    """A session stored with spans, from the middle of the table."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return str(
                conn.execute(
                    text(
                        "SELECT trace_id FROM sessions WHERE pk = "
                        "(SELECT session_pk FROM spans ORDER BY session_pk LIMIT 1 OFFSET "
                        "(SELECT COUNT(*) / 2 FROM spans))"
                    )
                ).scalar_one()
            )
    finally:
        engine.dispose()


@dataclass
class Loaded:
    """One size: its database loaded, its server up, and the queries to time on it."""

    count: int
    load_seconds: float
    server: _support.ServerProcess
    client: httpx.Client
    queries: list[Query]
    timings: dict[str, Timing] = field(default_factory=dict)


def load_and_serve(stack: ExitStack, count: int, database_url: str | None) -> Loaded:
    """Loads `count` sessions into a fresh database (emptying `database_url` first, when given)
    and starts `neens serve` on it; both are stopped when `stack` closes."""
    ws = stack.enter_context(_support.workspace(database_url))
    if database_url is not None:
        _support.empty_postgres(ws.database_url)
    key = ws.create_api_key()  # migrates the fresh database
    project_id = _support.project_of(ws.database_url)
    console.print(f"Loading {count:,} sessions into {ws.db_label} …")
    seconds = load(ws.database_url, project_id, count)
    console.print(
        f"  loaded {count:,} sessions in {seconds:.1f}s ({count / seconds:,.0f} sessions/s)"
    )
    server = ws.start_neens(_support.free_port())
    ws.wait_healthy()
    # `neens serve` loads its statistics libraries in the background once it answers: about a
    # second of CPU that would land in the first query's timings.
    _load.wait_until_idle(server.popen.pid)
    client = stack.enter_context(
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    )
    # The deep page's cursor is sealed with the server's own secret keys, as the server's are.
    box = box_from_keys(parse_keys(ws.env["NEENS_SECRET_KEYS"]))
    return Loaded(
        count, seconds, server, client, queries(count, fetched_trace(ws.database_url), box)
    )


def measure_all(sizes: list[Loaded], requests: int, warmup: int, rounds: int) -> None:
    """Times every query on every size: `rounds` rounds per query, each sending
    `requests / rounds` requests to each size in turn (the order alternating), so the sizes are
    measured under the same conditions."""
    per_round = max(1, requests // rounds)
    for n in range(len(sizes[0].queries)):
        for size in sizes:
            measure(size.client, size.queries[n], warmup, size.timings, warm=True)
        for r in range(rounds):
            for size in sizes if r % 2 == 0 else reversed(sizes):
                measure(size.client, size.queries[n], per_round, size.timings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--small", type=int, default=10_000, help="sessions in the small database")
    parser.add_argument("--large", type=int, default=1_000_000, help="sessions in the large one")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per query")
    parser.add_argument("--warmup", type=int, default=10, help="untimed requests per query first")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per query")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        default=None,
        help="run on this PostgreSQL database instead of SQLite; it is emptied before each size "
        "(DROP SCHEMA public CASCADE), so point it at one you can throw away",
    )
    parser.add_argument("--quick", action="store_true", help="10k vs 100k, 30 requests a query")
    args = parser.parse_args(argv)
    if args.quick:
        args.large, args.requests = 100_000, 30
    load_avg = _support.load_average()
    console.print(
        f"[bold]Reads: GET /sessions at {args.small:,} and {args.large:,} sessions[/bold] "
        f"({_support.machine_summary()}, load {load_avg if load_avg is not None else '?'})",
        soft_wrap=True,
    )
    _support.warn_if_busy(load_avg)
    sizes: list[Loaded] = []
    try:
        with ExitStack() as stack:
            if args.postgres is None:  # two SQLite files side by side, measured interleaved
                sizes = [load_and_serve(stack, n, None) for n in (args.small, args.large)]
                measure_all(sizes, args.requests, args.warmup, args.rounds)
            else:  # one PostgreSQL database: one size after the other
                for n in (args.small, args.large):
                    with ExitStack() as one:
                        size = load_and_serve(one, n, args.postgres)
                        measure_all([size], args.requests, args.warmup, args.rounds)
                        sizes.append(size)
    except (RuntimeError, httpx.HTTPError) as exc:
        console.print(f"[red]{exc}[/red]")
        for size in sizes:
            console.print(f"[red]Neens log tail ({size.count:,}):[/red]\n{size.server.log_tail()}")
        return 1
    small, large = sizes
    report(args, small.load_seconds, small.timings, large.load_seconds, large.timings)
    return 0


def report(
    args: argparse.Namespace,
    small_load: float,
    small: dict[str, Timing],
    large_load: float,
    large: dict[str, Timing],
) -> None:
    small_n, large_n = _size(args.small), _size(args.large)
    console.print(
        f"\n{'query':<22} {'p50 ' + small_n:>10} {'p99 ' + small_n:>10} {'p50 ' + large_n:>10}"
        f" {'p99 ' + large_n:>10} {'p50 ratio':>9} {'p99 ratio':>9}",
        soft_wrap=True,
    )
    missed = []
    for name, small_t in small.items():
        large_t = large[name]
        s50, s99 = small_t.quantile_ms(0.5), small_t.quantile_ms(0.99)
        l50, l99 = large_t.quantile_ms(0.5), large_t.quantile_ms(0.99)
        ratio = l50 / s50
        if ratio > TARGET_RATIO:
            missed.append(name)
        colour = "green" if ratio <= TARGET_RATIO else "red"
        console.print(
            f"{name:<22} {s50:>8.1f}ms {s99:>8.1f}ms {l50:>8.1f}ms {l99:>8.1f}ms"
            f" [{colour}]{ratio:>8.2f}x[/{colour}] {l99 / s99:>8.2f}x",
            soft_wrap=True,
        )
    console.print(
        f"Bulk load: {args.small:,} sessions in {small_load:.1f}s, {args.large:,} in "
        f"{large_load:.1f}s ({args.large / large_load:,.0f} sessions/s)",
        soft_wrap=True,
    )
    console.print(
        f"ratio {large_n}/{small_n} of each query's p50 (target <= {TARGET_RATIO}x); the p99 "
        "ratio is shown alongside",
        soft_wrap=True,
    )
    if missed:
        console.print(f"[red]TARGET MISSED[/red] for: {', '.join(missed)}", soft_wrap=True)
    else:
        console.print("[green]TARGET MET[/green] for every query")


def _size(count: int) -> str:
    if count >= 1_000_000 and count % 1_000_000 == 0:
        return f"{count // 1_000_000}M"
    return f"{count // 1000:,}k" if count >= 1000 else str(count)


if __name__ == "__main__":
    sys.exit(main())
