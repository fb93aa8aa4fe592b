"""A push run always ends: a reply that cannot be read or stored errors its own item, once.

Every reply here is one that fuzzing sent back from an agent endpoint. Before, a lone surrogate
or a NUL sank the whole push job: it was retried five times (the agent called six or seven times
per item) and then the run sat `running` for ever with its healthy items `pending`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pytest
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from neens.demo.endpoints import ChatModel, Reply, serve_one
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.support.live import serve_in_thread
from tests.support.preprod import (
    auth,
    connection,
    create_run,
    golden_dataset,
    items_of,
    wait_for_run,
)

DEEP = 100_000
MAX_INT64 = 2**63 - 1

# prompt -> (HTTP status, raw reply body, what the item's error must say; None: it is scored)
REPLIES: dict[str, tuple[int, bytes, str | None]] = {
    "good one": (200, b'{"output": "good one"}', None),
    "high surrogate": (200, b'{"output": "\\ud800"}', "lone surrogate"),
    "low surrogate": (200, b'{"output": "x\\udc00y"}', "lone surrogate"),
    "surrogate as bytes": (200, b'{"output": "\xed\xa0\x80"}', "lone surrogate"),
    "nul": (200, b'{"output": "a\\u0000b"}', "NUL"),
    "nul in the model": (
        200,
        b'{"output": "nul in the model", "model": "gpt\\u0000", '
        b'"usage": {"input_tokens": 3, "output_tokens": 4}}',
        "NUL",
    ),
    "raw nul byte": (200, b'{"output": "a\x00b"}', "did not answer JSON"),
    "invalid utf-8": (200, b'{"output": "\xff\xfe"}', "did not answer JSON"),
    "not json": (200, b"<html>oops</html>", "did not answer JSON"),
    "huge number": (200, b'{"output": ' + b"9" * 5000 + b"}", "did not answer JSON"),
    "huge number in usage": (
        200,
        b'{"output": "x", "usage": {"input_tokens": ' + b"9" * 5000 + b"}}",
        "did not answer JSON",
    ),
    "infinite number": (200, b'{"output": 1e999}', "not a string"),
    "deeply nested": (200, b"[" * DEEP + b"]" * DEEP, "did not answer JSON"),
    "deeply nested answer": (
        200,
        b'{"output": ' + b"[" * DEEP + b"]" * DEEP + b"}",
        "did not answer JSON",
    ),
    "nul in an error reply": (500, b"\x00boom", "HTTP 500"),
    "good two": (200, b'{"output": "good two"}', None),
}

NESTED: dict[str, tuple[int, bytes, str | None]] = {
    "nested good": (200, b'{"data": {"answers": [{"text": "nested good"}]}}', None),
    "nested nul": (200, b'{"data": {"answers": [{"text": "\\u0000"}]}}', "NUL"),
    "nested surrogate": (200, b'{"data": {"answers": [{"text": "\\udfff"}]}}', "lone surrogate"),
    "nested object": (200, b'{"data": {"answers": [{"text": {"a": "\\u0000"}}]}}', "not a string"),
}


@dataclass
class RawAgent:
    url: str = ""
    calls: Counter[str] = field(default_factory=Counter)


@contextmanager
def raw_agent(replies: dict[str, tuple[int, bytes, str | None]]) -> Iterator[RawAgent]:
    """An agent endpoint answering each prompt with exactly the bytes given, on loopback."""
    state = RawAgent()

    async def reply(request: Request) -> Response:
        prompt = (await request.json())["input"]
        state.calls[prompt] += 1
        status, body, _ = replies[prompt]
        return Response(body, status_code=status, media_type="application/json")

    with serve_in_thread(Starlette(routes=[Route("/agent", reply, methods=["POST"])])) as server:
        state.url = f"{server.url}/agent"
        yield state


async def _push(
    client: httpx.AsyncClient,
    key: CreatedKey,
    replies: dict[str, tuple[int, bytes, str | None]],
    judge_ids: list[str] | None = None,
    **connection_fields: str,
) -> tuple[dict[str, object], list[dict[str, object]], RawAgent]:
    items = [{"input": prompt, "expected_output": prompt} for prompt in replies]
    dataset_id, _ = await golden_dataset(client, key, items, name=f"golden-{len(replies)}")
    with raw_agent(replies) as agent:
        conn = await connection(client, key, agent.url, **connection_fields)
        run = await create_run(
            client,
            key,
            dataset_id=dataset_id,
            runner_mode="push",
            agent_connection_id=conn,
            judge_deployment_ids=judge_ids,
        )
        done = await wait_for_run(client, key, run["id"], timeout_s=20)
    return done, await items_of(client, key, str(run["id"])), agent


def _check_items(
    replies: dict[str, tuple[int, bytes, str | None]], items: list[dict[str, object]]
) -> None:
    for item in items:
        _, _, reason = replies[str(item["input"])]
        if reason is None:
            assert item["status"] == "scored", item
            assert item["passed"] is True, item
        else:
            assert item["status"] == "error", item
            assert reason in str(item["error"]), item


async def test_every_garbage_reply_errors_its_own_item_once_and_the_run_finishes(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    done, items, agent = await _push(client, admin_key, REPLIES)
    assert done["status"] == "completed"
    assert dict(agent.calls) == dict.fromkeys(REPLIES, 1)  # once per item, never retried
    _check_items(REPLIES, items)
    stored = {str(i["input"]): str(i["error"]) for i in items if i["status"] == "error"}
    assert "cannot be stored" in stored["high surrogate"]
    # The reply's text is copied without its control characters, so the error is storable.
    assert stored["nul in an error reply"] == "endpoint answered HTTP 500: boom"


async def test_garbage_at_a_nested_answer_path_errors_its_own_item_once(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    done, items, agent = await _push(client, admin_key, NESTED, answerPath="data.answers[0].text")
    assert done["status"] == "completed"
    assert dict(agent.calls) == dict.fromkeys(NESTED, 1)
    _check_items(NESTED, items)


@pytest.mark.parametrize("prompt", ["high surrogate", "nul"])
async def test_a_run_whose_only_answer_cannot_be_stored_fails_with_the_reason(
    client: httpx.AsyncClient, admin_key: CreatedKey, prompt: str
) -> None:
    replies = {prompt: REPLIES[prompt]}
    done, items, agent = await _push(client, admin_key, replies)
    assert done["status"] == "failed"
    assert done["error"]
    assert agent.calls == {prompt: 1}
    _check_items(replies, items)


async def test_token_counts_whose_sum_overflows_do_not_hang_the_run(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    replies: dict[str, tuple[int, bytes, str | None]] = {
        "overflowing usage": (
            200,
            b'{"output": "overflowing usage", "usage": {"input_tokens": %d, "output_tokens": %d}}'
            % (MAX_INT64, MAX_INT64),
            None,
        ),
        "good one": REPLIES["good one"],
    }
    done, items, agent = await _push(client, admin_key, replies)
    assert done["status"] == "completed"
    assert dict(agent.calls) == dict.fromkeys(replies, 1)
    by_input = {i["input"]: i for i in items}
    assert by_input["good one"]["status"] == "scored"
    # Stored (with its counts flagged) or refused with a reason: either way, it ended.
    overflow = by_input["overflowing usage"]
    assert overflow["status"] == "scored" or overflow["error"], overflow


REFUSED = "an answer this database refuses"
_REFUSE = {
    "sqlite": [
        f"""CREATE TRIGGER refuse_answer BEFORE INSERT ON spans WHEN NEW.output = '{REFUSED}'
        BEGIN SELECT RAISE(ABORT, 'answer refused by a trigger'); END"""
    ],
    "postgresql": [
        f"""CREATE FUNCTION refuse_answer() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.output = '{REFUSED}' THEN
                RAISE EXCEPTION 'answer refused by a trigger' USING ERRCODE = 'check_violation';
            END IF;
            RETURN NEW;
        END $$""",
        """CREATE TRIGGER refuse_answer BEFORE INSERT ON spans
        FOR EACH ROW EXECUTE FUNCTION refuse_answer()""",
    ],
}


async def test_an_answer_the_database_refuses_errors_only_its_own_item(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database, dialect: str
) -> None:
    """Checks before writing cannot foresee every refusal; the batch is then stored item by item
    so the healthy answers it held are still captured."""
    async with db.write() as s:
        for statement in _REFUSE[dialect]:
            await s.execute(text(statement))
    healthy = {f"healthy {n}": (200, b'{"output": "healthy %d"}' % n, None) for n in range(6)}
    replies = {
        **healthy,
        REFUSED: (200, b'{"output": "%s"}' % REFUSED.encode(), "answer refused by a trigger"),
    }
    done, items, agent = await _push(client, admin_key, replies)
    assert done["status"] == "completed"
    assert dict(agent.calls) == dict.fromkeys(replies, 1)
    _check_items(replies, items)
    assert "the answer cannot be stored" in str(
        next(i["error"] for i in items if i["input"] == REFUSED)
    )


def _judge_reply(body: dict[str, object]) -> str | Reply:
    """A model that puts a NUL or a lone surrogate in its reason, or a reason the database
    (a trigger, below) refuses, depending on the answer it judges."""
    prompt = str(body["messages"][-1]["content"])  # type: ignore[index]
    reason = "fine"
    if "answer nul" in prompt:
        reason = "fine\x00 really"
    elif "answer surrogate" in prompt:
        reason = "fine \ud800 really"
    elif "answer refused" in prompt:
        reason = REFUSED
    completion = {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 0,
        "model": "judge-1",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": json.dumps({"score": 0.9, "reason": reason}),
                },
                "finish_reason": "stop",
            }
        ],
    }
    return Reply(body=json.dumps(completion))  # ASCII escapes: a lone surrogate travels as \ud800


_REFUSE_SCORE = {
    "sqlite": [
        f"""CREATE TRIGGER refuse_score BEFORE INSERT ON scores WHEN NEW.reason = '{REFUSED}'
        BEGIN SELECT RAISE(ABORT, 'score refused by a trigger'); END"""
    ],
    "postgresql": [
        f"""CREATE FUNCTION refuse_score() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.reason = '{REFUSED}' THEN
                RAISE EXCEPTION 'score refused by a trigger' USING ERRCODE = 'check_violation';
            END IF;
            RETURN NEW;
        END $$""",
        """CREATE TRIGGER refuse_score BEFORE INSERT ON scores
        FOR EACH ROW EXECUTE FUNCTION refuse_score()""",
    ],
}


async def test_judge_replies_that_cannot_be_stored_as_sent_do_not_sink_scoring(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database, dialect: str
) -> None:
    async with db.write() as s:
        for statement in _REFUSE_SCORE[dialect]:
            await s.execute(text(statement))
    replies: dict[str, tuple[int, bytes, str | None]] = {
        f"answer {kind}": (200, b'{"output": "answer %s"}' % kind.encode(), None)
        for kind in ("nul", "surrogate", "refused", "healthy")
    }
    with serve_one(ChatModel(_judge_reply)) as llm:
        r = await client.post(
            "/judges",
            json={
                "name": "faithfulness",
                "type": "llm_prompt",
                "template": "Q: {input}\nA: {output}",
                "endpoint": {"baseUrl": llm.base_url, "model": "judge-1", "apiKey": "sk-x"},
            },
            headers=auth(admin_key),
        )
        assert r.status_code == 201, r.text
        done, items, agent = await _push(client, admin_key, replies, judge_ids=[r.json()["id"]])
    assert done["status"] == "completed", done
    assert dict(agent.calls) == dict.fromkeys(replies, 1)
    by_input = {i["input"]: i for i in items}
    for kind in ("nul", "surrogate", "healthy"):
        assert by_input[f"answer {kind}"]["status"] == "scored", str(by_input[f"answer {kind}"])
    refused = by_input["answer refused"]
    assert refused["status"] == "error"
    assert "its scores cannot be stored" in str(refused["error"])
    assert "score refused by a trigger" in str(refused["error"])
    scores = (
        await client.get("/scores", params={"run_id": done["id"]}, headers=auth(admin_key))
    ).json()["scores"]
    reasons = sorted(score["reason"] for score in scores)
    assert reasons == sorted(["fine", "fine\\x00 really", "fine \\ud800 really"]), reasons
