"""No run sits unfinished without a job: a job that fails for good fails its run, the workers'
sweep re-queues or fails a run left without one, and the run detail says what a run waits for."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import delete, select, text, update

from neens.api.app import create_app
from neens.demo.endpoints import agent_suite, serve
from neens.settings import Settings
from neens.store import jobs
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import Job, PreprodRun
from neens.store.run_liveness import reconcile_runs
from neens.store.types import utcnow
from tests.support.preprod import (
    auth,
    connection,
    create_run,
    golden_dataset,
    items_of,
    wait_for_run,
)

ITEMS = [{"input": f"q{n}", "expected_output": f"a{n}"} for n in range(3)]
RIGHT = {i["input"]: i["expected_output"] for i in ITEMS}


@asynccontextmanager
async def app_client(
    settings: Settings, db: Database, *, workers: bool
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings.model_copy(update={"workers_in_process": workers}), database=db)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            yield c


async def _push_run(client: httpx.AsyncClient, key: CreatedKey, url: str) -> str:
    dataset_id, _ = await golden_dataset(client, key, ITEMS)
    conn = await connection(client, key, url)
    run = await create_run(
        client, key, dataset_id=dataset_id, runner_mode="push", agent_connection_id=conn
    )
    return str(run["id"])


async def _runner_run(client: httpx.AsyncClient, key: CreatedKey, *, answered: int) -> str:
    """A runner-mode run whose first `answered` items got their trace."""
    dataset_id, _ = await golden_dataset(client, key, ITEMS, name=f"golden-{answered}")
    run = await create_run(client, key, dataset_id=dataset_id)
    for item in (await items_of(client, key, str(run["id"])))[:answered]:
        body = {
            "session": {"id": item["item_id"]},
            "spans": [
                {
                    "id": "r",
                    "name": "agent.run",
                    "output": item["expected_output"],
                    "attributes": {
                        "neens.eval_run_id": run["id"],
                        "neens.dataset_item_id": item["item_id"],
                    },
                }
            ],
        }
        r = await client.post("/sessions", json=body, headers=auth(key))
        assert r.status_code == 200, r.text
    return str(run["id"])


async def _detail(client: httpx.AsyncClient, key: CreatedKey, run_id: str) -> dict[str, Any]:
    r = await client.get(f"/preprod-evals/{run_id}", headers=auth(key))
    assert r.status_code == 200, r.text
    detail: dict[str, Any] = r.json()
    return detail


async def _set_job(db: Database, key: str, **values: Any) -> None:
    async with db.write() as s:
        await s.execute(update(Job).where(Job.dedupe_key == key).values(**values))


REFUSE_ITEM_UPDATES = {
    "sqlite": [
        """CREATE TRIGGER refuse_items BEFORE UPDATE ON preprod_items
        BEGIN SELECT RAISE(ABORT, 'items are read-only today'); END"""
    ],
    "postgresql": [
        """CREATE FUNCTION refuse_items() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'items are read-only today' USING ERRCODE = 'check_violation';
        END $$""",
        """CREATE TRIGGER refuse_items BEFORE UPDATE ON preprod_items
        FOR EACH ROW EXECUTE FUNCTION refuse_items()""",
    ],
}


async def test_a_push_job_that_fails_for_good_fails_its_run_with_the_reason(
    settings: Settings, db: Database, admin_key: CreatedKey, dialect: str
) -> None:
    with serve(*agent_suite(RIGHT)) as agents:
        async with app_client(settings, db, workers=False) as client:
            run_id = await _push_run(client, admin_key, agents.url("/neens"))
        async with db.write() as s:  # nothing about an item can be recorded any more
            for statement in REFUSE_ITEM_UPDATES[dialect]:
                await s.execute(text(statement))
        # Its last attempt: earlier ones would only add their backoff to the test.
        await _set_job(db, f"push:{run_id}", attempts=jobs.MAX_ATTEMPTS - 1)
        async with app_client(settings, db, workers=True) as client:
            done = await wait_for_run(client, admin_key, run_id, timeout_s=20)
    assert done["status"] == "failed"
    assert f"its push job failed {jobs.MAX_ATTEMPTS} times" in done["error"], done
    assert "items are read-only today" in done["error"], done
    assert done["waitingFor"] is None
    assert Counter(call.body["input"] for call in agents.calls) == dict.fromkeys(RIGHT, 1)


async def test_the_sweep_fails_a_run_whose_job_failed_for_good_unnoticed(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    """The worker died between failing the job and failing its run."""
    with serve(*agent_suite(RIGHT)) as agents:
        async with app_client(settings, db, workers=False) as client:
            run_id = await _push_run(client, admin_key, agents.url("/neens"))
            waiting = (await _detail(client, admin_key, run_id))["waitingFor"]
        await _set_job(
            db,
            f"push:{run_id}",
            status="failed",
            attempts=jobs.MAX_ATTEMPTS,
            last_error="Traceback (most recent call last):\n  ...\nRuntimeError: disk on fire\n",
        )
        async with app_client(settings, db, workers=True) as client:
            done = await wait_for_run(client, admin_key, run_id, timeout_s=10)
    assert waiting["on"] == "worker" and waiting["job"] == "push"
    assert "no worker has claimed it" in waiting["message"]
    assert done["status"] == "failed"
    assert "RuntimeError: disk on fire" in done["error"]
    assert agents.calls == []


async def test_the_sweep_queues_again_a_push_run_whose_job_was_lost(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    with serve(*agent_suite(RIGHT)) as agents:
        async with app_client(settings, db, workers=False) as client:
            run_id = await _push_run(client, admin_key, agents.url("/neens"))
        async with db.write() as s:
            await s.execute(delete(Job).where(Job.dedupe_key == f"push:{run_id}"))
        async with app_client(settings, db, workers=False) as client:
            waiting = (await _detail(client, admin_key, run_id))["waitingFor"]
        async with app_client(settings, db, workers=True) as client:
            done = await wait_for_run(client, admin_key, run_id, timeout_s=10)
    assert waiting["on"] == "worker" and waiting["job"] is None
    assert "no job is working on this run" in waiting["message"]
    assert done["status"] == "completed"
    assert Counter(call.body["input"] for call in agents.calls) == dict.fromkeys(RIGHT, 1)


async def test_the_sweep_queues_again_scoring_that_was_lost(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    async with app_client(settings, db, workers=False) as client:
        run_id = await _runner_run(client, admin_key, answered=len(ITEMS))
    async with db.write() as s:  # scoring was dispatched, then its job vanished
        await s.execute(delete(Job).where(Job.dedupe_key == f"score:{run_id}"))
        dispatched = await s.scalar(
            select(PreprodRun.scoring_dispatched_at).where(PreprodRun.id == run_id)
        )
    assert dispatched is not None
    async with app_client(settings, db, workers=True) as client:
        done = await wait_for_run(client, admin_key, run_id, timeout_s=10)
    assert done["status"] == "completed"
    assert done["counts"]["scored"] == len(ITEMS)


async def test_a_runner_run_waiting_for_traces_is_left_alone(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    async with app_client(settings, db, workers=False) as client:
        started = await _runner_run(client, admin_key, answered=1)
        untouched = await _runner_run(client, admin_key, answered=0)
        assert await reconcile_runs(db) == []
        running = await _detail(client, admin_key, started)
        awaiting = await _detail(client, admin_key, untouched)
    assert running["status"] == "running"
    assert awaiting["status"] == "awaiting_traces"
    for detail, pending in ((running, 2), (awaiting, 3)):
        assert detail["waitingFor"]["on"] == "traces"
        assert detail["waitingFor"]["job"] is None
        assert f"{pending} items still without a trace" in detail["waitingFor"]["message"]


async def test_the_run_detail_says_when_a_job_lost_its_worker_or_waits_for_a_retry(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    with serve(*agent_suite(RIGHT)) as agents:
        async with app_client(settings, db, workers=False) as client:
            run_id = await _push_run(client, admin_key, agents.url("/neens"))
            claimed = await jobs.claim(db, "worker-that-died", lease_s=-3.0)
            assert claimed is not None
            lost = (await _detail(client, admin_key, run_id))["waitingFor"]
            await _set_job(
                db,
                f"push:{run_id}",
                status="queued",
                attempts=2,
                run_after=utcnow() + timedelta(seconds=30),
                last_error="Traceback (most recent call last):\nConnectionResetError: reset\n",
            )
            retry = (await _detail(client, admin_key, run_id))["waitingFor"]
            listed = (await client.get("/preprod-evals", headers=auth(admin_key))).json()
        await _set_job(db, f"push:{run_id}", run_after=utcnow())
        async with app_client(settings, db, workers=True) as client:
            done = await wait_for_run(client, admin_key, run_id, timeout_s=10)
    assert lost["on"] == "worker" and lost["job"] == "push"
    assert "stopped renewing it 3 s ago" in lost["message"], lost
    assert retry["on"] == "retry" and retry["job"] == "push"
    assert f"attempt 2 of {jobs.MAX_ATTEMPTS}" in retry["message"]
    assert "ConnectionResetError: reset" in retry["message"]
    assert "retried in 30 s" in retry["message"] or "retried in 29 s" in retry["message"]
    assert listed["runs"][0]["waitingFor"] == retry
    assert done["status"] == "completed"
    assert done["waitingFor"] is None
