"""Creating a run: defaults, references, and every refusal naming its field."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.support.preprod import auth, create_run, golden_dataset

ITEMS = [{"input": "q1", "expected_output": "a1"}, {"input": "q2", "expected_output": "a2"}]


async def _post(client: httpx.AsyncClient, key: CreatedKey, body: dict[str, Any]) -> httpx.Response:
    return await client.post("/preprod-evals", json=body, headers=auth(key))


async def test_the_spec_curl_body_creates_a_run_defaulting_to_the_primary_score(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    r = await _post(
        client,
        ingest_key,
        {
            "name": "release-candidate",
            "dataset_id": dataset_id,
            "version_label": "abc123",
            "baseline": {"kind": "prod_window", "range": "7d"},
            "gate": {"max_regressions": 0, "min_pass_rate": 0.9},
        },
    )
    assert r.status_code == 201, r.text
    run = r.json()
    assert run["name"] == "release-candidate"
    assert run["versionLabel"] == "abc123"
    assert run["gate"] == {"max_regressions": 0, "min_pass_rate": 0.9}
    assert run["baseline"] == {"kind": "prod_window", "range": "7d"}
    judges = (await client.get("/judges", headers=auth(ingest_key))).json()["judges"]
    primary = [j for j in judges if j["isPrimary"]]
    assert len(primary) == 1 and primary[0]["name"] == "Primary Score"
    assert run["judgeDeploymentIds"] == [primary[0]["id"]]


async def test_a_dataset_without_a_golden_version_needs_a_pinned_version(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.post("/datasets", json={"name": "plain"}, headers=auth(ingest_key))
    dataset_id = r.json()["id"]
    r = await client.post(
        f"/datasets/{dataset_id}/versions", json={"items": ITEMS}, headers=auth(ingest_key)
    )
    version_id = r.json()["id"]
    r = await _post(client, ingest_key, {"dataset_id": dataset_id, "version_label": "v"})
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "dataset_id"
    assert "golden" in r.json()["error"]["message"]
    run = await create_run(client, ingest_key, dataset_id=dataset_id, dataset_version_id=version_id)
    assert run["datasetVersionId"] == version_id


@pytest.mark.parametrize(
    ("patch", "status", "field"),
    [
        ({"dataset_id": "ds_nope"}, 404, "dataset_id"),
        ({"dataset_version_id": "dsv_nope"}, 404, "dataset_version_id"),
        ({"version_label": ""}, 422, "version_label"),
        ({"runner_mode": "push"}, 422, "agent_connection_id"),
        ({"runner_mode": "push", "agent_connection_id": "conn_nope"}, 404, "agent_connection_id"),
        ({"runner_mode": "teleport"}, 422, "runner_mode"),
        ({"judge_deployment_ids": ["jdg_nope"]}, 404, "judge_deployment_ids[0]"),
        ({"judge_deployment_ids": []}, 422, "judge_deployment_ids"),
        (
            {"baseline": {"kind": "prod_window", "range": "a week"}},
            422,
            "baseline.range",
        ),
        ({"baseline": {"kind": "preprod_run", "value": "ppr_nope"}}, 404, "baseline.value"),
        ({"baseline": {"kind": "yesterday"}}, 422, "baseline.kind"),
        ({"baseline": {"kind": "prod_window"}}, 422, "baseline.range"),
        ({"gate": {"min_pass_rate": 1.5}}, 422, "gate.min_pass_rate"),
        ({"gate": {"max_regresions": 0}}, 422, "gate.max_regresions"),
        ({"gate": {"cost": {"max_avg_usd": -1}}}, 422, "gate.cost.max_avg_usd"),
        ({"colour": "red"}, 422, "colour"),
    ],
)
async def test_bad_run_bodies_are_refused_naming_the_field(
    client: httpx.AsyncClient,
    ingest_key: CreatedKey,
    patch: dict[str, Any],
    status: int,
    field: str,
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    body = {"dataset_id": dataset_id, "version_label": "v", **patch}
    r = await _post(client, ingest_key, body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["field"] == field, r.text
    assert (await client.get("/preprod-evals", headers=auth(ingest_key))).json()["runs"] == []


async def test_a_classifier_only_selection_is_refused(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    r = await client.post(
        "/judges",
        json={
            "name": "topic",
            "type": "classifier",
            "template": "Classify: {output}",
            "labels": ["billing", "shipping"],
            "endpoint": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m"},
        },
        headers=auth(admin_key),
    )
    assert r.status_code == 201, r.text
    r = await _post(
        client,
        admin_key,
        {"dataset_id": dataset_id, "version_label": "v", "judge_deployment_ids": [r.json()["id"]]},
    )
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "judge_deployment_ids"
    assert "classifier" in r.json()["error"]["message"]


async def test_a_baseline_run_over_another_golden_version_is_refused(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    first = await create_run(client, ingest_key, dataset_id=dataset_id)
    await client.post(
        f"/datasets/{dataset_id}/versions",
        json={"items": ITEMS[:1], "golden": True},
        headers=auth(ingest_key),
    )
    r = await _post(
        client,
        ingest_key,
        {
            "dataset_id": dataset_id,
            "version_label": "v",
            "baseline": {"kind": "preprod_run", "value": first["id"]},
        },
    )
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "baseline.value"


async def test_another_projects_run_is_not_found(
    client: httpx.AsyncClient, ingest_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    for suffix in ("", "/items", "/gate", "/comparison", "/metrics"):
        r = await client.get(f"/preprod-evals/{run['id']}{suffix}", headers=auth(other_project_key))
        assert r.status_code == 404, suffix
    r = await client.post(f"/preprod-evals/{run['id']}/cancel", headers=auth(other_project_key))
    assert r.status_code == 404
