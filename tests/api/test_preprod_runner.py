"""Runner mode: you run the agent; its traces link to the run's frozen items."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import Job, Score
from tests.support.preprod import (
    auth,
    create_run,
    golden_dataset,
    items_of,
    wait_for_run,
)

ITEMS = [
    {"input": "Where is order 17?", "expected_output": "Order 17 shipped on 3 June."},
    {"input": "Can I return shoes?", "expected_output": "Yes, within 30 days."},
    {"input": "Who is the CEO?", "expected_output": "Ada Lovelace."},
]


def trace(
    session_id: str,
    output: str,
    *,
    run_id: str | None,
    item_id: str | None = None,
    root: bool = True,
    attributes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    attrs: dict[str, Any] = dict(attributes or {})
    if run_id is not None:
        attrs["neens.eval_run_id"] = run_id
    if item_id is not None:
        attrs["neens.dataset_item_id"] = item_id
    attrs.setdefault("neens.version_label", "local-test")
    span: dict[str, Any] = {
        "id": "root" if root else "child",
        "name": "agent.run",
        "kind": "agent",
        "output": output,
        "attributes": attrs,
    }
    if not root:
        span["parent_id"] = "root"
    return {"session": {"id": session_id, "agent_name": "my-agent"}, "spans": [span]}


async def send(client: httpx.AsyncClient, key: CreatedKey, body: dict[str, Any]) -> None:
    r = await client.post("/sessions", json=body, headers=auth(key))
    assert r.status_code == 200, r.text


async def test_a_runner_run_waits_for_traces_and_records_no_model(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, version_id = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    assert run["id"].startswith("ppr_")
    assert run["status"] == "awaiting_traces"
    assert run["runnerMode"] == "runner"
    assert run["model"] is None
    assert run["modelProvider"] is None
    assert run["itemCount"] == 3
    items = await items_of(client, ingest_key, run["id"])
    assert [(i["input"], i["expected_output"]) for i in items] == [
        (x["input"], x["expected_output"]) for x in ITEMS
    ]
    assert all(i["status"] == "pending" for i in items)


async def test_the_item_set_is_frozen_when_the_run_is_created(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    r = await client.post(
        f"/datasets/{dataset_id}/versions",
        json={"items": [{"input": "brand new"}], "golden": True},
        headers=auth(ingest_key),
    )
    assert r.status_code == 201
    items = await items_of(client, ingest_key, run["id"])
    assert [i["input"] for i in items] == [x["input"] for x in ITEMS]


async def test_tagged_traces_link_to_their_items_and_the_run_completes(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    items = await items_of(client, ingest_key, run["id"])
    # Answer the last item first: the item id decides, not the order.
    last = items[2]
    await send(
        client,
        ingest_key,
        trace("t-3", last["expected_output"], run_id=run["id"], item_id=last["item_id"]),
    )
    now = (await client.get(f"/preprod-evals/{run['id']}", headers=auth(ingest_key))).json()
    assert now["status"] == "running"
    assert now["counts"]["captured"] == 1
    linked = await items_of(client, ingest_key, run["id"])
    assert [i["status"] for i in linked] == ["pending", "pending", "captured"]
    assert linked[2]["session_id"] == "t-3"
    for n, item in enumerate(items[:2]):
        await send(
            client,
            ingest_key,
            trace(f"t-{n}", item["expected_output"], run_id=run["id"], item_id=item["item_id"]),
        )
    done = await wait_for_run(client, ingest_key, run["id"])
    assert done["status"] == "completed"
    assert all(i["passed"] for i in await items_of(client, ingest_key, run["id"]))


async def test_a_trace_for_an_already_captured_item_links_nowhere(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    first = (await items_of(client, ingest_key, run["id"]))[0]
    await send(client, ingest_key, trace("a", "x", run_id=run["id"], item_id=first["item_id"]))
    # A duplicate replay of the same prompt, and a typo'd item id.
    await send(client, ingest_key, trace("b", "y", run_id=run["id"], item_id=first["item_id"]))
    await send(client, ingest_key, trace("c", "z", run_id=run["id"], item_id="dsi_typo"))
    items = await items_of(client, ingest_key, run["id"])
    assert [i["status"] for i in items] == ["captured", "pending", "pending"]
    assert items[0]["session_id"] == "a"


async def test_untagged_traces_fill_items_in_frozen_order(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    await send(client, ingest_key, trace("u1", "x", run_id=run["id"]))
    await send(client, ingest_key, trace("u2", "y", run_id=run["id"]))
    items = await items_of(client, ingest_key, run["id"])
    assert [i["session_id"] for i in items] == ["u1", "u2", None]


async def test_a_trace_is_linked_only_once_its_root_span_arrived(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS[:1])
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    await send(client, ingest_key, trace("s", "partial", run_id=run["id"], root=False))
    assert (await items_of(client, ingest_key, run["id"]))[0]["status"] == "pending"
    await send(client, ingest_key, trace("s", ITEMS[0]["expected_output"], run_id=run["id"]))
    done = await wait_for_run(client, ingest_key, run["id"])
    assert done["status"] == "completed"


async def test_traces_of_another_project_or_a_cancelled_run_are_ignored(
    client: httpx.AsyncClient, ingest_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    await send(client, other_project_key, trace("o", "x", run_id=run["id"]))
    assert (await items_of(client, ingest_key, run["id"]))[0]["status"] == "pending"

    r = await client.post(f"/preprod-evals/{run['id']}/cancel", headers=auth(ingest_key))
    assert r.status_code == 200
    assert r.json()["status"] == "cancelled"
    await send(client, ingest_key, trace("late", "x", run_id=run["id"]))
    assert all(i["status"] == "pending" for i in await items_of(client, ingest_key, run["id"]))
    again = await client.post(f"/preprod-evals/{run['id']}/cancel", headers=auth(ingest_key))
    assert again.status_code == 409
    gate = (await client.get(f"/preprod-evals/{run['id']}/gate", headers=auth(ingest_key))).json()
    assert gate["passed"] is False
    assert any("cancelled" in reason for reason in gate["reasons"])


async def test_a_misspelt_correlation_attribute_links_nothing_and_raises_no_error(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    body = trace("m", "x", run_id=None, attributes={"neens.evalRunId": run["id"]})
    await send(client, ingest_key, body)
    now = (await client.get(f"/preprod-evals/{run['id']}", headers=auth(ingest_key))).json()
    assert now["status"] == "awaiting_traces"


async def test_scoring_is_dispatched_exactly_once_when_the_last_traces_land_together(
    client: httpx.AsyncClient, ingest_key: CreatedKey, db: Database
) -> None:
    many = [{"input": f"q{n}", "expected_output": f"a{n}"} for n in range(12)]
    dataset_id, _ = await golden_dataset(client, ingest_key, many)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    items = await items_of(client, ingest_key, run["id"])
    await asyncio.gather(
        *(
            send(
                client,
                ingest_key,
                trace(f"c{n}", item["expected_output"], run_id=run["id"], item_id=item["item_id"]),
            )
            for n, item in enumerate(items)
        )
    )
    done = await wait_for_run(client, ingest_key, run["id"])
    assert done["status"] == "completed"
    async with db.read() as s:
        jobs = await s.scalar(
            select(func.count()).where(
                Job.kind == "preprod.score", Job.payload["run_id"].as_string() == run["id"]
            )
        )
        scores = await s.scalar(select(func.count()).where(Score.run_id == run["id"]))
    assert jobs == 1
    # One Primary Score and one component verdict per item, never twice.
    assert scores == 2 * len(items)


async def test_an_item_the_agent_could_not_run_is_reported_and_the_run_finishes_counting_it(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id, gate={"min_pass_rate": 0.9})
    items = await items_of(client, ingest_key, run["id"])
    url = f"/preprod-evals/{run['id']}/items/{items[0]['item_id']}/error"
    r = await client.post(
        url, json={"reason": "agent command exited with status 1"}, headers=auth(ingest_key)
    )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "error"
    again = await client.post(url, json={"reason": "twice"}, headers=auth(ingest_key))
    assert again.status_code == 409
    for n, item in enumerate(items[1:]):
        await send(
            client,
            ingest_key,
            trace(f"e{n}", item["expected_output"], run_id=run["id"], item_id=item["item_id"]),
        )
    done = await wait_for_run(client, ingest_key, run["id"])
    assert done["status"] == "completed"
    assert done["counts"] == {"pending": 0, "captured": 0, "scored": 2, "error": 1}
    gate = (await client.get(f"/preprod-evals/{run['id']}/gate", headers=auth(ingest_key))).json()
    assert gate["passed"] is False
    assert gate["passRate"] == pytest.approx(2 / 3)


async def test_reporting_every_item_fails_the_run(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS[:1])
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    [item] = await items_of(client, ingest_key, run["id"])
    r = await client.post(
        f"/preprod-evals/{run['id']}/items/{item['item_id']}/error",
        json={"reason": "timed out after 300 s"},
        headers=auth(ingest_key),
    )
    assert r.status_code == 200
    done = await wait_for_run(client, ingest_key, run["id"])
    assert done["status"] == "failed"
    [final] = await items_of(client, ingest_key, run["id"])
    assert final["error"] == "timed out after 300 s"
