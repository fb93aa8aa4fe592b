"""Baselines, regressions, the gate, the comparison, metrics, insights and their delivery."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.support.live import serve_in_thread
from tests.support.preprod import (
    auth,
    create_run,
    golden_dataset,
    items_of,
    push_run,
)

ITEMS = [
    {"input": "Where is order 17?", "expected_output": "Order 17 shipped on 3 June."},
    {"input": "Can I return shoes?", "expected_output": "Yes, within 30 days."},
    {"input": "Who is the CEO?", "expected_output": "Ada Lovelace."},
    {"input": "Is there a fee?", "expected_output": "No fee."},
]
RIGHT = {item["input"]: item["expected_output"] for item in ITEMS}


async def test_an_item_the_baseline_run_passed_and_the_candidate_failed_is_a_regression(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    baseline = await push_run(client, admin_key, dataset_id, RIGHT)
    assert baseline["status"] == "completed"
    worse = dict(RIGHT)
    worse[ITEMS[0]["input"]] = "Sorry, I cannot help with that."
    candidate = await push_run(
        client,
        admin_key,
        dataset_id,
        worse,
        baseline={"kind": "preprod_run", "value": baseline["id"]},
        gate={"max_regressions": 0, "min_pass_rate": 0.9},
    )
    assert candidate["status"] == "completed_with_regressions"
    h = auth(admin_key)
    gate = (await client.get(f"/preprod-evals/{candidate['id']}/gate", headers=h)).json()
    assert gate == {
        "passed": False,
        "reasons": [
            "1 regression exceeds the maximum of 0",
            "pass rate 0.75 is below the minimum 0.9",
        ],
        "regressions": 1,
        "passRate": 0.75,
        "gate": {"max_regressions": 0, "min_pass_rate": 0.9},
    }
    comparison = (
        await client.get(f"/preprod-evals/{candidate['id']}/comparison", headers=h)
    ).json()
    regressed = [row for row in comparison["rows"] if row["regression"]]
    assert [row["input"] for row in regressed] == [ITEMS[0]["input"]]
    assert regressed[0]["output"] == "Sorry, I cannot help with that."
    assert regressed[0]["expectedOutput"] == ITEMS[0]["expected_output"]
    assert comparison["regressions"] == [regressed[0]["itemId"]]
    assert comparison["newPasses"] == []
    # The regression raised an insight about this run.
    insights = (await client.get("/insights", headers=h)).json()["insights"]
    assert [i["kind"] for i in insights] == ["preprod_regression"]
    assert insights[0]["runId"] == candidate["id"]
    assert "Pre-prod regression" in insights[0]["title"]


async def test_an_item_the_baseline_failed_and_the_candidate_passed_is_a_new_pass(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    worse = dict(RIGHT)
    worse[ITEMS[1]["input"]] = "no idea"
    baseline = await push_run(client, admin_key, dataset_id, worse)
    candidate = await push_run(
        client,
        admin_key,
        dataset_id,
        RIGHT,
        baseline={"kind": "preprod_run", "value": baseline["id"]},
        gate={"max_regressions": 0},
    )
    assert candidate["status"] == "completed"
    h = auth(admin_key)
    comparison = (
        await client.get(f"/preprod-evals/{candidate['id']}/comparison", headers=h)
    ).json()
    assert len(comparison["newPasses"]) == 1
    gate = (await client.get(f"/preprod-evals/{candidate['id']}/gate", headers=h)).json()
    assert gate["passed"] is True
    assert gate["reasons"] == []
    assert "costRules" not in gate


async def test_without_a_baseline_nothing_can_regress_but_everything_counts_to_the_pass_rate(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    worse = dict(RIGHT)
    worse[ITEMS[0]["input"]] = "nope"
    run = await push_run(client, admin_key, dataset_id, worse, gate={"min_pass_rate": 0.5})
    assert run["status"] == "completed"
    items = await items_of(client, admin_key, run["id"])
    assert all(i["baseline_passed"] is None for i in items)
    gate = (await client.get(f"/preprod-evals/{run['id']}/gate", headers=auth(admin_key))).json()
    assert gate["passed"] is True
    assert gate["passRate"] == 0.75, [(i["status"], i["error"]) for i in items]


async def test_a_production_window_baseline_matches_items_by_input_text(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    h = auth(admin_key)
    # Production traffic for two of the prompts, scored by a production judge.
    r = await client.post(
        "/judges",
        json={
            "name": "prod-similarity",
            "type": "managed",
            "check": "contains",
            "config": {"value": "shipped"},
            "scoreProduction": True,
        },
        headers=h,
    )
    assert r.status_code == 201, r.text
    for n, (prompt, answer) in enumerate(
        [(ITEMS[0]["input"], "Order 17 shipped on 3 June."), (ITEMS[1]["input"], "nope")]
    ):
        body = {
            "session": {"id": f"prod-{n}", "agent_name": "support"},
            "spans": [
                {"id": "r", "name": "agent.run", "kind": "agent", "input": prompt, "output": answer}
            ],
        }
        assert (await client.post("/sessions", json=body, headers=h)).status_code == 200
    await wait_for_production_scores(client, admin_key, 2)

    worse = dict(RIGHT)
    worse[ITEMS[0]["input"]] = "I cannot say."
    run = await push_run(
        client,
        admin_key,
        dataset_id,
        worse,
        baseline={"kind": "prod_window", "range": "7d"},
    )
    assert run["status"] == "completed_with_regressions"
    by_input = {i["input"]: i for i in await items_of(client, admin_key, run["id"])}
    assert by_input[ITEMS[0]["input"]]["baseline_passed"] is True
    assert by_input[ITEMS[1]["input"]]["baseline_passed"] is False
    # Prompts that never ran in production have no baseline verdict.
    assert by_input[ITEMS[2]["input"]]["baseline_passed"] is None


async def wait_for_production_scores(
    client: httpx.AsyncClient, key: CreatedKey, count: int
) -> None:
    deadline = time.monotonic() + 20
    while True:
        r = await client.get("/scores", params={"source": "production"}, headers=auth(key))
        assert r.status_code == 200, r.text
        if len(r.json()["scores"]) >= count:
            return
        assert time.monotonic() < deadline, r.json()
        await asyncio.sleep(0.05)


async def test_production_scores_never_mix_with_preprod_scores(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS[:1])
    run = await push_run(client, admin_key, dataset_id, RIGHT)
    h = auth(admin_key)
    preprod = (await client.get("/scores", params={"source": "preprod"}, headers=h)).json()
    production = (await client.get("/scores", params={"source": "production"}, headers=h)).json()
    assert production["scores"] == []
    assert preprod["scores"] and all(s["runId"] == run["id"] for s in preprod["scores"])


async def test_the_cost_family_reports_each_rule_and_unpriced_is_skipped_never_passed(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS[:2])
    gate = {"min_pass_rate": 0.5, "cost": {"max_avg_usd": 0.004}}
    priced = await push_run(
        client,
        admin_key,
        dataset_id,
        RIGHT,
        gate=gate,
        model="gpt-4o",
        usage={"prompt_tokens": 1000, "completion_tokens": 400},
    )
    h = auth(admin_key)
    result = (await client.get(f"/preprod-evals/{priced['id']}/gate", headers=h)).json()
    # gpt-4o: 1000 x $2.50/M + 400 x $10/M = $0.0065 per call.
    assert result["passed"] is False
    assert result["costRules"] == [
        {
            "rule": "max_avg_usd",
            "status": "fail",
            "observed": pytest.approx(0.0065),
            "threshold": 0.004,
            "reason": "cost avg 0.0065 USD exceeds budget 0.004 USD",
        }
    ]
    assert result["reasons"] == ["cost avg 0.0065 USD exceeds budget 0.004 USD"]

    unpriced = await push_run(client, admin_key, dataset_id, RIGHT, gate=gate)
    result = (await client.get(f"/preprod-evals/{unpriced['id']}/gate", headers=h)).json()
    assert result["passed"] is True
    [rule] = result["costRules"]
    assert rule["status"] == "skipped"
    assert rule["observed"] is None


async def test_metrics_has_one_row_per_judge_and_is_empty_before_scoring(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    h = auth(admin_key)
    waiting = await create_run(client, admin_key, dataset_id=dataset_id)
    r = await client.get(f"/preprod-evals/{waiting['id']}/metrics", headers=h)
    assert r.status_code == 200
    assert r.json() == {"metrics": []}

    worse = dict(RIGHT)
    worse[ITEMS[0]["input"]] = "nope"
    run = await push_run(client, admin_key, dataset_id, worse)
    metrics = (await client.get(f"/preprod-evals/{run['id']}/metrics", headers=h)).json()
    names = [m["metric"] for m in metrics["metrics"]]
    assert names == ["Expected-output similarity", "Primary Score"]
    for row in metrics["metrics"]:
        assert row["sessionsScored"] == 4
        assert row["passRate"] == 0.75


async def test_a_run_that_is_still_waiting_never_passes_its_gate(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id, gate={})
    gate = (await client.get(f"/preprod-evals/{run['id']}/gate", headers=auth(ingest_key))).json()
    assert gate["passed"] is False
    assert gate["passRate"] is None
    assert gate["reasons"] == ["run is still awaiting traces"]


async def test_regression_insights_are_delivered_to_sinks_and_failures_are_recorded(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    received: list[dict[str, Any]] = []

    async def hook(request: Request) -> Response:
        received.append({**await request.json(), "token": request.headers.get("x-token")})
        return JSONResponse({"ok": True})

    async def broken(request: Request) -> Response:
        return Response("no", status_code=503)

    app = Starlette(
        routes=[Route("/hook", hook, methods=["POST"]), Route("/broken", broken, methods=["POST"])]
    )
    h = auth(admin_key)
    with serve_in_thread(app) as sink:
        good = await client.post(
            "/notification-sinks",
            json={"name": "team", "url": f"{sink.url}/hook", "headers": {"X-Token": "s3cret"}},
            headers=h,
        )
        assert good.status_code == 201, good.text
        assert good.json()["headerNames"] == ["X-Token"]
        bad = await client.post(
            "/notification-sinks", json={"name": "down", "url": f"{sink.url}/broken"}, headers=h
        )
        dataset_id, _ = await golden_dataset(client, admin_key, ITEMS[:1])
        baseline = await push_run(client, admin_key, dataset_id, RIGHT)
        candidate = await push_run(
            client,
            admin_key,
            dataset_id,
            {},
            baseline={"kind": "preprod_run", "value": baseline["id"]},
        )
        assert candidate["status"] == "completed_with_regressions"
        deadline = time.monotonic() + 20
        while not received or not await _attempted(client, admin_key, bad.json()["id"]):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    assert received[0]["insight"]["runId"] == candidate["id"]
    assert received[0]["insight"]["kind"] == "preprod_regression"
    [delivery] = (
        await client.get(f"/notification-sinks/{bad.json()['id']}/deliveries", headers=h)
    ).json()["deliveries"]
    assert delivery["lastStatusCode"] == 503
    assert delivery["status"] in ("pending", "failed")
    assert delivery["lastError"] == "sink answered HTTP 503: no"
    assert received[0]["token"] == "s3cret", "the stored (encrypted) header is sent decrypted"

    # A sink removed is gone, its deliveries' record with it; the other one stays.
    gone = await client.delete(f"/notification-sinks/{good.json()['id']}", headers=h)
    assert gone.status_code == 204, gone.text
    listed = (await client.get("/notification-sinks", headers=h)).json()["notificationSinks"]
    assert [s["id"] for s in listed] == [bad.json()["id"]]
    for again in (
        await client.delete(f"/notification-sinks/{good.json()['id']}", headers=h),
        await client.get(f"/notification-sinks/{good.json()['id']}/deliveries", headers=h),
    ):
        assert again.status_code == 404 and again.json()["error"]["field"] == "sink_id"


async def _attempted(client: httpx.AsyncClient, key: CreatedKey, sink_id: str) -> bool:
    r = await client.get(f"/notification-sinks/{sink_id}/deliveries", headers=auth(key))
    return any(d["attempts"] > 0 for d in r.json()["deliveries"])
