"""Sweep decisions: is the comparison of a finished sweep about as cheap as reading its scores?

Loads a finished model sweep of 6 arms x 3 runs x `--items` golden items (realistic rows, written
straight into the database in bulk, not through HTTP), starts `neens serve` on it and times, one
request at a time, `GET /model-sweeps/{id}/comparison` against a bare SELECT of the same score
rows through the database driver, in interleaved rounds. Prints each round's medians and their
ratio, against the target: <= 2x.

The rows are written, then ANALYZEd (on PostgreSQL, VACUUM ANALYZEd, as autovacuum does soon
after a sweep's inserts). They are those of a sweep finished before run verdicts were stored and
answers packed (as in a database upgraded to this version): the first comparison works out every
child run's verdict from its items and stores it, and reads every run's answers and packs them,
as the roll-up job does when a run finishes. The server is then restarted and the first
comparison after the restart, which reads the stored verdicts and unpacks the answers, is timed
too (it may also wait for the server's warm-up: loading the statistics libraries takes a second
or two); the rounds run against that server. Last, a few comparisons are timed with every run's
packed answers marked stale first (as a price set later does), so each reads every answer again:
the cost of the first comparison after such a change, printed against the SELECT.

    .venv/bin/python bench/decision.py            # 10,000 items on SQLite
    .venv/bin/python bench/decision.py --quick    # 2,000 items and 2 rounds, for a smoke run
    .venv/bin/python bench/decision.py --postgres postgresql+psycopg://postgres@127.0.0.1/neens_bench
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import _support
import httpx
from _support import console
from sqlalchemy import create_engine, make_url, text

from neens.domain.conventions import DATASET_ITEM_ID_KEY, EVAL_RUN_ID_KEY, VERSION_LABEL_KEY
from neens.domain.sweeps import Conditions, arm_shares

TARGET_RATIO = 2.0
K = 3
"""Runs per arm (the sweep's pass^k)."""
GATE = {"min_pass_rate": 0.8}
"""The gate pinned on the sweep and its runs; its `min_pass_rate` is the comparison's bar."""
VERSION_LABEL = "support-agent 2.4"
CREATED = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
"""When the sweep was created; each run takes `RUN_MINUTES`, an arm's runs one after another."""
RUN_MINUTES = 20
CONCURRENCY = 32
"""The sweep's calls in flight, shared by its arms as a sweep shares them."""
CHUNK = 20_000
"""Rows per bulk insert."""
SEED = 20261130
UNPACKED_REQUESTS = 3
"""Comparisons timed with nothing packed, after the rounds."""


@dataclass(frozen=True, slots=True)
class ArmSpec:
    label: str
    model: str
    price: tuple[float, float] | None
    """USD per million input and output tokens; None: the model has no price."""
    priced_share: float
    """Of the arm's answers, the share whose cost is known (the others name an unpriced model)."""
    solid: float
    """Share of items passed on every run."""
    flaky: float
    """Share of items passed on some runs and failed on others; the rest fail every run."""


ARMS = [
    ArmSpec("gpt-4o (incumbent)", "gpt-4o", (2.5, 10.0), 1.0, 0.88, 0.06),
    ArmSpec("gpt-4o-mini", "gpt-4o-mini", (0.15, 0.6), 1.0, 0.86, 0.08),
    ArmSpec("claude-sonnet-4", "claude-sonnet-4", (3.0, 15.0), 1.0, 0.91, 0.04),
    ArmSpec("acme-7b (self-hosted)", "acme-internal-7b", None, 0.0, 0.84, 0.07),
    ArmSpec("llama-3.1-70b", "llama-3.1-70b", (0.88, 0.88), 0.6, 0.80, 0.09),
    ArmSpec("mistral-small", "mistral-small", (0.2, 0.6), 1.0, 0.70, 0.10),
]
"""Every run of the last arm passes about 75% of the items, under the gate's 80%: it fails
pass^k. The unpriced ones of the partly priced arm name a model variant without a price."""
AGENTS = ["refund-agent", "order-status-agent", "escalation-agent"]
"""The agent names the answers report; one item in ten reports none."""
JUDGE_NAME = "answer-similarity"

# ---------------------------------------------------------------------------------------------
# Texts: prompts, expected outputs and answers of a support agent's length
# ---------------------------------------------------------------------------------------------

QUESTIONS = [
    "Hi, I ordered a winter jacket (order {n}) two weeks ago and the tracking page still says "
    "'label created'. I need it before the 20th because I am travelling. Can you tell me where "
    "it is and whether I should cancel and order again?",
    "I was charged twice for order {n}: once on the 3rd and again on the 5th, same amount. My bank "
    "shows both as settled, not pending. Please refund the second charge to the card I used and "
    "tell me how long it will take to show up.",
    "Order {n} arrived with a cracked screen protector and the box was crushed on one corner. I "
    "have photos. Do I send the whole thing back or can you just send a new protector? I would "
    "rather not wait another week for a replacement.",
    "Can I change the delivery address of order {n} to my office? It has not shipped yet as far "
    "as I can tell. The new address is on the same street, number 48 instead of 12, third floor, "
    "reception desk, open until six.",
]
SENTENCES = [
    "Thanks for getting in touch, and I am sorry for the trouble with this order.",
    "I have looked up the order and can see the payment, the items and the shipping method.",
    "The parcel left our warehouse on Tuesday and the carrier scanned it at the regional hub.",
    "Carrier scans can lag by a day or two, so an empty tracking page is not unusual this week.",
    "I have started a refund for the duplicate charge; it goes back to the original card.",
    "Refunds usually show on your statement within three to five business days.",
    "Since the item arrived damaged, you do not need to return it: a replacement is on its way.",
    "You will get an email with the new tracking number as soon as the replacement ships.",
    "The address can still be changed because the order has not been handed to the carrier.",
    "I have updated the delivery address and added the reception desk to the delivery notes.",
    "If anything still looks wrong, reply to this message and it will come straight back to me.",
    "Is there anything else I can help you with today?",
]


def _question(i: int) -> str:
    return QUESTIONS[i % len(QUESTIONS)].format(n=100_000 + i)


def _reply(i: int, shift: int) -> str:
    """An answer of 7 to 9 sentences (about 500 to 700 characters); `shift` varies the wording
    between arms and runs."""
    count = 7 + (i + shift) % 3
    return " ".join(SENTENCES[(i * 5 + shift + j) % len(SENTENCES)] for j in range(count))


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Loaded:
    sweep_id: str
    run_ids: list[str]
    rows: int
    seconds: float
    """Writing the rows, committed."""
    analyze_seconds: float
    """Refreshing the planner's statistics after (and, on PostgreSQL, vacuuming)."""


class Bulk:
    """Rows written in bulk through the driver of one open connection, counted."""

    def __init__(self, driver: Any, postgres: bool) -> None:
        self.driver = driver
        self.postgres = postgres
        self.rows = 0

    def stamp(self, value: datetime) -> Any:
        return value if self.postgres else _support.sqlite_stamp(value)

    def write(self, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        insert = _support.insert_postgres if self.postgres else _support.insert_sqlite
        for start in range(0, len(rows), CHUNK):
            insert(self.driver, table, columns.split(), rows[start : start + CHUNK])
        self.rows += len(rows)


def _ident(prefix: str, *parts: int) -> str:
    """An id of Neens' shape (`prefix` and 24 hex digits), distinct for distinct `parts`."""
    number = 0
    for part in parts:
        number = number * 1_000_003 + part
    return f"{prefix}{number % 16**24:024x}"


def _pass_masks(arm: int, spec: ArmSpec, items: int) -> list[int]:
    """Per item, the runs that pass it as a bitmask over the K runs: every one (solid), some
    but not all (flaky), or none."""
    rng = random.Random(SEED + arm)
    every = 2**K - 1
    masks = []
    for _ in range(items):
        u = rng.random()
        masks.append(
            every
            if u < spec.solid
            else rng.randrange(1, every)
            if u < spec.solid + spec.flaky
            else 0
        )
    return masks


SESSION_COLUMNS = (
    "pk project_id trace_id source agent_name input output models input_tokens output_tokens "
    "latency_ms step_count span_count cost_usd cost_status unpriced status started_at ended_at "
    "eval_run_id dataset_item_id version_label warnings created_at updated_at"
)
SPAN_COLUMNS = (
    "session_pk span_id parent_span_id name kind start_time end_time status_code attributes "
    "resource_attributes events input output agent_name model"
)
ITEM_COLUMNS = (
    "run_id item_id position input expected_output status session_pk score passed captured_at "
    "scored_at"
)
SCORE_COLUMNS = (
    "project_id session_pk judge_id judge_name run_id item_id source score passed reason created_at"
)


def _run_rows(
    bulk: Bulk,
    project_id: str,
    judge_id: str,
    connection_id: str,
    run_id: str,
    started: datetime,
    arm: int,
    attempt: int,
    masks: list[int],
    item_ids: list[str],
    first_pk: int,
) -> None:
    """One finished run: per item its session (with the agent and LLM spans a push answer is
    recorded with), its scored pre-prod item and the judge's score."""
    spec = ARMS[arm]
    items = len(item_ids)
    step = timedelta(minutes=RUN_MINUTES) / items
    sessions: list[tuple[Any, ...]] = []
    spans: list[tuple[Any, ...]] = []
    preprod: list[tuple[Any, ...]] = []
    scores: list[tuple[Any, ...]] = []
    for i, item_id in enumerate(item_ids):
        pk = first_pk + i
        question, answer = _question(i), _reply(i, arm * K + attempt)
        begun = started + step * i
        latency = 600 + (i * 7919 + arm * 131 + attempt * 17) % 4400
        ended = begun + timedelta(milliseconds=latency)
        begun_at, ended_at = bulk.stamp(begun), bulk.stamp(ended)
        agent = None if i % 10 == 9 else AGENTS[i % len(AGENTS)]
        tokens_in, tokens_out = 350 + (i * 37) % 900, 120 + (i * 53 + arm * 11 + attempt) % 260
        priced = spec.price is not None and (i * 7 + attempt) % 10 < spec.priced_share * 10
        model = spec.model if priced or spec.price is None else f"{spec.model}-fp8"
        cost = (
            (tokens_in * spec.price[0] + tokens_out * spec.price[1]) / 1e6
            if priced and spec.price is not None
            else None
        )
        passed = bool(masks[i] >> attempt & 1)
        wobble = ((i * 2654435761 + arm * 97 + attempt * 31) % 1000) / 1000
        score = round(0.72 + 0.28 * wobble if passed else 0.2 + 0.49 * wobble, 4)
        sessions.append(
            (
                pk,
                project_id,
                f"{run_id}:{item_id}",  # the trace id a push answer is recorded under
                "push",
                agent,
                question,
                answer,
                json.dumps([model]),
                tokens_in,
                tokens_out,
                float(latency),
                1,
                2,
                cost,
                "priced" if cost is not None else "unpriced",
                "[]" if cost is not None else json.dumps([model]),
                "ok",
                begun_at,
                ended_at,
                run_id,
                item_id,
                VERSION_LABEL,
                "[]",
                ended_at,
                ended_at,
            )
        )
        correlation = {
            EVAL_RUN_ID_KEY: run_id,
            DATASET_ITEM_ID_KEY: item_id,
            VERSION_LABEL_KEY: VERSION_LABEL,
            "neens.agent_connection_id": connection_id,
        }
        usage = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": tokens_in,
            "gen_ai.usage.output_tokens": tokens_out,
        }
        spans.append(
            (pk, "agent", None, "agent.call", "agent", begun_at, ended_at, "ok",
             json.dumps(correlation), "{}", "[]", question, answer, agent, None)
        )  # fmt: skip
        spans.append(
            (pk, "llm", "agent", "chat", "llm", begun_at, ended_at, "ok",
             json.dumps(usage), "{}", "[]", None, None, None, model)
        )  # fmt: skip
        preprod.append(
            (run_id, item_id, i, question, _reply(i, 0), "scored", pk, score, passed, ended_at,
             ended_at)
        )  # fmt: skip
        scores.append(
            (project_id, pk, judge_id, JUDGE_NAME, run_id, item_id, "preprod", score, passed,
             f"the output is {score:.0%} similar to the expected output", ended_at)
        )  # fmt: skip
    bulk.write("sessions", SESSION_COLUMNS, sessions)
    bulk.write("spans", SPAN_COLUMNS, spans)
    bulk.write("preprod_items", ITEM_COLUMNS, preprod)
    bulk.write("scores", SCORE_COLUMNS, scores)


def load(database_url: str, project_id: str, items: int) -> Loaded:
    """Writes a finished sweep of len(ARMS) arms x K runs x `items` items in bulk, in one
    transaction, straight through the database driver; statistics refreshed after."""
    engine = create_engine(database_url)
    postgres = engine.dialect.name == "postgresql"
    begin = time.perf_counter()
    try:
        raw = engine.raw_connection()
        try:
            bulk = Bulk(raw.driver_connection, postgres)
            sweep_id, run_ids = _load_sweep(bulk, project_id, items)
            raw.commit()
        finally:
            raw.close()
        written = time.perf_counter()
        with engine.begin() as conn:
            if postgres:  # the sessions were written with their keys: move the sequence on
                conn.execute(
                    text(
                        "SELECT setval(pg_get_serial_sequence('sessions', 'pk'), "
                        "(SELECT max(pk) FROM sessions))"
                    )
                )
        # PostgreSQL: VACUUM as autovacuum does within a minute or two of the rows a sweep
        # writes over hours (its visibility maps let the comparison read covering indexes
        # alone); a sweep read the moment it was bulk-loaded is not one anyone decides on.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE" if postgres else "ANALYZE"))
    finally:
        engine.dispose()
    return Loaded(sweep_id, run_ids, bulk.rows, written - begin, time.perf_counter() - written)


def _load_sweep(bulk: Bulk, project_id: str, items: int) -> tuple[str, list[str]]:
    """The sweep's rows, from its dataset to its runs' scores; its id and its runs' ids."""
    stamp = bulk.stamp
    created = stamp(CREATED - timedelta(days=2))
    dataset_id, version_id = _ident("ds_", 1), _ident("dsv_", 1)
    judge_id, sweep_id = _ident("jdg_", 1), _ident("msw-", 1)
    bulk.write(
        "datasets",
        "id project_id name created_at",
        [(dataset_id, project_id, "support golden set", created)],
    )
    bulk.write(
        "dataset_versions",
        "id dataset_id number item_count created_at",
        [(version_id, dataset_id, 1, items, created)],
    )
    bulk.write(
        "dataset_golden_marks",
        "dataset_id version_id marked_at",
        [(dataset_id, version_id, created)],
    )
    item_ids = [_ident("dsi_", i) for i in range(items)]
    bulk.write(
        "dataset_items",
        "id version_id position input expected_output metadata",
        [
            (item_id, version_id, i, _question(i), _reply(i, 0), json.dumps({"topic": i % 4}))
            for i, item_id in enumerate(item_ids)
        ],
    )
    bulk.write(
        "judges",
        "id project_id name type config secret enabled score_production is_primary created_at",
        [
            (
                judge_id,
                project_id,
                JUDGE_NAME,
                "managed",
                json.dumps({"check": "fuzzy_similarity", "options": {}}),
                None,
                True,
                False,
                False,
                created,
            )
        ],
    )
    connection_ids = [_ident("conn_", a) for a in range(len(ARMS))]
    bulk.write(
        "agent_connections",
        "id project_id name url model provider request_format answer_path headers created_at "
        "updated_at",
        [
            (
                connection_ids[a],
                project_id,
                f"support agent on {spec.model}",
                f"http://127.0.0.1:9/agents/{a}",  # never called: the sweep has finished
                spec.model,
                "agent_http",
                "neens",
                None,
                "{}",
                created,
                created,
            )
            for a, spec in enumerate(ARMS)
        ],
    )
    judge_ids = [judge_id]
    conditions = Conditions.of(
        dataset_version_id=version_id,
        judge_ids=judge_ids,
        pass_k=K,
        version_label=VERSION_LABEL,
        gate=GATE,
    )
    finished = CREATED + timedelta(minutes=RUN_MINUTES * K + 1)
    bulk.write(
        "model_sweeps",
        "id project_id name version_label dataset_id dataset_version_id item_count pass_k "
        "budget_usd judge_ids gate fingerprint status diverged_arms created_at completed_at",
        [
            (
                sweep_id,
                project_id,
                "support agent: cheaper models",
                VERSION_LABEL,
                dataset_id,
                version_id,
                items,
                K,
                None,
                json.dumps(judge_ids),
                json.dumps(GATE),
                conditions.fingerprint(),
                "completed",
                "[]",
                stamp(CREATED),
                stamp(finished),
            )
        ],
    )
    shares = arm_shares(CONCURRENCY, len(ARMS))
    arm_ids = [_ident("msa-", a) for a in range(len(ARMS))]
    bulk.write(
        "model_sweep_arms",
        "id sweep_id position label agent_connection_id model concurrency status",
        [
            (
                arm_ids[a],
                sweep_id,
                a,
                spec.label,
                connection_ids[a],
                spec.model,
                shares[a],
                "completed",
            )
            for a, spec in enumerate(ARMS)
        ],
    )
    runs, slots, run_ids = [], [], []
    for a, spec in enumerate(ARMS):
        for attempt in range(K):
            run_id = _ident("ppr_", a, attempt)
            started = CREATED + timedelta(minutes=RUN_MINUTES * attempt)
            runs.append(
                (
                    run_id,
                    project_id,
                    f"support agent: cheaper models · {spec.label} · run {attempt + 1} of {K}",
                    dataset_id,
                    version_id,
                    VERSION_LABEL,
                    "push",
                    connection_ids[a],
                    spec.model,
                    "agent_http",
                    json.dumps(judge_ids),
                    json.dumps(GATE),
                    "completed",
                    items,
                    stamp(started),
                    stamp(started),
                    stamp(started + timedelta(minutes=RUN_MINUTES, seconds=5)),
                    shares[a],
                )
            )
            slots.append((sweep_id, arm_ids[a], attempt, run_id))
            run_ids.append(run_id)
    bulk.write(
        "preprod_runs",
        "id project_id name dataset_id dataset_version_id version_label runner_mode "
        "agent_connection_id model model_provider judge_ids gate status item_count created_at "
        "started_at completed_at push_concurrency",
        runs,
    )
    bulk.write("model_sweep_runs", "sweep_id arm_id attempt run_id", slots)
    next_pk = 1
    for a, spec in enumerate(ARMS):
        masks = _pass_masks(a, spec, items)
        for attempt in range(K):
            _run_rows(
                bulk,
                project_id,
                judge_id,
                connection_ids[a],
                _ident("ppr_", a, attempt),
                CREATED + timedelta(minutes=RUN_MINUTES * attempt),
                a,
                attempt,
                masks,
                item_ids,
                next_pk,
            )
            next_pk += items
    return sweep_id, run_ids


# ---------------------------------------------------------------------------------------------
# The two sides
# ---------------------------------------------------------------------------------------------


class Baseline:
    """The floor: the sweep's score rows, selected and fetched in full through the bare driver
    (sqlite3 or psycopg) in this process, on one open connection."""

    def __init__(self, database_url: str, run_ids: list[str]) -> None:
        url = make_url(database_url)
        self.postgres = url.get_backend_name() == "postgresql"
        if self.postgres:
            import psycopg

            conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
            self.conn: Any = psycopg.connect(conninfo, autocommit=True)
            mark = "%s"
        else:
            self.conn = sqlite3.connect(url.database or "")
            mark = "?"
        self.sql = (
            "SELECT session_pk, run_id, item_id, passed, score FROM scores "
            f"WHERE run_id IN ({', '.join(mark for _ in run_ids)})"
        )
        self.params = list(run_ids)

    def fetch(self) -> int:
        rows = self.conn.execute(self.sql, self.params).fetchall()
        return len(rows)

    def forget_packed(self) -> int:
        """Mark every run's packed answers stale (as a price change would), so the next
        comparison reads every answer again; the number of packed runs."""
        marked = self.conn.execute("UPDATE run_evidence SET basis = 'stale'").rowcount
        if not self.postgres:
            self.conn.commit()
        return int(marked)

    def close(self) -> None:
        self.conn.close()


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def time_comparison(client: httpx.Client, path: str, requests: int) -> list[float]:
    """`requests` GETs of the comparison, one at a time; anything but a 200 fails the run."""
    seconds = []
    for _ in range(requests):
        elapsed, response = _timed(lambda: client.get(path))
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status_code}: {response.text[:300]}")
        seconds.append(elapsed)
    return seconds


