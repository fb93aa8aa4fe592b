"""A sweep's pinned cost gate: every child run held to a cost change against the sweep's
baseline arm, on both databases, with real agent servers on loopback reporting token usage for
a priced model (and for one no price list knows). Each case would catch its violation: a delta
rule passed on an unpriced run, a baseline arm compared with itself, an arm that is not cheaper
enough still counted as passed."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from neens.demo.endpoints import PRICED_MODEL, UNPRICED_MODEL, Agent, serve
from neens.store.keys import CreatedKey
from tests.api.test_sweeps import ITEMS, RIGHT, arm, wait_for_sweep
from tests.support.preprod import auth, connection, golden_dataset

BASE_USAGE = {"prompt_tokens": 10_000, "completion_tokens": 2_000}
CHEAP_USAGE = {"prompt_tokens": 1_000, "completion_tokens": 200}  # 10% of the base: 90% cheaper
PRICEY_USAGE = {"prompt_tokens": 8_000, "completion_tokens": 1_600}  # 20% cheaper only


async def _gate(client: httpx.AsyncClient, key: CreatedKey, run_id: str) -> dict[str, Any]:
    r = await client.get(f"/preprod-evals/{run_id}/gate", headers=auth(key))
    assert r.status_code == 200, r.text
    gate: dict[str, Any] = r.json()
    return gate


async def test_every_child_run_is_held_to_its_cost_change_against_the_baseline_arm(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    arms = {
        "base": Agent(RIGHT, wire="chat", path="/base", model=PRICED_MODEL, usage=BASE_USAGE),
        "cheap": Agent(RIGHT, wire="chat", path="/cheap", model=PRICED_MODEL, usage=CHEAP_USAGE),
        "pricey": Agent(RIGHT, wire="chat", path="/pricey", model=PRICED_MODEL, usage=PRICEY_USAGE),
        "unpriced": Agent(
            RIGHT, wire="chat", path="/unpriced", model=UNPRICED_MODEL, usage=BASE_USAGE
        ),
    }
    gate = {"min_pass_rate": 0.9, "cost": {"max_delta_pct": -50}}
    with serve(*arms.values()) as agents:
        tag = uuid.uuid4().hex[:8]
        dataset_id, _ = await golden_dataset(client, admin_key, ITEMS, name=f"golden-{tag}")
        body_arms = []
        for label in arms:
            conn = await connection(
                client, admin_key, agents.url(f"/{label}"), name=f"{label}-{tag}",
                requestFormat="chat",
            )  # fmt: skip
            body_arms.append({"label": label, "agentConnectionId": conn})
        r = await client.post(
            "/model-sweeps",
            json={"name": "cost", "versionLabel": "v1", "datasetId": dataset_id, "passK": 2,
                  "gate": gate, "arms": body_arms},
            headers=auth(admin_key),
        )  # fmt: skip
        assert r.status_code == 201, r.text
        done = await wait_for_sweep(client, admin_key, r.json()["id"])
    assert done["status"] in ("completed", "completed_with_failures"), done
    assert done["gate"] == gate

    # The baseline arm is never compared with itself: its delta rule is skipped, saying why.
    for run_id in arm(done, "base")["runIds"]:
        result = await _gate(client, admin_key, run_id)
        (rule,) = result["costRules"]
        assert rule["status"] == "skipped", rule
        assert "baseline arm 'base'" in rule["reason"], rule
        assert result["passed"] is True
    assert arm(done, "base")["passed"] is True

    # 90% cheaper than the base (one model, a tenth of the tokens): the rule passes, with the
    # change it measured.
    for run_id in arm(done, "cheap")["runIds"]:
        (rule,) = (await _gate(client, admin_key, run_id))["costRules"]
        assert rule["status"] == "pass", rule
        assert rule["observed"] == pytest.approx(-90.0)
    assert arm(done, "cheap")["passed"] is True

    # 20% cheaper only: every run fails the gate, so the arm did not pass pass^k.
    for run_id in arm(done, "pricey")["runIds"]:
        result = await _gate(client, admin_key, run_id)
        (rule,) = result["costRules"]
        assert rule["status"] == "fail", rule
        assert result["passed"] is False
        assert any("at least 50% cheaper" in reason for reason in result["reasons"]), result
    pricey = arm(done, "pricey")
    assert pricey["passed"] is False and pricey["greenRuns"] == 0

    # Unpriced is never free: the rule is skipped (not passed) and says the answers had no price.
    for run_id in arm(done, "unpriced")["runIds"]:
        (rule,) = (await _gate(client, admin_key, run_id))["costRules"]
        assert rule["status"] == "skipped", rule
        assert "was priced" in rule["reason"], rule

    # The decision reads the same evidence: the pricey arm is out of the ranking.
    r = await client.get(f"/model-sweeps/{done['id']}/comparison", headers=auth(admin_key))
    assert r.status_code == 200, r.text
    by_label = {row["label"]: row for row in r.json()["arms"]}
    assert by_label["pricey"]["passed"] is False
    assert r.json()["verdict"]["recommendedArmId"] == arm(done, "cheap")["id"]


async def test_a_delta_rule_waits_for_the_baseline_arm_instead_of_passing_early(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    """While the baseline arm is still running, another arm's finished run has nothing honest to
    compare with: its delta rule is skipped with that reason, and becomes a verdict once the
    baseline arm is done."""
    slow_base = Agent(
        RIGHT, wire="chat", path="/base", model=PRICED_MODEL, usage=BASE_USAGE, latency_s=1.0
    )
    fast = Agent(RIGHT, wire="chat", path="/fast", model=PRICED_MODEL, usage=PRICEY_USAGE)
    with serve(slow_base, fast) as agents:
        tag = uuid.uuid4().hex[:8]
        dataset_id, _ = await golden_dataset(client, admin_key, ITEMS, name=f"golden-{tag}")
        base = await connection(
            client, admin_key, agents.url("/base"), name=f"b-{tag}", requestFormat="chat"
        )
        other = await connection(
            client, admin_key, agents.url("/fast"), name=f"f-{tag}", requestFormat="chat"
        )
        r = await client.post(
            "/model-sweeps",
            json={"name": "wait", "versionLabel": "v1", "datasetId": dataset_id, "passK": 1,
                  "gate": {"cost": {"max_delta_usd": 0}},
                  "arms": [{"label": "base", "agentConnectionId": base},
                           {"label": "fast", "agentConnectionId": other}]},
            headers=auth(admin_key),
        )  # fmt: skip
        assert r.status_code == 201, r.text
        sweep = r.json()
        fast_run = arm(sweep, "fast")["runIds"][0]
        early = None
        for _ in range(400):
            run = (await client.get(f"/preprod-evals/{fast_run}", headers=auth(admin_key))).json()
            base_run = arm(
                (await client.get(f"/model-sweeps/{sweep['id']}", headers=auth(admin_key))).json(),
                "base",
            )
            if run["status"] == "completed" and base_run["status"] != "completed":
                early = await _gate(client, admin_key, fast_run)
                break
            if base_run["status"] == "completed":
                break
            await asyncio.sleep(0.02)
        done = await wait_for_sweep(client, admin_key, sweep["id"])
    assert early is not None, "the slow baseline arm should still run when the fast arm is done"
    (rule,) = early["costRules"]
    assert rule["status"] == "skipped", rule
    assert "baseline arm 'base' has not finished" in rule["reason"], rule
    (rule,) = (await _gate(client, admin_key, fast_run))["costRules"]
    assert rule["status"] == "pass", rule  # 20% cheaper: within "no increase"
    assert arm(done, "fast")["passed"] is True
