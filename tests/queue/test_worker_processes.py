"""Real `neens worker` and `neens serve` processes: a crash is covered within seconds, a stop is
quick, and neither calls an already captured item again.

The agent hangs on the first call for `q0` (as a stuck endpoint does) and answers every other
call at once, so a worker is caught mid-run with that call in flight.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from neens.api.app import create_app
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import Job, Score
from tests.support.live import free_port, serve_in_thread
from tests.support.preprod import (
    auth,
    connection,
    create_run,
    golden_dataset,
    items_of,
    wait_for_run,
)

pytestmark = pytest.mark.alone  # kills workers and times their leases: run alone (Makefile)

PROMPTS = [f"q{n}" for n in range(8)]
HUNG = "q0"
LEASE_S = 5.0
"""The default `NEENS_WORKER_LEASE_S`."""


@dataclass
class Agent:
    url: str = ""
    calls: list[str] = field(default_factory=list)


@contextmanager
def hanging_agent() -> Iterator[Agent]:
    """Answers each prompt with itself; the first call for HUNG hangs until the caller leaves."""
    state = Agent()

    async def reply(request: Request) -> Response:
        prompt = (await request.json())["input"]
        first = prompt not in state.calls
        state.calls.append(prompt)
        if first and prompt == HUNG:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not await request.is_disconnected():
                await asyncio.sleep(0.05)
        return JSONResponse({"output": prompt})

    with serve_in_thread(Starlette(routes=[Route("/agent", reply, methods=["POST"])])) as server:
        state.url = f"{server.url}/agent"
        yield state


@asynccontextmanager
async def api(settings: Settings, db: Database) -> AsyncIterator[httpx.AsyncClient]:
    """The API in-process with no worker of its own: the work is the processes' to do."""
    app = create_app(settings.model_copy(update={"workers_in_process": False}), database=db)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            yield c


def start(command: str, database_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "NEENS_DATABASE_URL": database_url,
        "NEENS_MIGRATE_ON_START": "false",
        "NEENS_PUSH_CONCURRENCY": "2",
    }
    args = [sys.executable, "-m", "neens_eval", command, "--log-level", "info"]
    if command == "serve":
        args += ["--port", str(free_port())]
    with log.open("ab") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)