def time_select(baseline: Baseline, requests: int, expected_rows: int) -> list[float]:
    """`requests` bare SELECTs; fetching other than `expected_rows` rows fails the run."""
    seconds = []
    for _ in range(requests):
        elapsed, rows = _timed(baseline.fetch)
        if rows != expected_rows:
            raise RuntimeError(f"the SELECT fetched {rows:,} rows, not {expected_rows:,}")
        seconds.append(elapsed)
    return seconds


def check_answer(response: httpx.Response, items: int) -> dict[str, Any]:
    """The comparison must be a 200, comparable, with every arm's n the item count and some
    flaky items: a benchmark of a wrong answer measures nothing."""
    if response.status_code != 200:
        raise RuntimeError(
            f"the comparison answered HTTP {response.status_code}: {response.text[:300]}"
        )
    body: dict[str, Any] = response.json()
    problems = []
    if body.get("comparable") is not True:
        problems.append(f"comparable is {body.get('comparable')!r} ({body.get('voidReason')})")
    arms = body.get("arms") or []
    if len(arms) != len(ARMS):
        problems.append(f"{len(arms)} arms instead of {len(ARMS)}")
    short = [f"{arm.get('label')}: n={arm.get('n')}" for arm in arms if arm.get("n") != items]
    if short:
        problems.append(f"n is not {items:,} for {', '.join(short)}")
    if not any((arm.get("flakyItems") or 0) > 0 for arm in arms):
        problems.append("no arm has flaky items")
    if problems:
        raise RuntimeError("the comparison is not the expected answer: " + "; ".join(problems))
    return body


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Round:
    first: str
    comparison: list[float]
    select: list[float]

    @property
    def ratio(self) -> float:
        return statistics.median(self.comparison) / statistics.median(self.select)


