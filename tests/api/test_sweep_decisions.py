"""`GET /model-sweeps/{id}/comparison` over real sweeps: real agent servers per arm, both
databases. The numbers themselves are pinned in tests/domain/test_decision.py; here, that the
evidence a sweep stored reaches the decision whole, and the honesty signals on the wire."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from sqlalchemy import text

from neens.demo.endpoints import PRICED_MODEL, UNPRICED_MODEL, Agent, refused_url, serve
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.api.test_sweeps import ITEMS, RIGHT, run_counter, wait_for_sweep
from tests.support.preprod import auth, connection, golden_dataset

AGENTS = {"question 0": "refund-agent", "question 1": "refund-agent", "question 2": "escalation"}
"""The agent each prompt's answer says it came from; question 3's names none."""
USAGE = {"prompt_tokens": 1000, "completion_tokens": 200}


async def sweep_of(
    client: httpx.AsyncClient,
    key: CreatedKey,
    arms: list[tuple[str, str, dict[str, Any]]],
    **body: Any,
) -> dict[str, Any]:
    """A finished sweep; `arms` are (label, url, connection fields)."""
    tag = uuid.uuid4().hex[:8]
    dataset_id, _ = await golden_dataset(client, key, ITEMS, name=f"golden-{tag}")
    conns = [
        await connection(client, key, url, name=f"{label}-{tag}", **fields)
        for label, url, fields in arms
    ]
    r = await client.post(
        "/model-sweeps",
        json={
            "versionLabel": "v1",
            "datasetId": dataset_id,
            "arms": [
                {"label": label, "agentConnectionId": conn}
                for (label, _, _), conn in zip(arms, conns, strict=True)
            ],
            **body,
        },
        headers=auth(key),
    )
    assert r.status_code == 201, r.text
    return await wait_for_sweep(client, key, r.json()["id"])


async def comparison(
    client: httpx.AsyncClient, key: CreatedKey, sweep_id: str, **query: Any
) -> dict[str, Any]:
    r = await client.get(f"/model-sweeps/{sweep_id}/comparison", params=query, headers=auth(key))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def by_label(block: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {arm["label"]: arm for arm in block["arms"]}


def chat(**extra: Any) -> dict[str, Any]:
    return {"requestFormat": "chat", **extra}


async def test_a_cheaper_arm_that_clears_the_pinned_bar_is_recommended_against_the_incumbent(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    big = {"prompt_tokens": 20_000, "completion_tokens": 4_000}
    with serve(
        Agent(RIGHT, wire="chat", path="/big", model="gpt-4o", usage=big, agent_name=AGENTS.get),
        Agent(RIGHT, wire="chat", path="/mini", model=PRICED_MODEL, usage=USAGE,
              agent_name=AGENTS.get),
    ) as agents:  # fmt: skip
        sweep = await sweep_of(
            client,
            admin_key,
            [
                ("incumbent", agents.url("/big"), chat(model="gpt-4o")),
                ("mini", agents.url("/mini"), chat(model=PRICED_MODEL)),
            ],
            gate={"min_pass_rate": 0.5},
        )
    assert sweep["status"] == "completed"
    c = await comparison(client, admin_key, sweep["id"])
    assert c["comparable"] is True and c["voidReason"] is None
    assert c["bar"] == {"value": 0.5, "source": "gate"}
    incumbent, mini = by_label(c)["incumbent"], by_label(c)["mini"]
    assert c["baselineArmId"] == incumbent["armId"] and incumbent["isBaseline"]
    for arm in (incumbent, mini):
        assert (arm["n"], arm["passedItems"], arm["flakyItems"], arm["rate"]) == (4, 4, 0, 1.0)
        assert (arm["cases"], arm["pricedCases"]) == (12, 12)
        assert arm["passed"] is True and arm["excluded"] is None
    assert mini["costPerCaseUsd"] < incumbent["costPerCaseUsd"]
    assert c["verdict"]["outcome"] == "recommended"
    assert c["verdict"]["recommendedLabel"] == "mini"
    assert c["verdict"]["savingsUsd"] > 0 and c["verdict"]["sentence"]
    # The frontier places each arm at the numbers the leaderboard shows, cheapest first; the
    # incumbent is as good and dearer, so only mini is on it, highlighted as the verdict's arm.
    frontier = c["frontier"]
    assert [(p["label"], p["costPerCaseUsd"], p["rate"]) for p in frontier["points"]] == [
        ("mini", mini["costPerCaseUsd"], 1.0), ("incumbent", incumbent["costPerCaseUsd"], 1.0),
    ]  # fmt: skip
    assert [p["onFrontier"] for p in frontier["points"]] == [True, False]
    assert frontier["highlightedArmId"] == mini["armId"]
    assert frontier["unpricedArmIds"] == [] and frontier["noDataArmIds"] == []
    # The bar is the query's when given, and the response says so.
    q = await comparison(client, admin_key, sweep["id"], bar=0.95)
    assert q["bar"] == {"value": 0.95, "source": "query"}
    r = await client.get(f"/model-sweeps/{sweep['id']}/comparison?bar=-0", headers=auth(admin_key))
    assert '"bar":{"value":0.0,"source":"query"}' in r.text, "a bar of -0 is 0, not -0.0"
    # The baseline is the first arm unless overridden: never the best or the cheapest.
    flipped = await comparison(client, admin_key, sweep["id"], baselineArm=mini["armId"])
    assert flipped["baselineArmId"] == mini["armId"]
    assert by_label(flipped)["incumbent"]["costDeltaUsd"] > 0
    # Per agent: items grouped by the name the answers gave; the unnamed one is Unattributed.
    agents_ = {a["label"]: a for a in c["agents"]}
    assert list(agents_) == ["escalation", "refund-agent", "Unattributed"]
    assert (agents_["refund-agent"]["items"], agents_["escalation"]["items"]) == (2, 1)
    assert agents_["Unattributed"]["agentName"] is None
    assert agents_["Unattributed"]["unnamedItems"] == 1


async def test_a_flaky_item_is_counted_and_never_a_pass_and_regressions_are_per_item(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    flaky = Agent(run_counter(1, {"question 0"}), path="/flaky")
    broken = Agent(
        lambda p: "wrong" if p in ("question 1", "question 2") else RIGHT[p], path="/broken"
    )
    with serve(Agent(RIGHT, path="/right"), flaky, broken) as agents:
        sweep = await sweep_of(
            client,
            admin_key,
            [
                ("right", agents.url("/right"), {}),
                ("flaky", agents.url("/flaky"), {}),
                ("broken", agents.url("/broken"), {}),
            ],
        )
    c = await comparison(client, admin_key, sweep["id"])
    arms = by_label(c)
    assert c["bar"]["source"] == "default"
    assert (arms["flaky"]["flakyItems"], arms["flaky"]["passedItems"]) == (1, 3)
    assert arms["flaky"]["rate"] == 0.75, "the flaky item is in n as a failure"
    assert arms["flaky"]["regressions"] == 1
    assert (arms["broken"]["regressions"], arms["broken"]["rate"]) == (2, 0.5)
    assert arms["right"]["regressions"] == 0 and arms["right"]["mcnemar"] is None
    assert arms["broken"]["mcnemar"]["b"] == 2 and arms["broken"]["mcnemar"]["c"] == 0
    # Unpriced answers (no usage reported): cost per case is unknown, never 0.
    assert all(a["costPerCaseUsd"] is None and a["pricedCases"] == 0 for a in arms.values())


async def test_a_dead_arm_has_no_data_and_is_excluded_as_failed(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    with serve(Agent(RIGHT, path="/right")) as agents:
        sweep = await sweep_of(
            client, admin_key, [("right", agents.url("/right"), {}), ("dead", refused_url(), {})]
        )
    assert sweep["status"] == "completed_with_failures"
    dead = by_label(await comparison(client, admin_key, sweep["id"]))["dead"]
    assert (dead["n"], dead["rate"], dead["wilsonLow"]) == (0, None, None), "no data is not 0%"
    assert dead["excluded"] == "failed" and dead["rank"] is None


async def test_an_unpriced_arm_shows_null_cost_and_a_partly_priced_one_counts_its_priced_cases(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    some = {"question 0", "question 1"}
    partly = Agent(RIGHT, wire="chat", path="/partly", model=PRICED_MODEL, usage=USAGE)
    partly_usage = partly.usage
    with serve(
        Agent(RIGHT, wire="chat", path="/unpriced", model=UNPRICED_MODEL, usage=USAGE), partly
    ) as agents:
        # The partly priced arm reports usage only for some prompts.
        partly.usage = None
        original = partly.respond

        def respond(call: Any) -> Any:
            prompt = call.body["messages"][-1]["content"]
            partly.usage = partly_usage if prompt in some else None
            return original(call)

        partly.respond = respond  # type: ignore[method-assign]
        sweep = await sweep_of(
            client,
            admin_key,
            [
                ("self-host", agents.url("/unpriced"), chat(model=UNPRICED_MODEL)),
                ("partly", agents.url("/partly"), chat(model=PRICED_MODEL)),
            ],
        )
    arms = by_label(await comparison(client, admin_key, sweep["id"]))
    assert arms["self-host"]["costPerCaseUsd"] is None
    assert (arms["self-host"]["pricedCases"], arms["self-host"]["cases"]) == (0, 12)
    assert (arms["partly"]["pricedCases"], arms["partly"]["cases"]) == (6, 12)
    assert arms["partly"]["costPerCaseUsd"] > 0


async def test_a_void_sweep_compares_nothing_across_arms_but_keeps_each_arms_numbers(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    with serve(Agent(RIGHT, path="/a"), Agent(RIGHT, path="/b")) as agents:
        sweep = await sweep_of(
            client, admin_key, [("a", agents.url("/a"), {}), ("b", agents.url("/b"), {})]
        )
    run_id = sweep["arms"][1]["runIds"][0]
    async with db.write() as s:
        await s.execute(
            text("UPDATE preprod_runs SET version_label = :v WHERE id = :id"),
            {"v": "something else", "id": run_id},
        )
    c = await comparison(client, admin_key, sweep["id"])
    assert c["status"] == "void" and c["comparable"] is False
    assert c["verdict"]["outcome"] == "unavailable" and c["verdict"]["recommendedArmId"] is None
    assert c["leaderboard"] == [] and c["winnerArmId"] is None
    assert "version label" in c["voidReason"]
    assert all(a["rank"] is None and a["regressions"] is None for a in c["arms"])
    assert [a["rate"] for a in c["arms"]] == [1.0, 1.0], "each arm's own numbers stay"
    assert all(agent["leaderboard"] == [] for agent in c["agents"])
    assert c["frontier"] is None, "no frontier is drawn for a void sweep"


async def test_a_bad_bar_or_baseline_is_refused_naming_it(
    client: httpx.AsyncClient, admin_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    sweep = await sweep_of(
        client, admin_key, [("a", refused_url("/a"), {}), ("b", refused_url("/b"), {})]
    )
    for query, field in (({"bar": 2}, "bar"), ({"baselineArm": "msa-nope"}, "baselineArm")):
        r = await client.get(
            f"/model-sweeps/{sweep['id']}/comparison", params=query, headers=auth(admin_key)
        )
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == field
    r = await client.get(f"/model-sweeps/{sweep['id']}/comparison", headers=auth(other_project_key))
    assert r.status_code == 404
    assert json.loads(r.text)["error"]["field"] == "sweep_id"


async def test_the_drill_down_lists_where_an_arm_breaks_grouped_by_one_named_signal(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    broken = Agent(
        lambda p: "wrong" if p in ("question 1", "question 2") else RIGHT[p], path="/broken"
    )
    with serve(Agent(RIGHT, path="/right"), broken) as agents:
        sweep = await sweep_of(
            client,
            admin_key,
            [("right", agents.url("/right"), {}), ("broken", agents.url("/broken"), {})],
        )
    arm = {a["label"]: a for a in sweep["arms"]}["broken"]
    url = f"/model-sweeps/{sweep['id']}/arms/{arm['id']}/regressions"
    r = await client.get(url, params={"limit": 1}, headers=auth(admin_key))
    assert r.status_code == 200, r.text
    found = r.json()
    assert (found["totalRegressions"], found["truncated"], found["newPasses"]) == (2, True, 0)
    assert found["signal"] == {"kind": "none", "name": None}, "no classifier labelled them"
    assert (found["failureModes"], found["unclassified"]) == ([], 2), "counted, never dropped"
    [item] = found["items"]
    assert item["input"] == "question 1" and item["expectedOutput"] == "answer 1"
    assert item["baseline"] == {"passedRuns": 3, "scoredRuns": 3}
    assert (item["candidate"]["passedRuns"], item["candidate"]["scoredRuns"]) == (0, 3)
    assert item["candidate"]["answer"] == "wrong" and item["candidate"]["reason"]
    assert len(item["candidate"]["sessionIds"]) == 3
    # The same count as the comparison, by the same rule.
    c = await comparison(client, admin_key, sweep["id"])
    assert by_label(c)["broken"]["regressions"] == found["totalRegressions"]
    # The baseline arm has no regressions against itself; an unknown arm is not found.
    right = {a["label"]: a for a in sweep["arms"]}["right"]
    r = await client.get(
        f"/model-sweeps/{sweep['id']}/arms/{right['id']}/regressions", headers=auth(admin_key)
    )
    assert r.json()["totalRegressions"] == 0
    r = await client.get(
        f"/model-sweeps/{sweep['id']}/arms/msa-nope/regressions", headers=auth(admin_key)
    )
    assert r.status_code == 404 and r.json()["error"]["field"] == "arm_id"
    # Once a person confirms a failure mode on a regressed answer, that is the signal, linked to
    # the taxonomy; the other regressed item stays counted as unclassified.
    r = await client.post(
        "/failure-modes", json={"name": "made-up answer"}, headers=auth(admin_key)
    )
    assert r.status_code == 201, r.text
    mode = r.json()["id"]
    session = item["candidate"]["sessionIds"][0]
    r = await client.post(
        f"/sessions/{session}/failure-modes",
        json={"failureModeId": mode, "confirmed": True},
        headers=auth(admin_key),
    )
    assert r.status_code in (200, 201), r.text
    found = (await client.get(url, headers=auth(admin_key))).json()
    assert found["signal"] == {"kind": "annotation", "name": None}
    assert found["failureModes"] == [{"label": "made-up answer", "count": 1, "failureModeId": mode}]
    assert found["unclassified"] == 1
    assert [i["failureMode"] for i in found["items"]] == ["made-up answer", None]
    # A void sweep makes no cross-arm claim, a drill-down included.
    async with db.write() as s:
        await s.execute(
            text("UPDATE preprod_runs SET version_label = 'other' WHERE id = :id"),
            {"id": arm["runIds"][0]},
        )
    r = await client.get(url, headers=auth(admin_key))
    assert r.status_code == 409 and "void" in r.json()["error"]["message"]
