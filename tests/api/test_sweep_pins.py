"""What an unfinished sweep pinned cannot change under it: each arm creates its k runs one
after another from the connection and judges as they are then, so a connection's model or URL,
or the Primary Score's components, changed mid-sweep called or scored later runs differently
from earlier ones under one fingerprint (the arm kept saying its first model)."""

from __future__ import annotations

from typing import Any

import httpx

from neens.demo.endpoints import serve, steady
from neens.store.keys import CreatedKey
from tests.api.test_sweeps import RIGHT, two_arm_sweep, wait_for_sweep
from tests.support.preprod import auth


async def _judges(client: httpx.AsyncClient, key: CreatedKey) -> list[dict[str, Any]]:
    judges: list[dict[str, Any]] = (await client.get("/judges", headers=auth(key))).json()["judges"]
    return judges


async def test_a_running_sweeps_connections_and_judges_keep_what_it_pinned_until_it_ends(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    slow = steady(RIGHT, path="/slow", latency_s=0.5)
    with serve(steady(RIGHT, path="/a"), slow) as agents:
        extra = await client.post(
            "/judges",
            json={"name": "mentions-answer", "type": "managed", "check": "contains",
                  "config": {"value": "answer"}},
            headers=auth(admin_key),
        )  # fmt: skip
        assert extra.status_code == 201, extra.text
        sweep = await two_arm_sweep(client, admin_key, agents.url("/a"), agents.url("/slow"))
        assert sweep["status"] == "running"
        conn = sweep["arms"][1]["agentConnectionId"]

        for change, field in (
            ({"model": "claude-3-haiku-20240307"}, "model"),
            ({"url": agents.url("/a")}, "url"),
            ({"provider": "anthropic"}, "provider"),
        ):
            r = await client.patch(
                f"/agent-connections/{conn}", json=change, headers=auth(admin_key)
            )
            assert r.status_code == 409, r.text
            error = r.json()["error"]
            assert error["field"] == field
            assert sweep["id"] in error["message"] and "neens sweep cancel" in error["message"]
        # What does not change the arm may: its name, and the headers (credentials rotate).
        for change in ({"name": "renamed"}, {"headers": {"X-Token": "rotated"}}):
            r = await client.patch(
                f"/agent-connections/{conn}", json=change, headers=auth(admin_key)
            )
            assert r.status_code == 200, r.text
        # The same model given again is no change.
        same = await client.patch(
            f"/agent-connections/{conn}", json={"model": "gpt-4o-mini"}, headers=auth(admin_key)
        )
        assert same.status_code == 200, same.text

        judges = await _judges(client, admin_key)
        primary = next(j for j in judges if j["isPrimary"])
        component = primary["config"]["components"][0]["judgeId"]
        reweigh = await client.patch(
            f"/judges/{primary['id']}",
            json={"components": [{"judgeId": extra.json()["id"], "weight": 1.0}]},
            headers=auth(admin_key),
        )
        assert reweigh.status_code == 409, reweigh.text
        assert reweigh.json()["error"]["field"] == "components"
        assert sweep["id"] in reweigh.json()["error"]["message"]
        # A judge the sweep does not use is free to change.
        off = await client.patch(
            f"/judges/{extra.json()['id']}", json={"enabled": False}, headers=auth(admin_key)
        )
        assert off.status_code == 200, off.text

        done = await wait_for_sweep(client, admin_key, sweep["id"])
        assert done["status"] == "completed", done
        runs = [
            (await client.get(f"/preprod-evals/{run_id}", headers=auth(admin_key))).json()
            for arm in done["arms"]
            for run_id in arm["runIds"]
        ]
        assert {(run["model"], tuple(run["judgeDeploymentIds"])) for run in runs[3:]} == {
            ("gpt-4o-mini", (primary["id"],))
        }, "every run of the slow arm called and was scored as its first was"

        # Finished: the connection and the Primary Score are free again.
        r = await client.patch(
            f"/agent-connections/{conn}", json={"model": "claude-3-haiku-20240307"},
            headers=auth(admin_key),
        )  # fmt: skip
        assert r.status_code == 200, r.text
        r = await client.patch(
            f"/judges/{primary['id']}",
            json={"components": [{"judgeId": component, "weight": 2.0}]},
            headers=auth(admin_key),
        )
        assert r.status_code == 200, r.text


async def test_a_cancelled_sweep_pins_nothing(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    slow = steady(RIGHT, path="/slow", latency_s=0.5)
    with serve(steady(RIGHT, path="/a"), slow) as agents:
        sweep = await two_arm_sweep(client, admin_key, agents.url("/a"), agents.url("/slow"))
        r = await client.post(f"/model-sweeps/{sweep['id']}/cancel", headers=auth(admin_key))
        assert r.status_code == 200, r.text
        conn = sweep["arms"][1]["agentConnectionId"]
        r = await client.patch(
            f"/agent-connections/{conn}", json={"model": "other"}, headers=auth(admin_key)
        )
        assert r.status_code == 200, r.text
