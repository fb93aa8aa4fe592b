"""`POST /preprod-evals/imports`: another tool's results stored as a finished, read-only run."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.support.preprod import auth, golden_dataset
from tests.web.pages import sign_in

ITEMS = [
    {"input": "What is 2+2?", "expected_output": "4"},
    {"input": "Capital of France?", "expected_output": "Paris"},
    {"input": "Spell cat backwards", "expected_output": "tac"},
]


async def _dataset(client: httpx.AsyncClient, key: CreatedKey) -> tuple[str, list[str]]:
    dataset_id, version_id = await golden_dataset(client, key, ITEMS)
    r = await client.get(f"/datasets/{dataset_id}/versions/{version_id}/items", headers=auth(key))
    return dataset_id, [i["id"] for i in r.json()["items"]]


def _body(dataset_id: str, ids: list[str]) -> dict[str, Any]:
    return {
        "dataset_id": dataset_id,
        "version_label": "promptfoo:gpt-4o-mini",
        "model": "gpt-4o-mini",
        "source": {
            "tool": "promptfoo",
            "tool_version": "0.100.0",
            "run_id": "eval-abc",
            "sha256": "ab" * 32,
            "unknown": {"latency_ms": "promptfoo records no latency for this provider"},
        },
        "items": [
            {
                "item_id": ids[0],
                "trials": [
                    {"trial": 0, "output": "4", "score": 1.0, "passed": True, "cost_usd": 0.002},
                    {"trial": 1, "output": "5", "score": 0.0, "passed": False, "cost_usd": 0.001},
                ],
            },
            {"item_id": ids[1], "trials": [{"trial": 0, "output": "Paris", "passed": True}]},
            {"item_id": ids[2], "trials": [{"trial": 0, "error": "rate limited"}]},
        ],
    }


async def _post(client: httpx.AsyncClient, key: CreatedKey, body: Any) -> httpx.Response:
    return await client.post("/preprod-evals/imports", json=body, headers=auth(key))


async def test_an_import_is_a_finished_read_only_run_with_each_repeat(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, ids = await _dataset(client, ingest_key)
    r = await _post(client, ingest_key, _body(dataset_id, ids))
    assert r.status_code == 201, r.text
    run = r.json()
    assert run["status"] == "completed"
    assert run["runnerMode"] == "import"
    assert run["name"] == run["versionLabel"] == "promptfoo:gpt-4o-mini"
    assert run["model"] == "gpt-4o-mini"
    assert run["judgeDeploymentIds"] == []
    assert run["itemCount"] == 3
    assert run["counts"] == {"pending": 0, "captured": 0, "scored": 2, "error": 1}
    assert run["waitingFor"] is None and run["completedAt"] is not None
    imported = run["imported"]
    assert imported["tool"] == "promptfoo" and imported["runId"] == "eval-abc"
    assert imported["repeats"] == 2
    assert imported["unknown"] == {"latency_ms": "promptfoo records no latency for this provider"}

    h = auth(ingest_key)
    assert (await client.get(f"/preprod-evals/{run['id']}", headers=h)).json() == run
    items = (await client.get(f"/preprod-evals/{run['id']}/items", headers=h)).json()["items"]
    first, second, third = items
    # Strict over repeats: one failed repeat fails the item; the score is the repeats' mean.
    assert (first["status"], first["passed"], first["score"]) == ("scored", False, 0.5)
    assert first["input"] == "What is 2+2?" and first["expected_output"] == "4"
    assert first["output"] == "4" and first["session_id"] is None
    assert [t["passed"] for t in first["trials"]] == [True, False]
    assert [t["cost_usd"] for t in first["trials"]] == [0.002, 0.001]
    assert first["trials"][0]["latency_ms"] is None
    assert (second["status"], second["passed"], second["score"]) == ("scored", True, None)
    assert (third["status"], third["error"], third["passed"]) == ("error", "rate limited", None)

    gate = (await client.get(f"/preprod-evals/{run['id']}/gate", headers=h)).json()
    assert gate["passed"] is True, gate  # no threshold declared
    comparison = await client.get(f"/preprod-evals/{run['id']}/comparison", headers=h)
    assert comparison.status_code == 200, comparison.text
    assert comparison.json()["regressions"] == []
    # Cost is unknown to the run's cohort (no session was captured), never 0.
    assert comparison.json()["candidate"]["avgCostUsd"] is None
    metrics = await client.get(f"/preprod-evals/{run['id']}/metrics", headers=h)
    assert metrics.status_code == 200 and metrics.json()["metrics"] == []
    listed = (await client.get("/preprod-evals", headers=h)).json()["runs"]
    assert [x["id"] for x in listed] == [run["id"]]


async def test_a_gate_threshold_is_judged_on_the_imported_verdicts(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, ids = await _dataset(client, ingest_key)
    body = {**_body(dataset_id, ids), "gate": {"min_pass_rate": 0.5}}
    run = (await _post(client, ingest_key, body)).json()
    gate = (await client.get(f"/preprod-evals/{run['id']}/gate", headers=auth(ingest_key))).json()
    # One item of three passed (the errored one counts as failed): 1/3 < 0.5.
    assert gate["passed"] is False, gate


async def test_an_import_where_every_item_errored_is_failed(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, ids = await _dataset(client, ingest_key)
    body = _body(dataset_id, ids)
    body["items"] = [{"item_id": i, "trials": [{"trial": 0, "error": "harness"}]} for i in ids]
    r = await _post(client, ingest_key, body)
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "failed"
    assert "every item errored" in r.json()["error"]


async def test_an_imported_run_refuses_cancel_and_item_errors(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, ids = await _dataset(client, ingest_key)
    run = (await _post(client, ingest_key, _body(dataset_id, ids))).json()
    h = auth(ingest_key)
    r = await client.post(f"/preprod-evals/{run['id']}/cancel", headers=h)
    assert r.status_code == 409, r.text
    assert "imported from promptfoo" in r.json()["error"]["message"]
    assert "read-only" in r.json()["error"]["message"]
    r = await client.post(
        f"/preprod-evals/{run['id']}/items/{ids[0]}/error", json={"reason": "x"}, headers=h
    )
    assert r.status_code == 409, r.text
    assert "read-only" in r.json()["error"]["message"]
    after = (await client.get(f"/preprod-evals/{run['id']}", headers=h)).json()
    assert after == run


def _drop_item(body: dict[str, Any]) -> None:
    body["items"].pop()


def _duplicate_item(body: dict[str, Any]) -> None:
    body["items"][2] = {**body["items"][0]}


def _duplicate_trial(body: dict[str, Any]) -> None:
    body["items"][0]["trials"][1]["trial"] = 0


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def apply(body: dict[str, Any]) -> None:
        target: Any = body
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return apply


def _delete(key: str) -> Any:
    def apply(body: dict[str, Any]) -> None:
        del body[key]

    return apply


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        (_set(("items", 0, "item_id"), "dsi_nope"), 422, "items[0].item_id"),
        (_duplicate_item, 422, "items[2].item_id"),
        (_drop_item, 422, "items"),
        (_duplicate_trial, 422, "items[0].trials"),
        (_set(("items", 0, "trials", 0, "score"), 1.5), 422, "items[0].trials[0].score"),
        (_set(("items", 0, "trials", 0, "cost_usd"), -1), 422, "items[0].trials[0].cost_usd"),
        (_set(("items", 0, "trials", 0, "passed"), "yes"), 422, "items[0].trials[0].passed"),
        (_set(("items", 0, "trials", 0, "trial"), -1), 422, "items[0].trials[0].trial"),
        (_set(("items", 1, "trials"), []), 422, "items[1].trials"),
        (_set(("items",), []), 422, "items"),
        (_set(("source", "tool"), ""), 422, "source.tool"),
        (_set(("source", "sha256"), "not-hex"), 422, "source.sha256"),
        (_set(("source", "unknown"), {"cost_usd": 0}), 422, "source.unknown.cost_usd"),
        (_delete("source"), 422, "source"),
        (_set(("version_label",), ""), 422, "version_label"),
        (_set(("dataset_id",), "ds_nope"), 404, "dataset_id"),
        (_set(("dataset_version_id",), "dsv_nope"), 404, "dataset_version_id"),
        (_set(("gate",), {"min_pass_rate": 2}), 422, "gate.min_pass_rate"),
        (_set(("runner_mode",), "import"), 422, "runner_mode"),
    ],
)
async def test_a_bad_body_names_its_field_and_writes_nothing(
    client: httpx.AsyncClient, ingest_key: CreatedKey, change: Any, status: int, field: str
) -> None:
    dataset_id, ids = await _dataset(client, ingest_key)
    body = copy.deepcopy(_body(dataset_id, ids))
    change(body)
    r = await _post(client, ingest_key, body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["field"] == field, r.text
    runs = (await client.get("/preprod-evals", headers=auth(ingest_key))).json()["runs"]
    assert runs == []


async def test_another_projects_dataset_is_not_found(
    client: httpx.AsyncClient, ingest_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    dataset_id, ids = await _dataset(client, ingest_key)
    r = await _post(client, other_project_key, _body(dataset_id, ids))
    assert r.status_code == 404 and r.json()["error"]["field"] == "dataset_id", r.text


async def test_the_run_page_shows_an_imported_run(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, ids = await _dataset(client, ingest_key)
    run = (await _post(client, ingest_key, _body(dataset_id, ids))).json()
    await sign_in(client, ingest_key)
    page = await client.get(f"/ui/preprod-evals/{run['id']}")
    assert page.status_code == 200, page.text
    assert "promptfoo:gpt-4o-mini" in page.text
    assert "Imported from promptfoo" in page.text
    listing = await client.get("/ui/preprod-evals")
    assert listing.status_code == 200 and run["id"] in listing.text