def measure(
    client: httpx.Client,
    path: str,
    baseline: Baseline,
    expected_rows: int,
    args: argparse.Namespace,
) -> list[Round]:
    """`--rounds` rounds of `--requests` comparisons and as many SELECTs, the order alternating,
    so each round gives a ratio measured under the same conditions."""
    rounds = []
    for r in range(args.rounds):
        if r % 2 == 0:
            comparison = time_comparison(client, path, args.requests)
            select = time_select(baseline, args.requests, expected_rows)
        else:
            select = time_select(baseline, args.requests, expected_rows)
            comparison = time_comparison(client, path, args.requests)
        one = Round("comparison" if r % 2 == 0 else "SELECT", comparison, select)
        console.print(
            f"  round {r + 1}  {one.first + ' first':<16} comparison {_ms(one.comparison):>8}"
            f"   SELECT {_ms(one.select):>8}   ratio {one.ratio:5.2f}x"
        )
        rounds.append(one)
    return rounds


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:.1f}ms"


def run(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        ws = stack.enter_context(_support.workspace(args.postgres))
        server: _support.ServerProcess | None = None
        try:
            if args.postgres is not None:
                _support.empty_postgres(ws.database_url)
            key = ws.create_api_key()  # migrates the fresh database
            project_id = _support.project_of(ws.database_url)
            console.print(
                f"Loading a finished sweep of {len(ARMS)} arms x {K} runs x {args.items:,} items "
                f"into {ws.db_label} …",
                soft_wrap=True,
            )
            loaded = load(ws.database_url, project_id, args.items)
            console.print(
                f"  {loaded.rows:,} rows in {loaded.seconds:.1f}s "
                f"({loaded.rows / loaded.seconds:,.0f} rows/s), then "
                f"{'VACUUM ANALYZE' if args.postgres else 'ANALYZE'} in "
                f"{loaded.analyze_seconds:.1f}s"
            )
            server = ws.start_neens(_support.free_port())
            ws.wait_healthy()
            client = stack.enter_context(
                httpx.Client(
                    base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=300
                )
            )
            baseline = Baseline(ws.database_url, loaded.run_ids)
            stack.callback(baseline.close)
            path = f"/model-sweeps/{loaded.sweep_id}/comparison"
            cold, response = _timed(lambda: client.get(path))
            body = check_answer(response, args.items)
            select_cold, rows = _timed(baseline.fetch)
            expected_rows = len(ARMS) * K * args.items
            if rows != expected_rows:
                raise RuntimeError(f"the SELECT fetched {rows:,} rows, not {expected_rows:,}")
            flaky = ", ".join(str(arm["flakyItems"]) for arm in body["arms"])
            size_kb = len(response.content) / 1024
            console.print(
                f"First comparison (cold): {cold * 1000:,.0f}ms, {size_kb:,.0f} KB; "
                f"first SELECT: {select_cold * 1000:,.0f}ms, {rows:,} rows",
                soft_wrap=True,
            )
            console.print(
                f"  {body['verdict']['sentence']} (flaky items per arm: {flaky})", soft_wrap=True
            )
            # The first comparison worked out each child run's verdict and stored it; a server
            # started afresh reads them as stored.
            server.stop()
            server = ws.start_neens(_support.free_port())
            _support.wait_healthy(server)
            client = stack.enter_context(
                httpx.Client(
                    base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=300
                )
            )
            restarted, response = _timed(lambda: client.get(path))
            if check_answer(response, args.items) != body:
                raise RuntimeError("the comparison after a restart is not the one before it")
            console.print(
                f"First comparison after a restart (run verdicts stored; the server may still "
                f"be loading its statistics libraries): {restarted * 1000:,.0f}ms",
                soft_wrap=True,
            )
            console.print(
                f"{args.rounds} rounds of {args.requests} comparisons and {args.requests} SELECTs "
                "(median of each per round):"
            )
            rounds = measure(client, path, baseline, expected_rows, args)
            unpacked = time_unpacked(client, path, baseline, UNPACKED_REQUESTS)
        except (RuntimeError, httpx.HTTPError) as exc:
            console.print(f"[red]{exc}[/red]")
            if server is not None:
                console.print(f"[red]Neens log tail:[/red]\n{server.log_tail()}")
            return 1
    report(rounds, rows, unpacked)
    return 0


def time_unpacked(
    client: httpx.Client, path: str, baseline: Baseline, requests: int
) -> list[float]:
    """Comparisons that find nothing packed (each run's packed answers marked stale first, out
    of the timing), so each reads every answer again: what the first comparison after a price
    change costs."""
    seconds = []
    for _ in range(requests):
        if baseline.forget_packed() != len(ARMS) * K:
            raise RuntimeError("not every run's answers were packed")
        elapsed, response = _timed(lambda: client.get(path))
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status_code}: {response.text[:300]}")
        seconds.append(elapsed)
    return seconds


