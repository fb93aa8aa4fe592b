"""Model sweeps end to end in one process: real agent servers on loopback per arm, the real
worker, both databases. Each honesty rule of a sweep has a case here that would catch its
violation: pass^k per arm, a dead arm failing alone, void on diverged or vanished child runs."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from neens.demo.endpoints import PRICED_MODEL, UNPRICED_MODEL, Agent, refused_url, serve, steady
from neens.settings import Settings
from neens.store import migrate
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.support.live import app_client
from tests.support.preprod import auth, connection, golden_dataset, items_of

ITEMS = [{"input": f"question {n}", "expected_output": f"answer {n}"} for n in range(4)]
RIGHT = {item["input"]: item["expected_output"] for item in ITEMS}
TERMINAL = {"completed", "completed_with_failures", "failed", "cancelled", "void"}


def run_counter(wrong_on_run: int, wrong: set[str]) -> Any:
    """Answers right, except `wrong` prompts on the arm's run `wrong_on_run` (0-based): an arm's
    runs are sequential, so the call index tells the run."""
    calls = {"n": 0}

    def answer(prompt: str) -> str:
        run = calls["n"] // len(ITEMS)
        calls["n"] += 1
        if run == wrong_on_run and prompt in wrong:
            return "I do not know"
        return RIGHT[prompt]

    return answer


async def create_sweep(client: httpx.AsyncClient, key: CreatedKey, **body: Any) -> dict[str, Any]:
    body.setdefault("versionLabel", "2026-07-candidate")
    body.setdefault("name", "Q3 model selection")
    r = await client.post("/model-sweeps", json=body, headers=auth(key))
    assert r.status_code == 201, r.text
    sweep: dict[str, Any] = r.json()
    return sweep


async def wait_for_sweep(
    client: httpx.AsyncClient, key: CreatedKey, sweep_id: str, *, timeout_s: float = 60.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        r = await client.get(f"/model-sweeps/{sweep_id}", headers=auth(key))
        assert r.status_code == 200, r.text
        sweep: dict[str, Any] = r.json()
        if sweep["status"] in TERMINAL:
            return sweep
        if time.monotonic() > deadline:
            raise AssertionError(f"sweep {sweep_id} still {sweep['status']}: {sweep}")
        await asyncio.sleep(0.05)


def arm(sweep: dict[str, Any], label: str) -> dict[str, Any]:
    found: dict[str, Any] = next(a for a in sweep["arms"] if a["label"] == label)
    return found


async def two_arm_sweep(
    client: httpx.AsyncClient,
    key: CreatedKey,
    first: str,
    second: str,
    *,
    starter: CreatedKey | None = None,
    **body: Any,
) -> dict[str, Any]:
    """Dataset and connections made with `key` (an admin key), the sweep with `starter`."""
    tag = uuid.uuid4().hex[:8]
    dataset_id, _ = await golden_dataset(client, key, ITEMS, name=f"golden-{tag}")
    conns = [
        await connection(client, key, first, name=f"first-{tag}", model="claude-sonnet-4-5"),
        await connection(client, key, second, name=f"second-{tag}", model="gpt-4o-mini"),
    ]
    return await create_sweep(
        client,
        starter or key,
        datasetId=dataset_id,
        arms=[
            {"label": "sonnet", "agentConnectionId": conns[0]},
            {"label": "mini", "agentConnectionId": conns[1]},
        ],
        **body,
    )


async def test_two_steady_arms_each_pass_k_runs_under_the_pinned_conditions(
    client: httpx.AsyncClient, admin_key: CreatedKey, settings: Settings
) -> None:
    with serve(steady(RIGHT, path="/a"), steady(RIGHT, path="/b")) as agents:
        sweep = await two_arm_sweep(client, admin_key, agents.url("/a"), agents.url("/b"))
        assert sweep["id"].startswith("msw-")
        assert sweep["status"] == "running"
        assert sweep["passK"] == 3 and sweep["fingerprint"].startswith("sha256:")
        assert [a["id"][:4] for a in sweep["arms"]] == ["msa-", "msa-"]
        assert all(len(a["runIds"]) == 1 for a in sweep["arms"]), "one run per arm at a time"
        done = await wait_for_sweep(client, admin_key, sweep["id"])
    assert done["status"] == "completed"
    assert done["voidReason"] is None and done["divergedArms"] == []
    for label, model in (("sonnet", "claude-sonnet-4-5"), ("mini", "gpt-4o-mini")):
        a = arm(done, label)
        assert a["status"] == "completed" and a["passed"] is True and a["greenRuns"] == 3
        assert a["model"] == model
        assert a["progress"] == {
            "runsFinished": 3, "runs": 3, "itemsDone": 12, "itemsTotal": 12,
        }  # fmt: skip
        assert len(set(a["runIds"])) == 3
    # Every child run carries the sweep's conditions, and its arm's share of the concurrency.
    shares = set()
    for a in done["arms"]:
        for run_id in a["runIds"]:
            run = (await client.get(f"/preprod-evals/{run_id}", headers=auth(admin_key))).json()
            assert run["versionLabel"] == "2026-07-candidate"
            assert run["datasetVersionId"] == done["datasetVersionId"]
            assert run["judgeDeploymentIds"] == done["judgeDeploymentIds"]
            assert run["agentConnectionId"] == a["agentConnectionId"]
            assert run["status"] == "completed"
        shares.add(a["agentConnectionId"])
    assert len(shares) == 2
    assert len(agents.calls) == 2 * 3 * len(ITEMS), "each (arm, run, item) called once"


async def test_an_arm_green_on_two_runs_of_three_has_not_passed(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    flaky = Agent(run_counter(1, {"question 0"}), path="/flaky")
    with serve(steady(RIGHT, path="/a"), flaky) as agents:
        sweep = await two_arm_sweep(
            client, admin_key, agents.url("/a"), agents.url("/flaky"),
            gate={"min_pass_rate": 1.0},
        )  # fmt: skip
        done = await wait_for_sweep(client, admin_key, sweep["id"])
    assert done["status"] == "completed", "every arm ran to the end"
    steady_arm, flaky_arm = arm(done, "sonnet"), arm(done, "mini")
    assert (steady_arm["passed"], steady_arm["greenRuns"]) == (True, 3)
    assert (flaky_arm["passed"], flaky_arm["greenRuns"]) == (False, 2)
    assert flaky_arm["status"] == "completed"


async def test_a_dead_endpoint_fails_its_own_arm_and_the_others_run_to_the_end(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    with serve(steady(RIGHT, path="/a")) as agents:
        sweep = await two_arm_sweep(client, admin_key, agents.url("/a"), refused_url())
        done = await wait_for_sweep(client, admin_key, sweep["id"])
    assert done["status"] == "completed_with_failures"
    alive, dead = arm(done, "sonnet"), arm(done, "mini")
    assert alive["status"] == "completed" and alive["passed"] is True
    assert dead["status"] == "failed" and dead["passed"] is None
    assert "failed" in dead["error"] and "every item failed" in dead["error"]
    assert len(dead["runIds"]) == 1, "a failed arm launches no further runs"


async def test_every_arm_dead_fails_the_sweep_with_each_reason(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    sweep = await two_arm_sweep(client, admin_key, refused_url("/x"), refused_url("/y"))
    done = await wait_for_sweep(client, admin_key, sweep["id"])
    assert done["status"] == "failed"
    assert done["reason"].startswith("every arm failed: sonnet: ")
    assert "mini: " in done["reason"]


async def test_each_arm_carries_its_connections_provider_copied_at_create(
    settings: Settings, db: Database, database_url: str, admin_key: CreatedKey
) -> None:
    """`modelProvider` is the connection's provider as it was when the sweep was created: a
    later change to the connection does not reach the arm, and an arm that recorded none (made
    before the column existed) answers null until the migration fills it from its first run."""
    async with app_client(settings, db) as client:
        tag = uuid.uuid4().hex[:8]
        dataset_id, _ = await golden_dataset(client, admin_key, ITEMS, name=f"golden-{tag}")
        conns = [
            await connection(client, admin_key, refused_url("/a"), name=f"a-{tag}",
                             model="gpt-4o", provider="openai"),
            await connection(client, admin_key, refused_url("/b"), name=f"b-{tag}",
                             model="sim-frontier-mini", provider="simulated"),
            await connection(client, admin_key, refused_url("/c"), name=f"c-{tag}"),
        ]  # fmt: skip
        sweep = await create_sweep(
            client,
            admin_key,
            datasetId=dataset_id,
            arms=[{"label": f"arm {n}", "agentConnectionId": c} for n, c in enumerate(conns)],
        )
        assert [a["modelProvider"] for a in sweep["arms"]] == ["openai", "simulated", "agent_http"]
        done = await wait_for_sweep(client, admin_key, sweep["id"])
        r = await client.patch(
            f"/agent-connections/{conns[0]}", json={"provider": "azure"}, headers=auth(admin_key)
        )
        assert r.status_code == 200, r.text
        done = (await client.get(f"/model-sweeps/{sweep['id']}", headers=auth(admin_key))).json()
        listed = (await client.get("/model-sweeps", headers=auth(admin_key))).json()["sweeps"]
        for shown in (done, next(s for s in listed if s["id"] == sweep["id"])):
            assert [a["modelProvider"] for a in shown["arms"]] == [
                "openai", "simulated", "agent_http",
            ]  # fmt: skip
        first_run = arm(done, "arm 1")["runIds"][0]
        async with db.write() as s:
            await s.execute(
                text("UPDATE model_sweep_arms SET model_provider = NULL WHERE id = :id"),
                {"id": arm(done, "arm 1")["id"]},
            )
        again = (await client.get(f"/model-sweeps/{sweep['id']}", headers=auth(admin_key))).json()
        assert arm(again, "arm 1")["modelProvider"] is None, "not recorded: null, never guessed"
        run = (await client.get(f"/preprod-evals/{first_run}", headers=auth(admin_key))).json()
        assert run["modelProvider"] == "simulated"
    # Upgrading to the revision that added the column fills it from the arm's first run.
    await migrate.downgrade(database_url, "0010")
    await migrate.upgrade(database_url)
    async with app_client(settings, db) as client:
        after = (await client.get(f"/model-sweeps/{sweep['id']}", headers=auth(admin_key))).json()
    assert [a["modelProvider"] for a in after["arms"]] == ["openai", "simulated", "agent_http"]


async def test_a_child_run_whose_judges_were_altered_voids_the_sweep_for_good(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    with serve(steady(RIGHT, path="/a"), steady(RIGHT, path="/b")) as agents:
        sweep = await two_arm_sweep(client, admin_key, agents.url("/a"), agents.url("/b"))
        done = await wait_for_sweep(client, admin_key, sweep["id"])
    assert done["status"] == "completed"
    altered = arm(done, "mini")["runIds"][1]
    async with db.write() as s:
        original = (
            await s.execute(
                text("SELECT judge_ids FROM preprod_runs WHERE id = :id"), {"id": altered}
            )
        ).scalar_one()
        await s.execute(
            text("UPDATE preprod_runs SET judge_ids = :j WHERE id = :id"),
            {"j": '["jdg_other"]', "id": altered},
        )
    voided = (await client.get(f"/model-sweeps/{sweep['id']}", headers=auth(admin_key))).json()
    assert voided["status"] == "void"
    assert voided["divergedArms"] == ["mini"]
    assert "arm 'mini'" in voided["voidReason"] and altered in voided["voidReason"]
    assert "judge set" in voided["voidReason"]
    # Arms' own numbers stay readable.
    assert arm(voided, "sonnet")["passed"] is True
    # Void is terminal: putting the run back does not make the sweep comparable again.
    async with db.write() as s:
        await s.execute(
            text("UPDATE preprod_runs SET judge_ids = :j WHERE id = :id"),
            {"j": original if isinstance(original, str) else json.dumps(original), "id": altered},
        )
    again = (await client.get(f"/model-sweeps/{sweep['id']}", headers=auth(admin_key))).json()
    assert again["status"] == "void" and again["divergedArms"] == ["mini"]


async def test_a_vanished_child_run_voids_the_sweep(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    with serve(steady(RIGHT, path="/a"), steady(RIGHT, path="/b")) as agents:
        sweep = await two_arm_sweep(client, admin_key, agents.url("/a"), agents.url("/b"))
        done = await wait_for_sweep(client, admin_key, sweep["id"])
    gone = arm(done, "sonnet")["runIds"][0]
    async with db.write() as s:
        await s.execute(text("DELETE FROM preprod_items WHERE run_id = :id"), {"id": gone})
        await s.execute(text("DELETE FROM preprod_runs WHERE id = :id"), {"id": gone})
    voided = (await client.get(f"/model-sweeps/{sweep['id']}", headers=auth(admin_key))).json()
    assert voided["status"] == "void"
    assert voided["divergedArms"] == ["sonnet"]
    assert f"run {gone} no longer exists" in voided["voidReason"]


async def test_cancel_mid_sweep_stops_every_arm_and_leaves_passed_unset(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    with serve(
        steady(RIGHT, path="/a", latency_s=0.3), steady(RIGHT, path="/b", latency_s=0.3)
    ) as agents:
        sweep = await two_arm_sweep(client, admin_key, agents.url("/a"), agents.url("/b"))
        r = await client.post(f"/model-sweeps/{sweep['id']}/cancel", headers=auth(admin_key))
        assert r.status_code == 200, r.text
        cancelled = r.json()
        assert cancelled["status"] == "cancelled"
        assert cancelled["reason"] == "cancelled by request"
        await asyncio.sleep(0.5)
    for a in cancelled["arms"]:
        assert a["status"] == "cancelled" and a["passed"] is None
        for run_id in a["runIds"]:
            run = (await client.get(f"/preprod-evals/{run_id}", headers=auth(admin_key))).json()
            assert run["status"] == "cancelled"
    later = (await client.get(f"/model-sweeps/{sweep['id']}", headers=auth(admin_key))).json()
    assert later["status"] == "cancelled"
    assert all(len(a["runIds"]) == 1 for a in later["arms"]), "nothing launched after cancel"
    again = await client.post(f"/model-sweeps/{sweep['id']}/cancel", headers=auth(admin_key))
    assert again.status_code == 200 and again.json()["status"] == "cancelled"


@pytest.mark.parametrize(
    ("arms", "field", "words"),
    [
        ([("a", 0)], "arms", "at least two arms"),
        ([("a", 0), ("a", 1)], "arms[1].label", "each arm needs its own"),
        ([("a", 0), ("b", 0)], "arms[1].agentConnectionId", "same model twice"),
    ],
)
async def test_sweeps_that_compare_nothing_are_refused_naming_the_field(
    client: httpx.AsyncClient,
    admin_key: CreatedKey,
    arms: list[tuple[str, int]],
    field: str,
    words: str,
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    conns = [
        await connection(client, admin_key, "http://127.0.0.1:9/a", name="c0"),
        await connection(client, admin_key, "http://127.0.0.1:9/b", name="c1"),
    ]
    body = {
        "versionLabel": "v1",
        "datasetId": dataset_id,
        "arms": [{"label": label, "agentConnectionId": conns[i]} for label, i in arms],
    }
    for path in ("/model-sweeps", "/model-sweeps/preview"):
        r = await client.post(path, json=body, headers=auth(admin_key))
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == field
        assert words in r.json()["error"]["message"]
    listed = (await client.get("/model-sweeps", headers=auth(admin_key))).json()
    assert listed["sweeps"] == [], "nothing was created"


async def test_caps_refuse_naming_the_field_and_the_setting(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    tight = settings.model_copy(
        update={"sweep_max_arms": 2, "sweep_max_pass_k": 2, "sweep_max_calls": 10}
    )
    async with app_client(tight, db) as client:
        dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
        conns = [
            await connection(client, admin_key, f"http://127.0.0.1:9/{n}", name=f"c{n}")
            for n in range(3)
        ]
        arms = [{"label": f"m{n}", "agentConnectionId": c} for n, c in enumerate(conns)]
        cases = [
            ({"arms": arms}, "arms", "NEENS_SWEEP_MAX_ARMS"),
            ({"arms": arms[:2], "passK": 3}, "passK", "NEENS_SWEEP_MAX_PASS_K"),
            ({"arms": arms[:2], "passK": 2}, "arms", "NEENS_SWEEP_MAX_CALLS"),
        ]
        for extra, field, setting in cases:
            body = {"versionLabel": "v1", "datasetId": dataset_id, **extra}
            r = await client.post("/model-sweeps", json=body, headers=auth(admin_key))
            assert r.status_code == 422, r.text
            assert r.json()["error"]["field"] == field
            assert setting in r.json()["error"]["message"]


async def test_an_unknown_connection_or_dataset_is_refused_naming_the_field(
    client: httpx.AsyncClient, admin_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    mine = await connection(client, admin_key, "http://127.0.0.1:9/a", name="mine")
    theirs = await connection(client, other_project_key, "http://127.0.0.1:9/b", name="theirs")
    body = {
        "versionLabel": "v1",
        "datasetId": dataset_id,
        "arms": [
            {"label": "a", "agentConnectionId": mine},
            {"label": "b", "agentConnectionId": theirs},
        ],
    }
    r = await client.post("/model-sweeps", json=body, headers=auth(admin_key))
    assert r.status_code == 404 and r.json()["error"]["field"] == "arms[1].agentConnectionId"
    body["datasetId"] = "ds_nope"
    r = await client.post("/model-sweeps", json=body, headers=auth(admin_key))
    assert r.status_code == 404 and r.json()["error"]["field"] == "datasetId"
    # Another project's version, named alone: missing here, and nothing of theirs is told.
    _, their_version = await golden_dataset(client, other_project_key, ITEMS, name="theirs")
    body.pop("datasetId")
    body["arms"][1]["agentConnectionId"] = mine
    body["arms"][0]["agentConnectionId"] = await connection(
        client, admin_key, "http://127.0.0.1:9/c", name="mine too"
    )
    r = await client.post(
        "/model-sweeps", json={**body, "datasetVersionId": their_version}, headers=auth(admin_key)
    )
    assert r.status_code == 404 and r.json()["error"]["field"] == "datasetVersionId", r.text
    assert r.json()["error"]["message"] == f"no dataset version {their_version!r} in this project"
    r = await client.post(
        "/model-sweeps", json={**body, "datasetVersionId": their_version, "passK": True},
        headers=auth(admin_key),
    )  # fmt: skip
    assert r.status_code == 422 and r.json()["error"]["field"] == "passK", "true is not a k"
    r = await client.post(
        "/model-sweeps", json={**body, "dataset_id": "x"}, headers=auth(admin_key)
    )
    assert r.status_code == 422, "snake_case fields are not the sweep API's"


async def test_ingest_keys_may_start_read_and_cancel_sweeps_of_their_project_only(
    client: httpx.AsyncClient,
    admin_key: CreatedKey,
    ingest_key: CreatedKey,
    other_project_key: CreatedKey,
) -> None:
    sweep = await two_arm_sweep(
        client, admin_key, refused_url("/x"), refused_url("/y"), starter=ingest_key
    )
    r = await client.get(f"/model-sweeps/{sweep['id']}", headers=auth(other_project_key))
    assert r.status_code == 404
    missing = await client.get("/model-sweeps/msw-nope", headers=auth(other_project_key))
    assert r.json() == {
        **missing.json(),
        "error": {**missing.json()["error"], "message": r.json()["error"]["message"]},
    }
    assert sweep["id"] in r.json()["error"]["message"]
    r = await client.post(f"/model-sweeps/{sweep['id']}/cancel", headers=auth(other_project_key))
    assert r.status_code == 404
    r = await client.post(f"/model-sweeps/{sweep['id']}/cancel", headers=auth(ingest_key))
    assert r.status_code == 200, r.text
    listed = (await client.get("/model-sweeps", headers=auth(ingest_key))).json()
    assert [s["id"] for s in listed["sweeps"]] == [sweep["id"]]
    assert (await client.get("/model-sweeps", headers=auth(other_project_key))).json()[
        "sweeps"
    ] == []


async def test_the_list_pages_newest_first_with_a_cursor(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    made = []
    for n in range(3):
        sweep = await two_arm_sweep(
            client, admin_key, refused_url(f"/x{n}"), refused_url(f"/y{n}"), name=f"s{n}"
        )
        made.append(sweep["id"])
    first = (await client.get("/model-sweeps?limit=2", headers=auth(admin_key))).json()
    assert [s["id"] for s in first["sweeps"]] == made[::-1][:2]
    rest = (
        await client.get(
            f"/model-sweeps?limit=2&cursor={first['nextCursor']}", headers=auth(admin_key)
        )
    ).json()
    assert [s["id"] for s in rest["sweeps"]] == made[:1] and rest["nextCursor"] is None


async def test_items_of_a_child_run_are_the_frozen_ones(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    with serve(steady(RIGHT, path="/a"), steady(RIGHT, path="/b")) as agents:
        sweep = await two_arm_sweep(client, admin_key, agents.url("/a"), agents.url("/b"))
        done = await wait_for_sweep(client, admin_key, sweep["id"])
    items = await items_of(client, admin_key, arm(done, "sonnet")["runIds"][0])
    assert [i["input"] for i in items] == [i["input"] for i in ITEMS]


async def _priced_and_unpriced(
    client: httpx.AsyncClient, key: CreatedKey, priced_url: str, unpriced_url: str
) -> tuple[str, list[str]]:
    tag = uuid.uuid4().hex[:8]
    dataset_id, _ = await golden_dataset(client, key, ITEMS, name=f"golden-{tag}")
    conns = [
        await connection(
            client, key, priced_url, name=f"p-{tag}", requestFormat="chat", model=PRICED_MODEL
        ),
        await connection(
            client, key, unpriced_url, name=f"u-{tag}", requestFormat="chat",
            model=UNPRICED_MODEL,
        ),
    ]  # fmt: skip
    return dataset_id, conns


async def test_preview_estimates_each_arm_and_says_partial_when_one_is_unpriced(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, conns = await _priced_and_unpriced(
        client, admin_key, "http://127.0.0.1:9/p", "http://127.0.0.1:9/u"
    )
    body = {
        "datasetId": dataset_id,
        "passK": 3,
        "budgetUsd": 10,
        "arms": [
            {"label": "mini", "agentConnectionId": conns[0]},
            {"label": "self-host", "agentConnectionId": conns[1]},
        ],
    }
    r = await client.post("/model-sweeps/preview", json=body, headers=auth(admin_key))
    assert r.status_code == 200, r.text
    preview = r.json()
    mini, selfhost = preview["arms"]
    assert (mini["calls"], selfhost["calls"]) == (12, 12)
    assert preview["totalCalls"] == 24 and preview["itemCount"] == 4
    assert mini["basis"] == "prompts" and mini["estimatedUsd"] > 0
    assert selfhost["basis"] == "unpriced" and selfhost["estimatedUsd"] is None
    assert preview["estimatedUsd"] == mini["estimatedUsd"], "unpriced is never added as 0"
    assert preview["partial"] is True
    assert (preview["wouldRefuse"], preview["refusal"]) == (False, None)
    listed = (await client.get("/model-sweeps", headers=auth(admin_key))).json()
    assert listed["sweeps"] == [], "preview writes nothing"


async def test_the_budget_refuses_on_the_priced_part_alone_never_on_unpriced_arms(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, conns = await _priced_and_unpriced(
        client, admin_key, "http://127.0.0.1:9/p", "http://127.0.0.1:9/u"
    )
    arms = [
        {"label": "mini", "agentConnectionId": conns[0]},
        {"label": "self-host", "agentConnectionId": conns[1]},
    ]
    base = {"versionLabel": "v1", "datasetId": dataset_id, "arms": arms}
    preview = (
        await client.post("/model-sweeps/preview", json=base, headers=auth(admin_key))
    ).json()
    priced = preview["estimatedUsd"]
    over = {**base, "budgetUsd": priced / 2}
    r = await client.post("/model-sweeps/preview", json=over, headers=auth(admin_key))
    assert r.json()["wouldRefuse"] is True and "budgetUsd" in r.json()["refusal"]
    r = await client.post("/model-sweeps", json=over, headers=auth(admin_key))
    assert r.status_code == 422 and r.json()["error"]["field"] == "budgetUsd"
    assert "self-host" in r.json()["error"]["message"], "the refusal names the unpriced arm"
    # Two unpriced arms: nothing to refuse on, whatever the budget.
    other = await connection(
        client, admin_key, "http://127.0.0.1:9/u2", name=f"u2-{uuid.uuid4().hex[:6]}",
        requestFormat="chat", model="another-unknown-model",
    )  # fmt: skip
    unpriced = {
        **base,
        "budgetUsd": 0,
        "arms": [arms[1], {"label": "other", "agentConnectionId": other}],
    }
    r = await client.post("/model-sweeps/preview", json=unpriced, headers=auth(admin_key))
    assert r.json()["estimatedUsd"] is None and r.json()["wouldRefuse"] is False
    r = await client.post("/model-sweeps", json=unpriced, headers=auth(admin_key))
    assert r.status_code == 201, r.text


async def test_crossing_the_budget_while_running_stops_new_calls_and_cancels_the_sweep(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    # The estimate rests on the short frozen prompts; the agents report far more tokens, so
    # the spend crosses the budget the estimate fitted under.
    usage = {"prompt_tokens": 200_000, "completion_tokens": 50_000}
    with serve(
        Agent(RIGHT, wire="chat", path="/p1", model=PRICED_MODEL, usage=usage, latency_s=0.05),
        Agent(RIGHT, wire="chat", path="/p2", model=PRICED_MODEL, usage=usage, latency_s=0.05),
    ) as agents:
        tag = uuid.uuid4().hex[:8]
        dataset_id, _ = await golden_dataset(client, admin_key, ITEMS, name=f"golden-{tag}")
        conns = [
            await connection(
                client, admin_key, agents.url(f"/p{n}"), name=f"p{n}-{tag}",
                requestFormat="chat", model=PRICED_MODEL,
            )
            for n in (1, 2)
        ]  # fmt: skip
        body = {
            "versionLabel": "v1",
            "datasetId": dataset_id,
            "passK": 3,
            "budgetUsd": 0.05,
            "arms": [
                {"label": "one", "agentConnectionId": conns[0]},
                {"label": "two", "agentConnectionId": conns[1]},
            ],
        }
        r = await client.post("/model-sweeps", json=body, headers=auth(admin_key))
        assert r.status_code == 201, r.text
        done = await wait_for_sweep(client, admin_key, r.json()["id"])
    assert done["status"] == "cancelled"
    assert done["reason"].startswith("budget reached")
    assert done["spentUsd"] > 0.05
    planned = 2 * 3 * len(ITEMS)
    assert len(agents.calls) < planned, "no new calls after the budget was crossed"
    assert all(a["passed"] is None for a in done["arms"])
    # The next estimate for these connections rests on the tokens their answers reported.
    r = await client.post("/model-sweeps/preview", json=body, headers=auth(admin_key))
    one = r.json()["arms"][0]
    assert one["basis"] == "history", one
    assert "200,000" in one["basisDetail"] or "200000" in one["basisDetail"], one
    assert r.json()["wouldRefuse"] is True, "at the reported usage the budget is far exceeded"
