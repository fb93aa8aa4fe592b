"""A push run scores each answer as it is stored: no `preprod.score` pass, no polling gap.

Built-in judges score an answer in the write that captures it; LLM judges run while the other
calls are still going, at most `judge_concurrency` at a time. The scores are the ones the
scoring pass gives for the same answers.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from neens.domain.judges import JudgeCase
from neens.domain.stats import mean
from neens.engine.judging import Outbound
from neens.engine.scoring import judge_item
from neens.settings import Settings
from neens.store.db import Database
from neens.store.judges import JudgeInfo, judges_by_id
from neens.store.keys import CreatedKey
from neens.store.models import Job, PreprodItem, PreprodRun, Score, TraceSession
from tests.support.live import app_client, serve_in_thread
from tests.support.preprod import (
    auth,
    create_run,
    golden_dataset,
    items_of,
    push_through,
    wait_for_run,
)

ITEMS = [{"input": f"question {n}", "expected_output": f"the answer is {n}"} for n in range(12)]
ANSWERS = {
    # right, close, and plainly wrong answers, so the scores differ from item to item
    item["input"]: (
        item["expected_output"]
        if n % 3 == 0
        else f"{item['expected_output']}, I think"
        if n % 3 == 1
        else "no idea"
    )
    for n, item in enumerate(ITEMS)
}


@dataclass
class Agent:
    url: str = ""
    slow_answered_at: float | None = None


@contextmanager
def agent(answers: dict[str, str] | None = None, *, slow_s: float = 0.0) -> Iterator[Agent]:
    """An agent endpoint (request format `neens`) on loopback: answers each prompt from
    `answers` ("no idea" when absent), or with the prompt itself without them; the first item's
    prompt, SLOW, is answered after `slow_s`."""
    state = Agent()

    async def reply(request: Request) -> Response:
        prompt = (await request.json())["input"]
        if prompt == SLOW and slow_s:
            await asyncio.sleep(slow_s)
            state.slow_answered_at = time.monotonic()
        answer = prompt if answers is None else answers.get(prompt, "no idea")
        return JSONResponse({"output": answer})

    with serve_in_thread(Starlette(routes=[Route("/agent", reply, methods=["POST"])])) as server:
        state.url = f"{server.url}/agent"
        yield state


SLOW = ITEMS[0]["input"]


async def _judge(client: httpx.AsyncClient, key: CreatedKey, body: dict[str, Any]) -> str:
    r = await client.post("/judges", json=body, headers=auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _jobs_of(db: Database, run_id: str) -> dict[str, str]:
    """The run's push and scoring jobs that ever existed: kind -> status."""
    async with db.read() as s:
        rows = await s.scalars(
            select(Job).where(Job.dedupe_key.in_([f"push:{run_id}", f"score:{run_id}"]))
        )
        return {job.kind: job.status for job in rows}


async def _settled_jobs_of(db: Database, run_id: str, timeout_s: float = 10.0) -> dict[str, str]:
    """`_jobs_of` once no job is still running: a job is marked done in its own write, just
    after the handler that finished the run returns."""
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = await _jobs_of(db, run_id)
        if "running" not in jobs.values() or time.monotonic() > deadline:
            return jobs
        await asyncio.sleep(0.02)


async def _stored(db: Database, run_id: str) -> dict[str, dict[str, Any]]:
    """Per item: its row, its session's output and its scores by judge."""
    async with db.read() as s:
        rows = (
            await s.execute(
                select(PreprodItem, TraceSession.output)
                .outerjoin(TraceSession, TraceSession.pk == PreprodItem.session_pk)
                .where(PreprodItem.run_id == run_id)
            )
        ).all()
        scores = list(await s.scalars(select(Score).where(Score.run_id == run_id)))
    out: dict[str, dict[str, Any]] = {
        item.input: {"item": item, "output": output, "scores": {}} for item, output in rows
    }
    by_id = {v["item"].item_id: v for v in out.values()}
    for score in scores:
        judged = by_id[score.item_id]["scores"]
        assert score.judge_id not in judged, f"two scores of one judge on {score.item_id}"
        judged[score.judge_id] = score
    return out


