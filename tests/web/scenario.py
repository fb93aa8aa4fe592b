"""Data for the page tests, made through the API as a user would: a golden dataset, push-mode
runs against simulated agents (priced, with a regression against the first, with errors),
runner-mode runs whose traces take different steps, a session with a span tree, and the insight
a regression raises. `plant_markup` adds what an attacker would store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from neens.demo.endpoints import PRICED_MODEL, Agent, serve
from neens.store.keys import CreatedKey
from tests.support.preprod import auth, connection, create_run, items_of, wait_for_run

MARKUP = '<script>alert("item")</script><img src=x onerror=alert(1)>'
"""Text that would run a script if a page printed it unescaped."""

ITEMS = [
    {"input": "Where is order 17?", "expected_output": "Order 17 shipped on 3 June."},
    {"input": "Can I return shoes?", "expected_output": "Yes, within 30 days."},
    {"input": "Cancel my plan, please.", "expected_output": "Your plan is cancelled."},
    {"input": "Do you ship to Norway?", "expected_output": None, "metadata": {"source": "t-1"}},
]
GOOD = {i["input"]: i["expected_output"] or "Yes, we ship to Norway." for i in ITEMS}
WORSE = {**GOOD, "Can I return shoes?": "Returns are never accepted."}
USAGE = {"prompt_tokens": 1000, "completion_tokens": 400, "total_tokens": 1400}


@dataclass(frozen=True)
class Scenario:
    dataset_id: str
    version_id: str
    first_version_id: str
    good_run: str
    """Push, priced, every answer right."""
    worse_run: str
    """Push, priced, one regression against `good_run` (its baseline), a cost gate."""
    flaky_run: str
    """Push, every second call failing: items in error."""
    runner_v1: str
    runner_v2: str
    """Runner mode, same answers, different steps: the trajectory diff has something to show."""
    session_id: str
    """A native session with a span tree, one LLM span priced and one not."""
    item_ids: list[str]


async def _post(client: httpx.AsyncClient, key: CreatedKey, path: str, body: Any) -> Any:
    r = await client.post(path, json=body, headers=auth(key))
    assert r.status_code in (200, 201), r.text
    return r.json()


async def _push(
    client: httpx.AsyncClient, key: CreatedKey, dataset_id: str, agent: Agent, **body: Any
) -> str:
    with serve(agent) as server:
        fields: dict[str, Any] = {"name": f"{body['version_label']} agent"}
        if agent.wire == "chat":
            fields |= {"requestFormat": "chat", "model": PRICED_MODEL}
        conn = await connection(client, key, server.url(agent.path), **fields)
        run = await create_run(
            client,
            key,
            dataset_id=dataset_id,
            runner_mode="push",
            agent_connection_id=conn,
            **body,
        )
        await wait_for_run(client, key, run["id"])
    return str(run["id"])


def _trace(
    run_id: str, item_id: str, prompt: str, output: str, tools: list[str], label: str
) -> dict[str, Any]:
    spans: list[dict[str, Any]] = [
        {
            "id": "root",
            "name": "agent.run",
            "kind": "agent",
            "input": prompt,
            "output": output,
            "start_time": "2026-11-30T08:00:00Z",
            "end_time": "2026-11-30T08:00:03Z",
            "attributes": {
                "neens.eval_run_id": run_id,
                "neens.dataset_item_id": item_id,
                "neens.version_label": label,
            },
        }
    ]
    for n, tool in enumerate(tools):
        spans.append(
            {
                "id": f"t{n}",
                "parent_id": "root",
                "name": tool,
                "kind": "tool",
                "input": f"{tool} for {item_id}",
                "output": f"{tool} result",
                "start_time": f"2026-11-30T08:00:0{n + 1}Z",
                "end_time": f"2026-11-30T08:00:0{n + 1}.500Z",
            }
        )
    return {"session": {"id": f"{label}-{item_id}", "agent_name": "support-agent"}, "spans": spans}


async def _runner(
    client: httpx.AsyncClient, key: CreatedKey, dataset_id: str, label: str, tools: list[str]
) -> str:
    run = await create_run(client, key, dataset_id=dataset_id, version_label=label)
    for item in await items_of(client, key, run["id"]):
        answer = GOOD[item["input"]]
        trace = _trace(run["id"], item["item_id"], item["input"], answer, tools, label)
        await _post(client, key, "/sessions", trace)
    await wait_for_run(client, key, run["id"])
    return str(run["id"])


SESSION = {
    "session": {"id": "support-session-1", "agent_name": "refund-agent"},
    "spans": [
        {
            "id": "root",
            "name": "agent.run",
            "kind": "agent",
            "input": "Refund my damaged kettle",
            "output": "Refund issued: 34.99 EUR back to the card ending 4242.",
            "start_time": "2026-11-30T08:00:00Z",
            "end_time": "2026-11-30T08:00:02.250Z",
        },
        {
            "id": "llm-1",
            "parent_id": "root",
            "name": "chat",
            "kind": "llm",
            "model": "gpt-4o",
            "input_tokens": 1000,
            "output_tokens": 200,
            "input": "Refund my damaged kettle",
            "output": "Calling lookup_order",
            "start_time": "2026-11-30T08:00:00.100Z",
            "end_time": "2026-11-30T08:00:01Z",
        },
        {
            "id": "tool-1",
            "parent_id": "llm-1",
            "name": "lookup_order",
            "kind": "tool",
            "input": '{"order": 17}',
            "output": '{"status": "delivered"}',
            "start_time": "2026-11-30T08:00:01.100Z",
            "end_time": "2026-11-30T08:00:01.400Z",
        },
        {
            "id": "llm-2",
            "parent_id": "root",
            "name": "chat",
            "kind": "llm",
            "model": "acme-internal-llm",
            "input_tokens": 300,
            "output_tokens": 50,
            "start_time": "2026-11-30T08:00:01.500Z",
            "end_time": "2026-11-30T08:00:02.200Z",
        },
    ],
}


async def seed(client: httpx.AsyncClient, admin: CreatedKey) -> Scenario:
    """The scenario, made with an admin key (connections are configuration)."""
    await _post(client, admin, "/datasets", {"name": "drafts"})  # no version at all
    ideas = await _post(client, admin, "/datasets", {"name": "ideas"})  # none golden
    await _post(client, admin, f"/datasets/{ideas['id']}/versions", {"items": ITEMS[3:]})
    dataset = await _post(client, admin, "/datasets", {"name": "support-golden"})
    dataset_id = dataset["id"]
    first = await _post(
        client, admin, f"/datasets/{dataset_id}/versions", {"items": ITEMS[:2], "golden": False}
    )
    version = await _post(
        client, admin, f"/datasets/{dataset_id}/versions", {"items": ITEMS, "golden": True}
    )
    good = await _push(
        client, admin, dataset_id, Agent(GOOD, wire="chat", usage=USAGE), version_label="v1.4.0"
    )
    worse = await _push(
        client,
        admin,
        dataset_id,
        Agent(WORSE, wire="chat", usage=USAGE, latency_s=0.01),
        version_label="v1.5.0-rc1",
        name="release candidate 1.5",
        baseline={"kind": "preprod_run", "value": good},
        gate={"max_regressions": 0, "min_pass_rate": 0.9, "cost": {"max_delta_pct": 10}},
    )
    flaky = await _push(
        client,
        admin,
        dataset_id,
        Agent(GOOD, fail_fraction=0.5),
        version_label="v1.5.0-flaky",
        baseline={"kind": "preprod_run", "value": good},
    )
    runner_v1 = await _runner(client, admin, dataset_id, "runner-v1", ["lookup_order", "refund"])
    runner_v2 = await _runner(client, admin, dataset_id, "runner-v2", ["refund"])
    await _post(client, admin, "/sessions", SESSION)
    items = await items_of(client, admin, good)
    return Scenario(
        dataset_id=dataset_id,
        version_id=version["id"],
        first_version_id=first["id"],
        good_run=good,
        worse_run=worse,
        flaky_run=flaky,
        runner_v1=runner_v1,
        runner_v2=runner_v2,
        session_id=SESSION["session"]["id"],  # type: ignore[index]
        item_ids=[i["item_id"] for i in items],
    )


@dataclass(frozen=True)
class Planted:
    """What `plant_markup` stored: markup in every text a page prints."""

    dataset_id: str
    version_id: str
    run_id: str
    session_id: str


async def plant_markup(client: httpx.AsyncClient, key: CreatedKey) -> Planted:
    """A dataset, a run and a session whose names, prompts and answers hold `MARKUP`."""
    dataset = await _post(client, key, "/datasets", {"name": f"golden {MARKUP}"})
    version = await _post(
        client,
        key,
        f"/datasets/{dataset['id']}/versions",
        {
            "items": [
                {
                    "input": f"prompt {MARKUP}",
                    "expected_output": f"expected {MARKUP}",
                    "metadata": {"note": MARKUP},
                }
            ],
            "golden": True,
        },
    )
    run = await create_run(
        client,
        key,
        dataset_id=dataset["id"],
        version_label=f"label {MARKUP}",
        name=f"run {MARKUP}",
    )
    [item] = await items_of(client, key, run["id"])
    trace = _trace(
        run["id"], item["item_id"], item["input"], f"answer {MARKUP}", ["lookup"], "planted"
    )
    trace["session"]["agent_name"] = f"agent {MARKUP}"
    await _post(client, key, "/sessions", trace)
    await wait_for_run(client, key, run["id"])
    return Planted(dataset["id"], version["id"], run["id"], trace["session"]["id"])