def stop(*processes: subprocess.Popen[bytes]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


async def push_run(client: httpx.AsyncClient, key: CreatedKey, url: str) -> str:
    items = [{"input": p, "expected_output": p} for p in PROMPTS]
    dataset_id, _ = await golden_dataset(client, key, items)
    conn = await connection(client, key, url)
    run = await create_run(
        client, key, dataset_id=dataset_id, runner_mode="push", agent_connection_id=conn
    )
    return str(run["id"])


async def run_detail(client: httpx.AsyncClient, key: CreatedKey, run_id: str) -> dict[str, Any]:
    r = await client.get(f"/preprod-evals/{run_id}", headers=auth(key))
    assert r.status_code == 200, r.text
    detail: dict[str, Any] = r.json()
    return detail


async def all_but_the_hung_item_captured(
    client: httpx.AsyncClient,
    key: CreatedKey,
    run_id: str,
    processes: list[subprocess.Popen[bytes]],
) -> None:
    deadline = time.monotonic() + 30
    while True:
        counts = (await run_detail(client, key, run_id))["counts"]
        if counts["pending"] == 1 and counts["captured"] + counts["scored"] == len(PROMPTS) - 1:
            return
        assert all(p.poll() is None for p in processes), "a worker process exited early"
        assert time.monotonic() < deadline, counts
        await asyncio.sleep(0.05)


async def holder_pid(db: Database, run_id: str) -> int:
    deadline = time.monotonic() + 10
    while True:
        async with db.read() as s:
            worker = await s.scalar(
                select(Job.worker).where(
                    Job.dedupe_key == f"push:{run_id}", Job.status == "running"
                )
            )
        if worker is not None:
            return int(worker.split(":")[-2])  # host:pid:id
        assert time.monotonic() < deadline, "no worker claimed the push job"
        await asyncio.sleep(0.05)


async def captured_items(client: httpx.AsyncClient, key: CreatedKey, run_id: str) -> set[str]:
    return {
        str(i["input"])
        for i in await items_of(client, key, run_id)
        if i["status"] in ("captured", "scored")
    }


async def test_a_worker_killed_mid_run_is_taken_over_by_another_within_seconds(
    settings: Settings, db: Database, admin_key: CreatedKey, database_url: str, tmp_path: Path
) -> None:
    with hanging_agent() as agent:
        async with api(settings, db) as client:
            run_id = await push_run(client, admin_key, agent.url)
            workers = [start("worker", database_url, tmp_path / f"w{n}.log") for n in range(2)]
            try:
                await all_but_the_hung_item_captured(client, admin_key, run_id, workers)
                pid = await holder_pid(db, run_id)
                os.kill(pid, signal.SIGKILL)
                killed_at = time.monotonic()
                [victim] = [w for w in workers if w.pid == pid]
                await asyncio.to_thread(victim.wait, 10)
                before = await captured_items(client, admin_key, run_id)
                done = await wait_for_run(client, admin_key, run_id, timeout_s=20)
                took = time.monotonic() - killed_at
                items = await items_of(client, admin_key, run_id)
            finally:
                stop(*workers)
    assert done["status"] == "completed", done
    # A lease lapses within LEASE_S; the rest is the re-made call, scoring and finishing, which a
    # machine busy with other work can stretch by seconds.
    assert took < LEASE_S + 10, f"the run was idle {took:.1f} s after its worker died"
    calls = Counter(agent.calls)
    assert before == set(PROMPTS) - {HUNG}
    logs = "\n".join((tmp_path / f"w{n}.log").read_text(errors="replace") for n in range(2))
    # Captured answers are never asked again (the workers' logs say why if they were).
    assert all(calls[p] == 1 for p in before), f"{calls}\n{logs}"
    assert calls[HUNG] == 2  # the call in flight was lost with its worker, and made again
    assert [i["status"] for i in items] == ["scored"] * len(PROMPTS)
    async with db.read() as s:
        rows = await s.execute(select(Score.item_id, Score.judge_id).where(Score.run_id == run_id))
        scores = Counter(rows.all())
        kinds = set(await s.scalars(select(Job.kind).where(Job.dedupe_key.like(f"%:{run_id}"))))
    # Scored as captured, once each, by the push jobs alone: no scoring pass was needed.
    assert set(scores.values()) == {1}
    assert len({item_id for item_id, _ in scores}) == len(PROMPTS)
    assert "preprod.score" not in kinds


@pytest.mark.parametrize("command", ["worker", "serve"])
async def test_sigterm_stops_mid_run_within_10_s_and_the_next_worker_calls_only_what_is_left(
    settings: Settings,
    db: Database,
    admin_key: CreatedKey,
    database_url: str,
    tmp_path: Path,
    command: str,
) -> None:
    log = tmp_path / "first.log"
    with hanging_agent() as agent:
        async with api(settings, db) as client:
            run_id = await push_run(client, admin_key, agent.url)
            first = start(command, database_url, log)
            second = None
            try:
                await all_but_the_hung_item_captured(client, admin_key, run_id, [first])
                first.send_signal(signal.SIGTERM)
                asked_at = time.monotonic()
                code = await asyncio.to_thread(first.wait, 10)
                took = time.monotonic() - asked_at
                waiting = (await run_detail(client, admin_key, run_id))["waitingFor"]
                left = set(PROMPTS) - await captured_items(client, admin_key, run_id)
                calls_before = len(agent.calls)
                second = start("worker", database_url, tmp_path / "second.log")
                done = await wait_for_run(client, admin_key, run_id, timeout_s=20)
            finally:
                stop(first, *([second] if second else []))
    # uvicorn re-raises the signal once shut down, so `serve` reports it as its exit status.
    assert code == (0 if command == "worker" else -signal.SIGTERM), log.read_text()
    assert took < 10
    # Released at once, not left to a lease: any worker may claim it now.
    assert waiting is not None and waiting["on"] == "worker" and waiting["job"] == "push"
    assert "queued" in waiting["message"], waiting
    assert done["status"] == "completed", done
    assert left == {HUNG}
    assert agent.calls[calls_before:] == [HUNG]  # only the item not captured is called again
    assert Counter(agent.calls) == {HUNG: 2, **dict.fromkeys(set(PROMPTS) - {HUNG}, 1)}
    if command == "worker":
        text = log.read_text()
        assert "started" in text
        assert "HTTP Request" not in text  # per-call logs are debug level


LATE = "q1"
"""The item whose first LLM-judge call hangs, so it is captured and not yet scored."""


@dataclass
class Judge:
    url: str = ""
    calls: list[str] = field(default_factory=list)
    """The item each judge call was about, in order."""


@contextmanager
def hanging_judge() -> Iterator[Judge]:
    """An OpenAI-compatible judge scoring 0.9 at once, except the first call about LATE, which
    hangs until the caller leaves."""
    state = Judge()

    async def chat(request: Request) -> Response:
        body = await request.json()
        prompt = body["messages"][-1]["content"].split("\n")[0].removeprefix("Q: ")
        first = prompt not in state.calls
        state.calls.append(prompt)
        if first and prompt == LATE:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not await request.is_disconnected():
                await asyncio.sleep(0.05)
        content = '{"score": 0.9, "reason": "close"}'
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "judge-1",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
            }
        )

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with serve_in_thread(app) as server:
        state.url = f"{server.url}/v1"
        yield state


