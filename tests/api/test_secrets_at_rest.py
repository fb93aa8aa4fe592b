"""Secrets at rest: connection headers, judge API keys and sink headers are stored encrypted,
still reach the endpoint, survive key rotation, and a wrong key is a clear error."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from neens.secrets import SecretKeyError, generate_key, load_secret_box
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.secrets import reencrypt
from tests.api.test_connection_changes import header_recorder
from tests.conftest import TEST_SECRET_KEY, auth
from tests.support.live import app_client
from tests.support.preprod import create_run, golden_dataset, wait_for_run

SECRET = "Bearer sk-very-secret-value"


async def _raw_rows(db: Database) -> str:
    async with db.read() as s:
        rows = [
            *(await s.execute(text("SELECT headers FROM agent_connections"))).all(),
            *(await s.execute(text("SELECT headers FROM notification_sinks"))).all(),
            *(await s.execute(text("SELECT secret FROM judges"))).all(),
        ]
    return repr(rows)


async def _push(client: httpx.AsyncClient, key: CreatedKey, dataset: str, conn: str) -> str:
    run = await create_run(
        client, key, dataset_id=dataset, runner_mode="push", agent_connection_id=conn
    )
    return str((await wait_for_run(client, key, run["id"]))["id"])


async def test_the_raw_rows_hold_no_plaintext_secret_and_the_agent_still_gets_it(
    client: httpx.AsyncClient, db: Database, admin_key: CreatedKey
) -> None:
    h = auth(admin_key)
    dataset, _ = await golden_dataset(client, admin_key, [{"input": "q", "expected_output": "ok"}])
    with header_recorder() as (url, seen):
        body = {"name": "a", "url": url, "requestFormat": "neens", "headers": {"X-Api": SECRET}}
        conn = (await client.post("/agent-connections", json=body, headers=h)).json()["id"]
        sink = {"name": "s", "url": "http://127.0.0.1:9/h", "headers": {"X-Token": SECRET}}
        assert (await client.post("/notification-sinks", json=sink, headers=h)).status_code == 201
        judge = {
            "name": "llm", "type": "llm_prompt", "template": "{output}",
            "endpoint": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m", "apiKey": SECRET},
        }  # fmt: skip
        assert (await client.post("/judges", json=judge, headers=h)).status_code == 201
        await _push(client, admin_key, dataset, conn)
    raw = await _raw_rows(db)
    assert "sk-very-secret" not in raw
    assert raw.count("enc:") == 3, raw
    assert "X-Api" in raw, "header names stay readable"
    assert [r["x-api"] for r in seen] == [SECRET]


async def test_plaintext_rows_from_before_are_encrypted_on_start_and_still_work(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    async with app_client(settings, db) as client:
        dataset, _ = await golden_dataset(client, admin_key, [{"input": "q"}])
        with header_recorder() as (url, seen):
            body = {"name": "a", "url": url, "requestFormat": "neens"}
            r = await client.post("/agent-connections", json=body, headers=auth(admin_key))
            conn = r.json()["id"]
            async with db.write() as s:
                await s.execute(
                    text("UPDATE agent_connections SET headers = :h WHERE id = :id"),
                    {"h": '{"X-Api": "' + SECRET + '"}', "id": conn},
                )
            await _push(client, admin_key, dataset, conn)
            assert seen[-1]["x-api"] == SECRET, "a plaintext row is read as it is"
    assert "sk-very-secret" in await _raw_rows(db)
    async with app_client(settings, db) as client:
        assert "sk-very-secret" not in await _raw_rows(db), "encrypted when the server starts"
        with header_recorder() as (url, seen):
            r = await client.patch(
                f"/agent-connections/{conn}",
                json={"url": url, "headers": {"X-Api": SECRET}},
                headers=auth(admin_key),
            )
            await _push(client, admin_key, dataset, conn)
            assert seen[-1]["x-api"] == SECRET


async def test_a_wrong_key_refuses_to_start_naming_the_secret_and_what_to_do(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    async with app_client(settings, db) as client:
        body = {"name": "a", "url": "http://127.0.0.1:9/a", "headers": {"X-Api": SECRET}}
        r = await client.post("/agent-connections", json=body, headers=auth(admin_key))
        conn = r.json()["id"]
    wrong = settings.model_copy(update={"secret_keys": generate_key()})
    with pytest.raises(SecretKeyError) as caught:
        async with app_client(wrong, db):
            pass
    assert f"header 'X-Api' of agent connection {conn}" in str(caught.value)
    assert "NEENS_SECRET_KEYS" in str(caught.value)


async def test_rotation_new_key_first_reencrypt_then_drop_the_old_one(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    async with app_client(settings, db) as client:
        dataset, _ = await golden_dataset(client, admin_key, [{"input": "q"}])
        with header_recorder() as (url, _seen):
            body = {"name": "a", "url": url, "requestFormat": "neens", "headers": {"X": SECRET}}
            r = await client.post("/agent-connections", json=body, headers=auth(admin_key))
            conn = r.json()["id"]
    before = await _raw_rows(db)
    new = generate_key()
    both = settings.model_copy(update={"secret_keys": f"{new},{TEST_SECRET_KEY}"})
    db.secrets = load_secret_box(both)
    assert await reencrypt(db, rotate=True) == 1
    assert await reencrypt(db, rotate=True) == 0, "already current"
    assert await _raw_rows(db) != before
    only_new = settings.model_copy(update={"secret_keys": new})
    async with app_client(only_new, db) as client:
        with header_recorder() as (url, seen):
            async with db.write() as s:
                await s.execute(
                    text("UPDATE agent_connections SET url = :u WHERE id = :id"),
                    {"u": url, "id": conn},
                )
            await _push(client, admin_key, dataset, conn)
            assert [r["x"] for r in seen] == [SECRET]


def test_the_embedded_default_keeps_a_generated_key_in_the_home_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NEENS_SECRET_KEYS")
    settings = Settings(home=tmp_path / "home")
    first = load_secret_box(settings)
    path = tmp_path / "home" / "secret.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    sealed = first.seal("x")
    assert load_secret_box(settings).open(sealed, what="it") == "x", "the same key next start"


def test_postgresql_without_a_configured_key_refuses_with_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NEENS_SECRET_KEYS")
    settings = Settings(database_url="postgresql+psycopg://u@127.0.0.1:5432/neens")
    with pytest.raises(SecretKeyError, match="NEENS_SECRET_KEYS is required with PostgreSQL"):
        load_secret_box(settings)
    with pytest.raises(SecretKeyError, match="key #2 is not a valid key"):
        load_secret_box(settings.model_copy(update={"secret_keys": f"{generate_key()},nope"}))
