"""Share links: off until an admin turns them on, read-only and redacted with no key, gone (410)
once expired, revoked or turned off; a void sweep's share shows the void, not a comparison."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text

from neens.demo.endpoints import Agent, serve
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.api.test_sweep_decisions import AGENTS, sweep_of
from tests.api.test_sweeps import RIGHT
from tests.support.preprod import auth


async def _enable(client: httpx.AsyncClient, admin: CreatedKey, on: bool = True) -> None:
    r = await client.put("/share-links/settings", json={"enabled": on}, headers=auth(admin))
    assert r.status_code == 200 and r.json() == {"enabled": on}, r.text


async def _link(
    client: httpx.AsyncClient, key: CreatedKey, sweep_id: str, **body: Any
) -> httpx.Response:
    return await client.post(
        "/share-links",
        json={"resourceType": "sweep_decision", "resourceId": sweep_id, **body},
        headers=auth(key),
    )


def _token(link: dict[str, Any]) -> str:
    return str(link["url"].rsplit("/share/", 1)[1])


async def _finished_sweep(
    client: httpx.AsyncClient, admin: CreatedKey
) -> tuple[dict[str, Any], str]:
    agents = serve(
        Agent(RIGHT, path="/a", agent_name=AGENTS.get),
        Agent(RIGHT, path="/b", agent_name=AGENTS.get),
    )
    with agents as server:
        sweep = await sweep_of(
            client, admin, [("sonnet", server.url("/a"), {"model": "claude-sonnet-4-5"}),
                            ("mini", server.url("/b"), {"model": "gpt-4o-mini"})],
        )  # fmt: skip
    return sweep, server.url("")


async def test_sharing_is_off_until_an_admin_turns_it_on(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    sweep, _ = await _finished_sweep(client, admin_key)
    assert (await client.get("/share-links/settings", headers=auth(ingest_key))).json() == {
        "enabled": False
    }
    r = await _link(client, ingest_key, sweep["id"])
    assert r.status_code == 403 and "PUT /share-links/settings" in r.json()["error"]["message"]
    r = await client.put("/share-links/settings", json={"enabled": True}, headers=auth(ingest_key))
    assert r.status_code == 403, "only an admin turns sharing on"
    await _enable(client, admin_key)
    r = await _link(client, ingest_key, sweep["id"], ttlHours=24)
    assert r.status_code == 201, r.text
    link = r.json()
    assert link["id"].startswith("shl_") and "/share/" in link["url"]
    listed = (await client.get("/share-links", headers=auth(ingest_key))).json()["links"]
    assert [(x["id"], x["url"]) for x in listed] == [(link["id"], None)], "the URL is shown once"


async def test_the_shared_decision_is_readable_with_no_key_and_redacted(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    sweep, agent_url = await _finished_sweep(client, admin_key)
    await _enable(client, admin_key)
    link = (await _link(client, admin_key, sweep["id"])).json()
    r = await client.get(f"/share/{_token(link)}")
    assert r.status_code == 200, r.text
    shared = r.json()
    assert shared["comparable"] is True and shared["void"] is None
    assert shared["verdict"]["outcome"] in ("recommended", "no_arm_clears")
    assert {a["label"]: a["model"] for a in shared["arms"]} == {
        "sonnet": "claude-sonnet-4-5", "mini": "gpt-4o-mini",
    }  # fmt: skip
    assert [a["rate"] for a in shared["arms"]] == [1.0, 1.0]
    assert {g["agent"] for g in shared["agents"]} == {"refund-agent", "escalation", "Unattributed"}
    # These answers report no usage: both arms are listed as unpriced, by label, none plotted.
    assert shared["frontier"]["points"] == []
    assert shared["frontier"]["unpricedArms"] == ["sonnet", "mini"]
    body = r.text
    secrets = ["msw-", "msa-", "ppr_", "conn_", "ds_", "dsv_", "jdg_", "nk_live_", agent_url,
               "question 0", "answer 0", ":dsi_"]  # fmt: skip
    assert [s for s in secrets if s in body] == [], "no id, prompt, answer, session or URL"
    # A link pasted into chat or mail gains parameters on the way; they change nothing.
    tagged = await client.get(f"/share/{_token(link)}?utm_source=chat&utm_medium=x&ref=1")
    assert tagged.status_code == 200 and tagged.json() == shared
    # Another key's request changes nothing; a made-up token is not found.
    assert (await client.get("/share/not-a-token")).status_code == 404


async def test_expired_revoked_and_turned_off_links_are_gone(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    sweep, _ = await _finished_sweep(client, admin_key)
    await _enable(client, admin_key)
    expiring, revoked, live = [(await _link(client, admin_key, sweep["id"])).json() for _ in "abc"]
    async with db.write() as s:
        await s.execute(
            text("UPDATE share_links SET expires_at = created_at WHERE id = :id"),
            {"id": expiring["id"]},
        )
    r = await client.post(f"/share-links/{revoked['id']}/revoke", headers=auth(admin_key))
    assert r.status_code == 200 and r.json()["revokedAt"] is not None
    expired = await client.get(f"/share/{_token(expiring)}")
    assert expired.status_code == 410 and "expired" in expired.json()["error"]["message"]
    gone = await client.get(f"/share/{_token(revoked)}")
    assert gone.status_code == 410 and "revoked" in gone.json()["error"]["message"]
    assert (await client.get(f"/share/{_token(live)}")).status_code == 200
    await _enable(client, admin_key, on=False)
    off = await client.get(f"/share/{_token(live)}")
    assert off.status_code == 410 and "turned off" in off.json()["error"]["message"]
    assert (await _link(client, admin_key, sweep["id"])).status_code == 403
    # Turning sharing off pauses links; on again, those neither expired nor revoked come back
    # (docs/decisions.md: revoke a link to end it for good).
    await _enable(client, admin_key)
    assert (await client.get(f"/share/{_token(live)}")).status_code == 200
    for ended in (expiring, revoked):
        assert (await client.get(f"/share/{_token(ended)}")).status_code == 410


async def test_the_public_link_is_documented_as_open_with_its_410(
    client: httpx.AsyncClient,
) -> None:
    operation = (await client.get("/openapi.json")).json()["paths"]["/share/{token}"]["get"]
    assert "security" not in operation, "the link needs no key"
    assert {"200", "404", "410"} <= operation["responses"].keys()
    assert not {"401", "403"} & operation["responses"].keys()


async def test_a_void_sweeps_share_shows_the_void_not_a_comparison(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    sweep, _ = await _finished_sweep(client, admin_key)
    run_id = sweep["arms"][0]["runIds"][2]
    async with db.write() as s:
        await s.execute(
            text("UPDATE preprod_runs SET gate = :g WHERE id = :id"),
            {"g": '{"min_pass_rate": 0.1}', "id": run_id},
        )
    await _enable(client, admin_key)
    shared = (
        await client.get(f"/share/{_token((await _link(client, admin_key, sweep['id'])).json())}")
    ).json()
    assert shared["comparable"] is False
    assert shared["void"]["divergedArms"] == ["sonnet"]
    assert shared["leaderboard"] == [] and shared["verdict"]["recommendedArm"] is None
    assert shared["verdict"]["sentence"].startswith("This sweep is void")
    assert shared["frontier"] is None
    assert run_id not in str(shared)


async def test_only_the_projects_own_sweeps_can_be_shared(
    client: httpx.AsyncClient, admin_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    sweep, _ = await _finished_sweep(client, admin_key)
    await _enable(client, other_project_key)
    r = await _link(client, other_project_key, sweep["id"])
    assert r.status_code == 404 and r.json()["error"]["field"] == "resourceId"
    r = await _link(client, other_project_key, sweep["id"], ttlHours=0)
    assert r.status_code == 422 and r.json()["error"]["field"] == "ttlHours"