async def test_a_worker_killed_while_llm_judges_are_out_still_scores_each_item_once(
    settings: Settings, db: Database, admin_key: CreatedKey, database_url: str, tmp_path: Path
) -> None:
    """The push job judges answers while it calls; killed with a call and a judge call in
    flight, the next worker calls what is left and the scoring job judges what was captured and
    never judged: every item ends with exactly one score, each answer judged once more at most."""
    with hanging_agent() as agent, hanging_judge() as judge:
        async with api(settings, db) as client:
            r = await client.post(
                "/judges",
                json={
                    "name": "llm",
                    "type": "llm_prompt",
                    "template": "Q: {input}\nA: {output}",
                    "endpoint": {"baseUrl": judge.url, "model": "judge-1"},
                },
                headers=auth(admin_key),
            )
            assert r.status_code == 201, r.text
            judge_id = r.json()["id"]
            items = [{"input": p, "expected_output": p} for p in PROMPTS]
            dataset_id, _ = await golden_dataset(client, admin_key, items)
            conn = await connection(client, admin_key, agent.url)
            run = await create_run(
                client,
                admin_key,
                dataset_id=dataset_id,
                runner_mode="push",
                agent_connection_id=conn,
                judge_deployment_ids=[judge_id],
            )
            run_id = str(run["id"])
            workers = [start("worker", database_url, tmp_path / f"w{n}.log") for n in range(2)]
            try:
                deadline = time.monotonic() + 30
                while True:
                    counts = (await run_detail(client, admin_key, run_id))["counts"]
                    if counts == {
                        "pending": 1,
                        "captured": 1,
                        "scored": len(PROMPTS) - 2,
                        "error": 0,
                    }:
                        break
                    assert all(w.poll() is None for w in workers), "a worker exited early"
                    assert time.monotonic() < deadline, counts
                    await asyncio.sleep(0.05)
                pid = await holder_pid(db, run_id)
                os.kill(pid, signal.SIGKILL)
                [victim] = [w for w in workers if w.pid == pid]
                await asyncio.to_thread(victim.wait, 10)
                done = await wait_for_run(client, admin_key, run_id, timeout_s=30)
                final = await items_of(client, admin_key, run_id)
            finally:
                stop(*workers)
    assert done["status"] == "completed", done
    assert [i["status"] for i in final] == ["scored"] * len(PROMPTS)
    assert all(i["score"] == 0.9 for i in final)
    async with db.read() as s:
        scores = Counter(await s.scalars(select(Score.item_id).where(Score.run_id == run_id)))
        kinds = {
            job.kind
            for job in await s.scalars(
                select(Job).where(Job.dedupe_key.in_([f"push:{run_id}", f"score:{run_id}"]))
            )
        }
    assert sorted(scores.values()) == [1] * len(PROMPTS)  # one score per item, none twice
    assert Counter(agent.calls) == {HUNG: 2, **dict.fromkeys(set(PROMPTS) - {HUNG}, 1)}
    # The judge call lost with the worker is made again, by the scoring job; no other twice.
    assert Counter(judge.calls) == {LATE: 2, **dict.fromkeys(set(PROMPTS) - {LATE}, 1)}
    assert kinds == {"preprod.push", "preprod.score"}