async def test_built_in_judges_score_each_answer_as_it_is_stored_with_no_scoring_job(
    client: httpx.AsyncClient, db: Database, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    contains = await _judge(
        client, admin_key, {"name": "says it", "type": "managed", "check": "contains"}
    )
    similar = await _judge(
        client,
        admin_key,
        {"name": "close", "type": "managed", "check": "fuzzy_similarity"},
    )
    both = await _judge(
        client,
        admin_key,
        {
            "name": "blend",
            "type": "composite",
            "components": [{"judgeId": contains, "weight": 1}, {"judgeId": similar, "weight": 3}],
        },
    )
    judge_ids = [contains, both]
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    with agent(ANSWERS) as answering:
        done = await push_through(
            client, admin_key, dataset_id, answering.url, judge_deployment_ids=judge_ids
        )
    assert done["status"] == "completed", done
    assert done["counts"] == {"pending": 0, "captured": 0, "scored": len(ITEMS), "error": 0}
    # Scored by the push job itself: no scoring job was ever queued for this run.
    assert await _settled_jobs_of(db, done["id"]) == {"preprod.push": "done"}
    pushed = await _stored(db, done["id"])
    for stored in pushed.values():
        item = stored["item"]
        assert item.captured_at is not None and item.scored_at is not None

    # The scoring pass's per-item function, on the same prompt, stored output and expected
    # output, gives the same verdicts.
    async with db.read() as s:
        project_id = await s.scalar(
            select(PreprodRun.project_id).where(PreprodRun.id == done["id"])
        )
        assert project_id is not None
        judges = await judges_by_id(s, project_id, judge_ids)
    outbound = Outbound(db.secrets, allow_private=True)
    for prompt, stored in pushed.items():
        item = stored["item"]
        assert stored["output"] == ANSWERS[prompt]
        case = JudgeCase(item.input, stored["output"], item.expected_output)
        expected = await judge_item(judges, judge_ids, item.item_id, 0, case, outbound)
        assert set(stored["scores"]) == set(expected.verdicts) == {contains, similar, both}
        for judge_id, verdict in expected.verdicts.items():
            score = stored["scores"][judge_id]
            assert (score.score, score.label, score.reason, score.unscored_reason) == (
                verdict.score,
                verdict.label,
                verdict.reason,
                verdict.unscored_reason,
            )
        assert item.score == pytest.approx(
            mean(v.score for _, v in expected.top if v.score is not None)
        )
    assert {round(s["item"].score, 6) for s in pushed.values()} != {1.0}  # not all alike

    # A runner-mode run of the same answers is scored by the `preprod.score` job, as before:
    # the same scores, item by item.
    runner = await create_run(
        client, admin_key, dataset_id=dataset_id, judge_deployment_ids=judge_ids
    )
    for item in await items_of(client, admin_key, runner["id"]):
        body = {
            "session": {"id": f"runner-{item['item_id']}"},
            "spans": [
                {
                    "id": "r",
                    "name": "agent.run",
                    "input": item["input"],
                    "output": ANSWERS[item["input"]],
                    "attributes": {
                        "neens.eval_run_id": runner["id"],
                        "neens.dataset_item_id": item["item_id"],
                    },
                }
            ],
        }
        r = await client.post("/sessions", json=body, headers=auth(ingest_key))
        assert r.status_code == 200, r.text
    finished = await wait_for_run(client, admin_key, runner["id"])
    assert finished["status"] == "completed"
    assert (await _settled_jobs_of(db, runner["id"]))["preprod.score"] == "done"
    rescored = await _stored(db, runner["id"])
    for prompt, stored in pushed.items():
        other = rescored[prompt]
        assert (stored["item"].score, stored["item"].passed, stored["item"].status) == (
            other["item"].score,
            other["item"].passed,
            other["item"].status,
        )
        assert {j: (s.score, s.reason) for j, s in stored["scores"].items()} == {
            j: (s.score, s.reason) for j, s in other["scores"].items()
        }


async def test_a_judge_that_cannot_score_one_answer_errors_that_item_only(
    client: httpx.AsyncClient, db: Database, admin_key: CreatedKey
) -> None:
    exact = await _judge(
        client, admin_key, {"name": "exact", "type": "managed", "check": "exact_match"}
    )
    items = [*ITEMS[:3], {"input": "no reference", "expected_output": None}]
    dataset_id, _ = await golden_dataset(client, admin_key, items)
    with agent(ANSWERS) as answering:
        done = await push_through(
            client, admin_key, dataset_id, answering.url, judge_deployment_ids=[exact]
        )
    assert done["status"] == "completed", done
    by_input = {i["input"]: i for i in await items_of(client, admin_key, done["id"])}
    assert by_input["no reference"]["status"] == "error"
    assert by_input["no reference"]["error"] == (
        "no judge could score this item (exact: exact_match compares with the expected output, "
        "and this item has none)"
    )
    assert [by_input[i["input"]]["status"] for i in ITEMS[:3]] == ["scored"] * 3
    assert await _settled_jobs_of(db, done["id"]) == {"preprod.push": "done"}


async def test_a_judge_that_raises_on_an_answer_is_that_answers_unscored_verdict(
    client: httpx.AsyncClient, db: Database
) -> None:
    """The per-item function the push job and the scoring pass share turns a raise into that
    answer's unscored verdict (the server, started by `client`, holds the secret keys)."""
    broken = JudgeInfo(
        "jdg_broken",
        "broken",
        "managed",
        {"check": "regex", "options": {"pattern": "("}},  # does not compile
        None,
        True,
        False,
        False,
        datetime.now(UTC),
    )
    judged = await judge_item(
        {broken.id: broken},
        [broken.id],
        "item-1",
        1,
        JudgeCase("q", "a", None),
        Outbound(db.secrets, allow_private=True),
    )
    [(judge_id, verdict)] = judged.top
    assert judge_id == "jdg_broken" and verdict.score is None
    assert verdict.unscored_reason == "judge_call_failed"
    assert verdict.reason.startswith("the judge failed on this answer (Unprocessable")
    assert judged.verdicts == {"jdg_broken": verdict}


# --- LLM judges: concurrently with capture, within the limit -----------------------------------


@dataclass
class CountingJudge:
    """An OpenAI-compatible judge on loopback that counts the requests it holds at once."""

    base_url: str = ""
    in_flight: int = 0
    most_in_flight: int = 0
    arrivals: list[tuple[float, str]] = field(default_factory=list)
    """(time.monotonic(), the rendered prompt) of every request."""


@contextmanager
def counting_judge(delay_s: float) -> Iterator[CountingJudge]:
    state = CountingJudge()

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        state.arrivals.append((time.monotonic(), body["messages"][-1]["content"]))
        state.in_flight += 1
        state.most_in_flight = max(state.most_in_flight, state.in_flight)
        try:
            await asyncio.sleep(delay_s)
        finally:
            state.in_flight -= 1
        content = json.dumps({"score": 0.9, "reason": "close enough"})
        return JSONResponse(
            {
                "id": "chatcmpl-count",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "judge"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with serve_in_thread(app) as live:
        state.base_url = f"{live.url}/v1"
        yield state


async def test_llm_judges_score_while_capture_goes_on_within_the_concurrency_limit(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    limit = 2
    limited = settings.model_copy(
        update={"judge_concurrency": limit, "push_concurrency": 16, "push_timeout_s": 10.0}
    )
    with counting_judge(delay_s=0.15) as judge, agent(slow_s=1.5) as slow:
        async with app_client(limited, db) as client:
            llm = await _judge(
                client,
                admin_key,
                {
                    "name": "llm",
                    "type": "llm_prompt",
                    "template": "Q: {input}\nA: {output}\nRef: {expected_output}",
                    "endpoint": {"baseUrl": judge.base_url, "model": "judge-1"},
                },
            )
            dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
            done = await push_through(
                client, admin_key, dataset_id, slow.url, judge_deployment_ids=[llm]
            )
            items = await items_of(client, admin_key, done["id"])
    assert done["status"] == "completed", done
    assert [i["status"] for i in items] == ["scored"] * len(ITEMS)
    assert all(i["score"] == pytest.approx(0.9) for i in items)
    # One judge call per item, never more than the limit at once, and the limit was used.
    assert len(judge.arrivals) == len(ITEMS)
    assert judge.most_in_flight == limit
    # Judging did not wait for capture to end: answers were judged while the slow call was
    # still out.
    assert slow.slow_answered_at is not None
    early = [prompt for at, prompt in judge.arrivals if at < slow.slow_answered_at]
    assert len(early) >= limit, judge.arrivals
    assert await _settled_jobs_of(db, done["id"]) == {"preprod.push": "done"}
