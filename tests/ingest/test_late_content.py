"""Content events that change a session's output after a pre-prod run linked (and maybe scored)
it: a run still going scores the item again; a finished run keeps its verdict and the session is
flagged `content_after_run`, for good.

The scoring job is run by hand (the app's workers are not started), so each test puts the run
exactly where it wants it before the content arrives.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from neens.api.app import create_app
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import Job, PreprodItem
from neens.store.types import utcnow
from tests.conftest import auth
from tests.ingest.test_otlp_logs import (
    ANSWER,
    PROTO,
    QUESTION,
    content_events,
    log_record,
    logs_request,
    model_call,
)
from tests.support.otlp import export_request, span
from tests.support.preprod import create_run, golden_dataset, items_of, wait_for_run

TAGS = ("neens.eval_run_id", "neens.dataset_item_id", "neens.version_label")


@pytest.fixture
async def app_client(settings: Settings, db: Database) -> AsyncIterator[httpx.AsyncClient]:
    """The app without its in-process workers: `score()` runs them when a test is ready."""
    app = create_app(settings.model_copy(update={"workers_in_process": False}), database=db)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            c.app = app  # type: ignore[attr-defined]
            yield c


async def score(client: httpx.AsyncClient, key: CreatedKey, run_id: str) -> dict[str, Any]:
    """Run the workers until the run is finished."""
    worker = client.app.state.worker  # type: ignore[attr-defined]
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        return await wait_for_run(client, key, run_id)
    finally:
        stop.set()
        worker.notify()
        await task


def trace(tid: bytes, root: bytes, chat: bytes, run_id: str, item_id: str) -> bytes:
    """An agent span tagged for the run's item, and a model call with usage but no content."""
    return model_call(
        tid, root, chat, dict(zip(TAGS, (run_id, item_id, "local-test"), strict=True))
    )


async def post(client: httpx.AsyncClient, key: CreatedKey, path: str, body: bytes) -> None:
    r = await client.post(path, content=body, headers={**auth(key), **PROTO})
    assert r.status_code == 200, r.text


def logs(records: list[Any]) -> bytes:
    return logs_request(records).SerializeToString()


async def linked_run(
    client: httpx.AsyncClient, key: CreatedKey
) -> tuple[str, str, tuple[bytes, bytes, bytes]]:
    """A one-item runner-mode run whose item is linked to a trace that has no text yet."""
    dataset_id, _ = await golden_dataset(
        client, key, [{"input": QUESTION, "expected_output": ANSWER}]
    )
    run = await create_run(client, key, dataset_id=dataset_id, version_label="local-test")
    [item] = await items_of(client, key, run["id"])
    ids = (os.urandom(16), os.urandom(8), os.urandom(8))
    await post(client, key, "/v1/traces", trace(*ids, run["id"], item["item_id"]))
    [item] = await items_of(client, key, run["id"])
    assert item["status"] == "captured"
    return run["id"], item["item_id"], ids


async def session_of(client: httpx.AsyncClient, key: CreatedKey, tid: bytes) -> dict[str, Any]:
    r = await client.get(f"/sessions/{tid.hex()}", headers=auth(key))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_content_arriving_while_the_run_is_scoring_resets_the_verdict_and_rescores(
    app_client: httpx.AsyncClient, ingest_key: CreatedKey, db: Database
) -> None:
    client = app_client
    run_id, item_id, (tid, _, chat) = await linked_run(client, ingest_key)
    # Where a scoring pass leaves an item before the run is finished: a verdict stored on the
    # output the session had then (none), the run still running.
    async with db.write() as s:
        await s.execute(
            update(PreprodItem)
            .where(PreprodItem.run_id == run_id)
            .values(status="error", error="no output to judge", scored_at=utcnow())
        )

    await post(
        client, ingest_key, "/v1/logs", logs_request(content_events(tid, chat)).SerializeToString()
    )

    [item] = await items_of(client, ingest_key, run_id)
    assert (item["status"], item["error"], item["score"]) == ("captured", None, None)
    async with db.read() as s:
        job = await s.scalar(select(Job).where(Job.dedupe_key == f"score:{run_id}"))
    assert job is not None and job.status == "queued"

    run = await score(client, ingest_key, run_id)
    assert run["status"] == "completed"
    [item] = await items_of(client, ingest_key, run_id)
    assert (item["status"], item["passed"]) == ("scored", True)
    assert (await session_of(client, ingest_key, tid))["warnings"] == []


async def test_content_arriving_after_the_run_finished_keeps_the_verdict_and_flags_for_good(
    app_client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    client = app_client
    run_id, item_id, (tid, root, chat) = await linked_run(client, ingest_key)
    run = await score(client, ingest_key, run_id)
    assert run["status"] == "failed"
    [before] = await items_of(client, ingest_key, run_id)
    assert before["status"] == "error"

    # A system prompt alone changes no output: nothing to say.
    system = log_record(tid, chat, "gen_ai.system.message", {"content": "Answer briefly."})
    await post(client, ingest_key, "/v1/logs", logs([system]))
    assert (await session_of(client, ingest_key, tid))["warnings"] == []

    await post(
        client, ingest_key, "/v1/logs", logs_request(content_events(tid, chat)).SerializeToString()
    )

    session = await session_of(client, ingest_key, tid)
    assert session["output"] == ANSWER
    [warning] = session["warnings"]
    assert warning["code"] == "content_after_run"
    assert run_id in warning["message"]
    assert (await items_of(client, ingest_key, run_id)) == [before]
    assert (await client.get(f"/preprod-evals/{run_id}", headers=auth(ingest_key))).json()[
        "status"
    ] == "failed"

    # The session is derived again when more spans arrive: the warning stays.
    late_span = span(tid, os.urandom(8), "get_weather", parent=root, start_ms=50, end_ms=60)
    await post(client, ingest_key, "/v1/traces", export_request([late_span]).SerializeToString())
    session = await session_of(client, ingest_key, tid)
    assert session["spanCount"] == 3
    assert [w["code"] for w in session["warnings"]] == ["content_after_run"]
