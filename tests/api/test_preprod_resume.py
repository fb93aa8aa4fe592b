"""A server that stops mid-run loses nothing: the next one resumes from table state."""

from __future__ import annotations

from neens.demo.endpoints import agent_suite, serve
from neens.settings import Settings
from neens.store import jobs
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.runs import mark_item_error
from tests.support.live import app_client
from tests.support.preprod import (
    auth,
    connection,
    create_run,
    golden_dataset,
    items_of,
    wait_for_run,
)

ITEMS = [{"input": f"q{n}", "expected_output": f"a{n}"} for n in range(5)]
RIGHT = {i["input"]: i["expected_output"] for i in ITEMS}


async def test_a_push_run_whose_worker_died_is_resumed_calling_only_the_pending_items(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    with serve(*agent_suite(RIGHT)) as agents:
        # First server: it accepts the run, then "dies" holding the job.
        first = settings.model_copy(update={"workers_in_process": False})
        async with app_client(first, db) as client:
            dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
            conn = await connection(client, admin_key, agents.url("/neens"))
            run = await create_run(
                client,
                admin_key,
                dataset_id=dataset_id,
                runner_mode="push",
                agent_connection_id=conn,
            )
            items = await items_of(client, admin_key, run["id"])
        claimed = await jobs.claim(db, "worker-that-died", lease_s=-1.0)
        assert claimed is not None and claimed.kind == "preprod.push"
        async with db.write() as s:  # it had finished one item before it died
            await mark_item_error(s, run["id"], items[0]["item_id"], "endpoint timed out")

        # Second server: its worker takes the abandoned job over when the lease has run out.
        async with app_client(settings, db) as client:
            done = await wait_for_run(client, admin_key, run["id"])
            final = await items_of(client, admin_key, run["id"])
    assert done["status"] == "completed"
    called = sorted(call.body["input"] for call in agents.calls)
    assert called == [f"q{n}" for n in range(1, 5)]
    assert [i["status"] for i in final] == ["error", "scored", "scored", "scored", "scored"]
    assert final[0]["error"] == "endpoint timed out"


async def test_scoring_interrupted_after_capture_is_finished_by_the_next_server(
    settings: Settings, db: Database, ingest_key: CreatedKey
) -> None:
    stopped = settings.model_copy(update={"workers_in_process": False})
    async with app_client(stopped, db) as client:
        dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS[:2])
        run = await create_run(client, ingest_key, dataset_id=dataset_id)
        for item in await items_of(client, ingest_key, run["id"]):
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
            assert (
                await client.post("/sessions", json=body, headers=auth(ingest_key))
            ).status_code == 200
        waiting = (await client.get(f"/preprod-evals/{run['id']}", headers=auth(ingest_key))).json()
        assert waiting["status"] == "running"
        assert waiting["counts"]["captured"] == 2
    async with app_client(settings, db) as client:
        done = await wait_for_run(client, ingest_key, run["id"])
    assert done["status"] == "completed"
