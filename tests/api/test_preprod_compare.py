"""Compare Versions and the trajectory diff over runner-mode runs."""

from __future__ import annotations

from typing import Any

import httpx

from neens.store.keys import CreatedKey
from tests.support.preprod import auth, create_run, golden_dataset, items_of, wait_for_run

ITEMS = [
    {"input": "Where is order 17?", "expected_output": "Order 17 shipped on 3 June."},
    {"input": "Can I return shoes?", "expected_output": "Yes, within 30 days."},
]


def session(
    session_id: str, run_id: str, item_id: str, output: str, steps: list[tuple[str, str]]
) -> dict[str, Any]:
    spans: list[dict[str, Any]] = [
        {
            "id": "root",
            "name": "agent.run",
            "kind": "agent",
            "output": output,
            "start_time": "2026-11-30T08:00:00Z",
            "attributes": {"neens.eval_run_id": run_id, "neens.dataset_item_id": item_id},
        }
    ]
    for n, (kind, name) in enumerate(steps):
        spans.append(
            {
                "id": f"s{n}",
                "parent_id": "root",
                "name": name,
                "kind": kind,
                "input": f"{name} input",
                "output": f"{name} output",
                "start_time": f"2026-11-30T08:00:0{n + 1}Z",
            }
        )
    return {"session": {"id": session_id, "agent_name": "refund-agent"}, "spans": spans}


async def run_with(
    client: httpx.AsyncClient,
    key: CreatedKey,
    dataset_id: str,
    label: str,
    answers: list[str],
    steps: list[tuple[str, str]],
) -> str:
    run = await create_run(client, key, dataset_id=dataset_id, version_label=label)
    for item, answer in zip(await items_of(client, key, run["id"]), answers, strict=True):
        body = session(f"{label}-{item['item_id']}", run["id"], item["item_id"], answer, steps)
        assert (await client.post("/sessions", json=body, headers=auth(key))).status_code == 200
    await wait_for_run(client, key, run["id"])
    return str(run["id"])


async def test_versions_line_up_prompt_by_prompt_against_the_chosen_baseline(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    good = [i["expected_output"] for i in ITEMS]
    v1 = await run_with(client, ingest_key, dataset_id, "v1", good, [("tool", "lookup_order")])
    v2 = await run_with(client, ingest_key, dataset_id, "v2", ["wrong", good[1]], [])
    r = await client.get(
        "/preprod-compare", params={"runs": f"{v1},{v2}", "baseline": v1}, headers=auth(ingest_key)
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["baselineRunId"] == v1
    assert [run["versionLabel"] for run in body["runs"]] == ["v1", "v2"]
    assert body["runs"][0]["passRate"] == 1.0
    assert body["runs"][1]["passRate"] == 0.5
    assert body["runs"][1]["regressionsVsBaseline"] == 1
    first = body["rows"][0]
    assert first["input"] == ITEMS[0]["input"]
    assert first["expectedOutput"] == ITEMS[0]["expected_output"]
    assert [c["output"] for c in first["cells"]] == [good[0], "wrong"]
    assert [c["regressedVsBaseline"] for c in first["cells"]] == [False, True]


async def test_runs_over_different_golden_versions_cannot_be_compared(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    first = await create_run(client, ingest_key, dataset_id=dataset_id)
    await client.post(
        f"/datasets/{dataset_id}/versions",
        json={"items": ITEMS, "golden": True},
        headers=auth(ingest_key),
    )
    second = await create_run(client, ingest_key, dataset_id=dataset_id)
    r = await client.get(
        "/preprod-compare",
        params={"runs": f"{first['id']},{second['id']}"},
        headers=auth(ingest_key),
    )
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "runs"
    r = await client.get(
        "/preprod-compare",
        params={"runs": first["id"], "baseline": "ppr_other"},
        headers=auth(ingest_key),
    )
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "baseline"


async def test_the_trajectory_diff_shows_the_step_the_candidate_stopped_taking(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS[:1])
    good = [ITEMS[0]["expected_output"]]
    v2 = await run_with(
        client,
        ingest_key,
        dataset_id,
        "v2",
        good,
        [("llm", "plan"), ("tool", "lookup_order"), ("llm", "answer")],
    )
    v3 = await run_with(
        client,
        ingest_key,
        dataset_id,
        "v3",
        good,
        [("llm", "plan"), ("llm", "answer"), ("tool", "send_email")],
    )
    item_id = (await items_of(client, ingest_key, v3))[0]["item_id"]
    r = await client.get(
        "/preprod-compare/trajectory",
        params={"run": v3, "baseline": v2, "item": item_id},
        headers=auth(ingest_key),
    )
    assert r.status_code == 200, r.text
    steps = r.json()["steps"]
    assert [(s["status"], (s["baseline"] or s["candidate"])["name"]) for s in steps] == [
        ("same", "plan"),
        ("removed", "lookup_order"),
        ("same", "answer"),
        ("added", "send_email"),
    ]


async def test_the_trajectory_of_an_unknown_item_is_404(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS[:1])
    run = await create_run(client, ingest_key, dataset_id=dataset_id)
    r = await client.get(
        "/preprod-compare/trajectory",
        params={"run": run["id"], "baseline": run["id"], "item": "dsi_nope"},
        headers=auth(ingest_key),
    )
    assert r.status_code == 404
    assert r.json()["error"]["field"] == "item"
