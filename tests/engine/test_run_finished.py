"""`run.finished`: every way a run ends runs the registered finish hooks once, through the
worker that `neens serve` runs, and logs the finished run."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from neens.engine import run_finished
from neens.engine.run_finished import FinishedRun
from neens.queue.worker import JobContext
from neens.store import jobs
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import Job
from tests.support.preprod import auth, create_run, golden_dataset, items_of, wait_for_run

ITEMS = [
    {"input": "Where is order 17?", "expected_output": "Order 17 shipped on 3 June."},
    {"input": "Can I return shoes?", "expected_output": "Yes, within 30 days."},
]


@pytest.fixture
def finished(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FinishedRun]]:
    """Every run a registered hook was told about, in order."""
    seen: list[FinishedRun] = []

    async def hook(ctx: JobContext, run: FinishedRun) -> None:
        assert ctx.settings is not None and ctx.http is not None  # the worker's own context
        seen.append(run)

    monkeypatch.setattr(run_finished, "FINISH_HOOKS", [])
    run_finished.on_run_finished(hook)
    yield seen


async def _answer(
    client: httpx.AsyncClient, key: CreatedKey, run_id: str, answers: dict[str, str]
) -> None:
    """Send one runner trace per item, answering each prompt from `answers`."""
    for item in await items_of(client, key, run_id):
        span = {
            "id": "root",
            "name": "agent.run",
            "kind": "agent",
            "output": answers[item["input"]],
            "attributes": {
                "neens.eval_run_id": run_id,
                "neens.dataset_item_id": item["item_id"],
                "neens.version_label": "candidate",
            },
        }
        body = {"session": {"id": f"{run_id}-{item['item_id']}"}, "spans": [span]}
        r = await client.post("/sessions", json=body, headers=auth(key))
        assert r.status_code == 200, r.text


RIGHT = {item["input"]: item["expected_output"] for item in ITEMS}
WRONG = {item["input"]: "I do not know." for item in ITEMS}


async def _end(client: httpx.AsyncClient, key: CreatedKey, dataset_id: str, how: str) -> str:
    """A runner run of `dataset_id` brought to the terminal status `how`; returns its id."""
    if how == "completed_with_regressions":
        baseline = await _end(client, key, dataset_id, "completed")
        run = await create_run(
            client, key, dataset_id=dataset_id, baseline={"kind": "preprod_run", "value": baseline}
        )
        await _answer(client, key, run["id"], WRONG)
    else:
        run = await create_run(client, key, dataset_id=dataset_id)
    if how == "completed":
        await _answer(client, key, run["id"], RIGHT)
    elif how == "failed":
        for item in await items_of(client, key, run["id"]):
            url = f"/preprod-evals/{run['id']}/items/{item['item_id']}/error"
            r = await client.post(url, json={"reason": "agent crashed"}, headers=auth(key))
            assert r.status_code == 200, r.text
    elif how == "cancelled":
        r = await client.post(f"/preprod-evals/{run['id']}/cancel", headers=auth(key))
        assert r.status_code == 200, r.text
    done = await wait_for_run(client, key, run["id"])
    assert done["status"] == how
    return str(run["id"])


async def _settled(db: Database) -> None:
    """Wait until the worker has no job left to do (bounded in time)."""
    deadline = time.monotonic() + 30.0
    while await jobs.pending_count(db):
        assert time.monotonic() < deadline, "the worker did not finish its jobs"
        await asyncio.sleep(0.05)


EXPECTED_COUNTS: dict[str, dict[str, int]] = {
    "completed": {"pending": 0, "captured": 0, "scored": 2, "error": 0},
    "completed_with_regressions": {"pending": 0, "captured": 0, "scored": 2, "error": 0},
    "failed": {"pending": 0, "captured": 0, "scored": 0, "error": 2},
    "cancelled": {"pending": 2, "captured": 0, "scored": 0, "error": 0},
}


@pytest.mark.parametrize("how", sorted(EXPECTED_COUNTS))
async def test_a_finish_hook_runs_once_per_finished_run_through_the_worker(
    client: httpx.AsyncClient,
    db: Database,
    ingest_key: CreatedKey,
    finished: list[FinishedRun],
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    caplog.set_level(logging.INFO, logger="neens.runs")
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run_id = await _end(client, ingest_key, dataset_id, how)
    await _settled(db)
    await asyncio.sleep(0.3)  # a second job, were there one, would have been claimed by now
    await _settled(db)

    mine = [run for run in finished if run.id == run_id]
    assert len(mine) == 1, finished
    [run] = mine
    assert (run.status, run.item_count, run.counts) == (how, 2, EXPECTED_COUNTS[how])
    assert run.project_id == ingest_key.project_id and run.completed_at is not None
    # every run that finished (a baseline run too) was told about once
    assert len({r.id for r in finished}) == len(finished)
    async with db.read() as s:
        rows = list(await s.scalars(select(Job).where(Job.kind == "run.finished")))
    assert [(j.dedupe_key, j.status) for j in rows if j.payload["run_id"] == run_id] == [
        (f"finished:{run_id}", "done")
    ]
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(
        message.startswith(f"run {run_id} (candidate) finished {how}: 2 items, ")
        and ", ".join(f"{n} {status}" for status, n in EXPECTED_COUNTS[how].items()) in message
        for message in logged
    ), logged


async def test_a_failing_hook_retries_the_job_and_the_other_hooks_run_again(
    client: httpx.AsyncClient,
    db: Database,
    ingest_key: CreatedKey,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hooks are re-run with their job, which is why each must be idempotent."""
    calls: list[str] = []

    async def flaky(ctx: JobContext, run: FinishedRun) -> None:
        calls.append("flaky")
        if calls.count("flaky") == 1:
            raise RuntimeError("the roll-up's database write failed")

    async def after(ctx: JobContext, run: FinishedRun) -> None:
        calls.append("after")

    monkeypatch.setattr(run_finished, "FINISH_HOOKS", [flaky, after])
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    r = await client.post(f"/preprod-evals/{run['id']}/cancel", headers=auth(ingest_key))
    assert r.status_code == 200
    await _settled(db)  # the retry waits 2 s (backoff after attempt 1)
    assert calls == ["flaky", "flaky", "after"]
    async with db.read() as s:
        job: Any = await s.scalar(select(Job).where(Job.dedupe_key == f"finished:{run['id']}"))
    assert (job.status, job.attempts) == ("done", 2)
