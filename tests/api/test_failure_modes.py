"""Failure modes on both databases: the taxonomy and its counts, people's annotations of
sessions (replaced, never duplicated, invisible across projects), the one-query lookup the
sweep drill-down uses, and labels resolving to modes by exact name."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import event, select

from neens.store.db import Database
from neens.store.failure_modes import annotations_for_sessions, failure_modes_named
from neens.store.keys import CreatedKey
from neens.store.models import TraceSession
from tests.conftest import auth


async def new_mode(
    client: httpx.AsyncClient, key: CreatedKey, name: str, **body: Any
) -> dict[str, Any]:
    r = await client.post("/failure-modes", json={"name": name, **body}, headers=auth(key))
    assert r.status_code == 201, r.text
    mode: dict[str, Any] = r.json()
    return mode


async def new_session(
    client: httpx.AsyncClient, key: CreatedKey, session_id: str, prompt: str | None = "q"
) -> str:
    root: dict[str, Any] = {"id": "root", "name": "agent.run", "output": "an answer"}
    if prompt is not None:
        root["input"] = prompt
    r = await client.post(
        "/sessions", json={"session": {"id": session_id}, "spans": [root]}, headers=auth(key)
    )
    assert r.status_code == 200, r.text
    return session_id


async def annotate(
    client: httpx.AsyncClient, key: CreatedKey, session_id: str, mode_id: str, **body: Any
) -> httpx.Response:
    body = {"failureModeId": mode_id, "confirmed": True, **body}
    return await client.post(f"/sessions/{session_id}/failure-modes", json=body, headers=auth(key))


async def modes_by_name(client: httpx.AsyncClient, key: CreatedKey) -> dict[str, dict[str, Any]]:
    r = await client.get("/failure-modes", headers=auth(key))
    assert r.status_code == 200, r.text
    return {m["name"]: m for m in r.json()["failureModes"]}


async def test_a_mode_is_configuration_and_its_name_is_unique_in_the_project(
    client: httpx.AsyncClient,
    admin_key: CreatedKey,
    ingest_key: CreatedKey,
    other_project_key: CreatedKey,
) -> None:
    mode = await new_mode(client, admin_key, "wrong refund amount", description="Pays too much")
    assert mode["id"].startswith("fm_")
    assert (mode["name"], mode["description"], mode["confirmedSessions"]) == (
        "wrong refund amount", "Pays too much", 0,
    )  # fmt: skip
    r = await client.post("/failure-modes", json={"name": "x"}, headers=auth(ingest_key))
    assert r.status_code == 403, "an ingest key may not change the taxonomy"
    r = await client.post(
        "/failure-modes", json={"name": "wrong refund amount"}, headers=auth(admin_key)
    )
    assert r.status_code == 409 and r.json()["error"]["field"] == "name", r.text
    assert mode["id"] in r.json()["error"]["message"]
    # Case-sensitive: a label "Wrong refund amount" is another label, so another mode.
    await new_mode(client, admin_key, "Wrong refund amount")
    # Another project has a taxonomy of its own.
    await new_mode(client, other_project_key, "wrong refund amount")
    r = await client.post("/failure-modes", json={"name": "  "}, headers=auth(admin_key))
    assert r.status_code == 422 and r.json()["error"]["field"] == "name"
    listed = await modes_by_name(client, ingest_key)
    assert sorted(listed) == ["Wrong refund amount", "wrong refund amount"]
    assert listed["wrong refund amount"]["id"] == mode["id"]


async def test_the_list_pages_oldest_first_with_a_cursor(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    made = [(await new_mode(client, admin_key, f"mode {n}"))["id"] for n in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        r = await client.get("/failure-modes", params=params, headers=auth(admin_key))
        assert r.status_code == 200, r.text
        seen += [m["id"] for m in r.json()["failureModes"]]
        cursor = r.json()["nextCursor"]
        if cursor is None:
            break
    assert seen == made
    r = await client.get("/failure-modes", params={"cursor": "garbage"}, headers=auth(admin_key))
    assert r.status_code == 422 and r.json()["error"]["field"] == "cursor"


async def test_counts_are_sessions_confirmed_now_and_reposting_replaces_the_annotation(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    refund = (await new_mode(client, admin_key, "wrong refund amount"))["id"]
    tone = (await new_mode(client, admin_key, "rude tone"))["id"]
    s1 = await new_session(client, admin_key, "sess-1")
    s2 = await new_session(client, admin_key, "sess-2")
    r = await annotate(client, ingest_key, s1, refund, note="paid 120 of 100", expectedOutput="100")
    assert r.status_code == 200, r.text
    first = r.json()
    assert first["sessionId"] == s1 and first["failureMode"] == "wrong refund amount"
    assert (first["confirmed"], first["note"], first["expectedOutput"]) == (
        True, "paid 120 of 100", "100",
    )  # fmt: skip
    assert (await annotate(client, ingest_key, s2, refund)).status_code == 200
    assert (await annotate(client, ingest_key, s2, tone, confirmed=False)).status_code == 200
    counts = {
        n: m["confirmedSessions"] for n, m in (await modes_by_name(client, ingest_key)).items()
    }
    assert counts == {"wrong refund amount": 2, "rude tone": 0}, "confirmed: false counts nothing"

    # The same (session, mode) again replaces the annotation whole: one row, new verdict,
    # the note it no longer sends cleared.
    r = await annotate(client, ingest_key, s1, refund, confirmed=False)
    assert r.status_code == 200, r.text
    assert (r.json()["confirmed"], r.json()["note"], r.json()["expectedOutput"]) == (
        False, None, None,
    )  # fmt: skip
    assert r.json()["createdAt"] == first["createdAt"]
    assert r.json()["updatedAt"] > first["updatedAt"]
    listed = (await client.get(f"/sessions/{s1}/failure-modes", headers=auth(ingest_key))).json()
    assert [(a["failureModeId"], a["confirmed"]) for a in listed["annotations"]] == [
        (refund, False)
    ]
    counts = {
        n: m["confirmedSessions"] for n, m in (await modes_by_name(client, ingest_key)).items()
    }
    assert counts == {"wrong refund amount": 1, "rude tone": 0}
    listed = (await client.get(f"/sessions/{s2}/failure-modes", headers=auth(ingest_key))).json()
    assert [(a["failureMode"], a["confirmed"]) for a in listed["annotations"]] == [
        ("wrong refund amount", True),
        ("rude tone", False),
    ], "in the taxonomy's order"


async def test_annotating_refuses_what_is_not_this_projects_naming_the_field(
    client: httpx.AsyncClient, admin_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    mine = (await new_mode(client, admin_key, "loops"))["id"]
    theirs = (await new_mode(client, other_project_key, "loops"))["id"]
    session = await new_session(client, admin_key, "sess-mine")
    their_session = await new_session(client, other_project_key, "sess-theirs")

    r = await annotate(client, admin_key, session, theirs)
    assert r.status_code == 404 and r.json()["error"]["field"] == "failureModeId", r.text
    missing = await annotate(client, admin_key, session, "fm_" + "0" * 24)
    assert (
        missing.json()["error"]["message"].replace("fm_" + "0" * 24, theirs)
        == (r.json()["error"]["message"])
    )

    # Another project's session answers exactly like one that was never created.
    answers = []
    for session_id in (their_session, "sess-never"):
        for method in ("POST", "GET"):
            body = {"failureModeId": mine, "confirmed": True} if method == "POST" else None
            r = await client.request(
                method,
                f"/sessions/{session_id}/failure-modes",
                json=body,
                headers=auth(admin_key),
            )
            answers.append((r.status_code, r.text.replace(session_id, "<id>")))
    assert answers[:2] == answers[2:]
    assert answers[0][0] == 404 and '"field":"session_id"' in answers[0][1]
    listed = await client.get(
        f"/sessions/{their_session}/failure-modes", headers=auth(other_project_key)
    )
    assert listed.json()["annotations"] == [], "nothing was written to their session"

    r = await client.post(
        f"/sessions/{session}/failure-modes",
        json={"failureModeId": mine, "confirmed": "yes"},
        headers=auth(admin_key),
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "confirmed", r.text


async def _pks(db: Database, *trace_ids: str) -> list[int]:
    async with db.read() as s:
        result = await s.execute(select(TraceSession.trace_id, TraceSession.pk))
        rows: dict[str, int] = {row.trace_id: row.pk for row in result}
    return [rows[t] for t in trace_ids]


async def test_annotations_for_sessions_names_confirmed_modes_in_one_query(
    client: httpx.AsyncClient,
    db: Database,
    admin_key: CreatedKey,
    other_project_key: CreatedKey,
) -> None:
    refund = (await new_mode(client, admin_key, "wrong refund amount"))["id"]
    tone = (await new_mode(client, admin_key, "rude tone"))["id"]
    theirs = (await new_mode(client, other_project_key, "theirs"))["id"]
    for sid in ("both", "one", "refuted", "none"):
        await new_session(client, admin_key, sid)
    await new_session(client, other_project_key, "foreign")
    await annotate(client, admin_key, "both", tone)
    await annotate(client, admin_key, "both", refund)
    await annotate(client, admin_key, "one", refund)
    await annotate(client, admin_key, "refuted", refund, confirmed=False)
    await annotate(client, other_project_key, "foreign", theirs)
    both, one, refuted, none, foreign = await _pks(db, "both", "one", "refuted", "none", "foreign")
    # Far more keys than SQLite lets one statement bind, to show they travel as one value.
    asked = [both, one, refuted, none, foreign, *range(10**9, 10**9 + 40_000)]
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    async with db.read() as s:
        conn = (await s.connection()).sync_connection
        assert conn is not None
        event.listen(conn, "before_cursor_execute", count)
        found = await annotations_for_sessions(s, admin_key.project_id, asked)
        event.remove(conn, "before_cursor_execute", count)
    assert len(statements) == 1, statements
    assert found[both] == ["wrong refund amount", "rude tone"], "in the taxonomy's order"
    assert found[one] == ["wrong refund amount"]
    assert found[refuted] == [] and found[none] == [], "unclassified is an empty list"
    assert found[foreign] == [], "another project's annotations are not this project's"
    assert len(found) == len(asked)
    async with db.read() as s:
        assert await annotations_for_sessions(s, admin_key.project_id, []) == {}


async def test_a_label_resolves_to_the_mode_of_exactly_that_name(
    client: httpx.AsyncClient, db: Database, admin_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    refund = (await new_mode(client, admin_key, "refund"))["id"]
    await new_mode(client, other_project_key, "escalation")
    async with db.read() as s:
        resolved = await failure_modes_named(
            s, admin_key.project_id, ["refund", "Refund", "refund ", "escalation", "other"]
        )
    assert resolved == {"refund": refund}
