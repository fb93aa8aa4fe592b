"""A session id may hold `/` (`support/ticket/17`, as some instrumentations make them): the
list shows it, and every route that names a session reaches it, written plainly or as `%2F`."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.api.test_failure_modes import annotate, new_mode, new_session
from tests.conftest import auth

SESSION = "support/ticket/17"
SPELLINGS = [SESSION, quote(SESSION, safe="")]


async def test_the_list_shows_the_id_as_it_was_sent(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    await new_session(client, ingest_key, SESSION)
    r = await client.get("/sessions", headers=auth(ingest_key))
    assert r.status_code == 200, r.text
    assert [s["id"] for s in r.json()["sessions"]] == [SESSION]


@pytest.mark.parametrize("spelling", SPELLINGS, ids=["plain", "percent-encoded"])
async def test_get_reaches_a_session_whose_id_holds_slashes(
    client: httpx.AsyncClient, ingest_key: CreatedKey, spelling: str
) -> None:
    await new_session(client, ingest_key, SESSION)
    await new_session(client, ingest_key, "support")
    r = await client.get(f"/sessions/{spelling}", headers=auth(ingest_key))
    assert r.status_code == 200, r.text
    assert r.json()["id"] == SESSION
    r = await client.get("/sessions/support", headers=auth(ingest_key))
    assert r.status_code == 200, r.text
    assert r.json()["id"] == "support"


async def test_an_unknown_id_with_slashes_is_a_404_naming_it(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    await new_session(client, ingest_key, "support")
    r = await client.get("/sessions/support/ticket/18", headers=auth(ingest_key))
    assert r.status_code == 404, r.text
    assert "support/ticket/18" in r.json()["error"]["message"]


@pytest.mark.parametrize("spelling", SPELLINGS, ids=["plain", "percent-encoded"])
async def test_failure_mode_annotations_reach_a_session_whose_id_holds_slashes(
    client: httpx.AsyncClient, ingest_key: CreatedKey, admin_key: CreatedKey, spelling: str
) -> None:
    await new_session(client, ingest_key, SESSION)
    mode = await new_mode(client, admin_key, "wrong refund amount")
    r = await annotate(client, ingest_key, spelling, mode["id"])
    assert r.status_code == 200, r.text
    assert r.json()["sessionId"] == SESSION
    r = await client.get(f"/sessions/{spelling}/failure-modes", headers=auth(ingest_key))
    assert r.status_code == 200, r.text
    assert [a["failureModeId"] for a in r.json()["annotations"]] == [mode["id"]]


async def test_a_path_with_no_id_says_where_the_list_is(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.get("/sessions/", headers=auth(ingest_key))
    assert r.status_code == 404, r.text
    assert r.json()["error"]["field"] == "session_id"
    assert "GET /sessions lists them" in r.json()["error"]["message"]


async def test_an_unknown_id_thousands_of_characters_long_is_quoted_cut(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.get("/sessions/" + "a/" * 3000, headers=auth(ingest_key))
    assert r.status_code == 404, r.text
    message = r.json()["error"]["message"]
    assert message == f"no session '{'a/' * 100}…' in this project"
