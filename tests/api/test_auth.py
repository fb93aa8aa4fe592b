"""Keys: every route needs one; roles; revocation; tenancy."""

from __future__ import annotations

import httpx

from neens.store.db import Database
from neens.store.keys import CreatedKey, list_keys, revoke_key
from tests.conftest import auth


async def test_a_route_without_a_key_is_401_naming_the_header(client: httpx.AsyncClient) -> None:
    r = await client.get("/datasets")
    assert r.status_code == 401
    assert r.json() == {
        "error": {
            "code": "not_authenticated",
            "message": "missing Authorization header: send 'Authorization: Bearer nk_live_…'",
            "field": "Authorization",
        }
    }


async def test_an_unknown_key_is_401(client: httpx.AsyncClient) -> None:
    r = await client.get("/datasets", headers={"Authorization": "Bearer nk_live_madeup"})
    assert r.status_code == 401


async def test_a_non_bearer_scheme_is_401(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.get("/datasets", headers={"Authorization": f"Basic {ingest_key.key}"})
    assert r.status_code == 401


async def test_a_revoked_key_stops_working(
    client: httpx.AsyncClient, db: Database, ingest_key: CreatedKey
) -> None:
    assert (await client.get("/datasets", headers=auth(ingest_key))).status_code == 200
    assert await revoke_key(db, ingest_key.key_id)
    assert (await client.get("/datasets", headers=auth(ingest_key))).status_code == 401
    [info] = [k for k in await list_keys(db) if k.key_id == ingest_key.key_id]
    assert info.revoked_at is not None


async def test_keys_are_stored_hashed(db: Database, ingest_key: CreatedKey) -> None:
    from sqlalchemy import select

    from neens.store.models import ApiKey

    async with db.read() as s:
        stored = list(await s.scalars(select(ApiKey.key_hash)))
    assert ingest_key.key.startswith("nk_live_")
    assert all(ingest_key.key not in h for h in stored)
    assert ingest_key.key[len("nk_live_") :] not in " ".join(stored)


async def test_an_ingest_key_may_not_set_prices(
    client: httpx.AsyncClient, ingest_key: CreatedKey, admin_key: CreatedKey
) -> None:
    body = {"inputPerMTokUsd": 1.0, "outputPerMTokUsd": 2.0}
    r = await client.put("/model-pricing/my-model", json=body, headers=auth(ingest_key))
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "forbidden"
    r = await client.put("/model-pricing/my-model", json=body, headers=auth(admin_key))
    assert r.status_code == 200


async def test_healthz_answers_without_a_key(client: httpx.AsyncClient, dialect: str) -> None:
    r = await client.get("/healthz")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"
    assert r.json()["database"] == dialect


async def test_two_authorization_headers_are_401_whichever_keys_they_hold(
    client: httpx.AsyncClient, ingest_key: CreatedKey, admin_key: CreatedKey
) -> None:
    """A proxy adding its own header must not decide, by header order, which project a
    request reads: two headers are refused, even two copies of one valid key."""
    for pair in ((ingest_key, admin_key), (admin_key, ingest_key), (admin_key, admin_key)):
        headers = [("Authorization", f"Bearer {k.key}") for k in pair]
        r = await client.get("/datasets", headers=headers)
        assert r.status_code == 401, r.text
        assert r.json()["error"] == {
            "code": "not_authenticated",
            "message": "2 Authorization headers: send exactly one, "
            "'Authorization: Bearer nk_live_…'",
            "field": "Authorization",
        }
    assert (await client.get("/datasets", headers=auth(admin_key))).status_code == 200