def report(rounds: list[Round], rows: int, unpacked: list[float]) -> None:
    comparison = [s for r in rounds for s in r.comparison]
    select = [s for r in rounds for s in r.select]
    ratios = [r.ratio for r in rounds]
    ratio = statistics.median(ratios)
    console.print(
        f"comparison {_ms(comparison)} (median of {len(comparison)}), SELECT of {rows:,} score "
        f"rows {_ms(select)}",
        soft_wrap=True,
    )
    colour = "green" if ratio <= TARGET_RATIO else "red"
    console.print(
        f"paired ratio comparison/SELECT: [{colour}]{ratio:.2f}x[/{colour}] (median over "
        f"{len(ratios)} rounds, {min(ratios):.2f}x–{max(ratios):.2f}x); target <= {TARGET_RATIO}x",
        soft_wrap=True,
    )
    if ratio <= TARGET_RATIO:
        console.print("[green]TARGET MET[/green]")
    else:
        console.print("[red]TARGET MISSED[/red]")
    select_median = statistics.median(select)
    console.print(
        f"a comparison that finds no run packed (the first after a price change; it reads "
        f"every answer and packs them again): {_ms(unpacked)} (median of {len(unpacked)}), "
        f"{statistics.median(unpacked) / select_median:.2f}x the SELECT",
        soft_wrap=True,
    )
    load_avg = _support.load_average()
    console.print(f"load at the end: {_load_text(load_avg)}")


def _load_text(load: float | None) -> str:
    return "?" if load is None else f"{load:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000, help="golden items of the sweep")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument(
        "--requests", type=int, default=10, help="comparisons, and SELECTs, per round"
    )
    parser.add_argument(
        "--postgres",
        metavar="URL",
        default=None,
        help="run on this PostgreSQL database instead of SQLite; it is emptied first "
        "(DROP SCHEMA public CASCADE), so point it at one you can throw away",
    )
    parser.add_argument("--quick", action="store_true", help="2,000 items and 2 rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.items, args.rounds = 2_000, 2
    for name in ("items", "rounds", "requests"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    load_avg = _support.load_average()
    console.print(
        f"[bold]Sweep decision: GET /model-sweeps/{{id}}/comparison over {len(ARMS)} arms x {K} "
        f"runs x {args.items:,} items[/bold] ({_support.machine_summary()}, load "
        f"{_load_text(load_avg)})",
        soft_wrap=True,
    )
    _support.warn_if_busy(load_avg)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
