"""`neens secrets`: making a key, rotating to it, and a clear refusal when keys are missing."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from neens.secrets import box_from_keys
from neens.store.db import Database
from tests.conftest import TEST_SECRET_KEY
from tests.e2e.test_platform_cli import neens


def _stored_headers(database_url: str) -> str:
    async def read() -> str:
        db = Database(database_url)
        try:
            async with db.read() as s:
                return str((await s.execute(text("SELECT headers FROM agent_connections"))).all())
        finally:
            await db.dispose()

    return asyncio.run(read())


def _add_connection(database_url: str) -> None:
    async def add() -> None:
        from neens.store.connections import create_connection
        from neens.store.keys import create_key

        db = Database(database_url)
        db.secrets = box_from_keys([TEST_SECRET_KEY])
        try:
            key = await create_key(db, company="Acme", project="Agent", role="admin")
            await create_connection(
                db, key.project_id, name="a", url="http://127.0.0.1:9/a", model=None,
                provider="agent_http", request_format="neens", answer_path=None,
                headers={"X-Api": "secret"},
            )  # fmt: skip
        finally:
            await db.dispose()

    asyncio.run(add())


def test_rotate_by_adding_a_new_key_first_reencrypting_and_dropping_the_old(
    database_url: str,
) -> None:
    _add_connection(database_url)
    made = neens("secrets", "generate-key")
    assert made.returncode == 0, made.stderr
    new = made.stdout.strip()
    before = _stored_headers(database_url)

    env = {"NEENS_DATABASE_URL": database_url, "NEENS_SECRET_KEYS": f"{new},{TEST_SECRET_KEY}"}
    result = neens("secrets", "reencrypt", env=env)
    assert result.returncode == 0, result.stderr
    assert "Re-encrypted 1 stored secret row(s)" in result.stderr

    after = _stored_headers(database_url)
    assert after != before and "secret'" not in after
    token = after.split("enc:")[1].split('"')[0].split("'")[0]
    assert box_from_keys([new]).open("enc:" + token, what="it") == "secret"

    wrong = neens("secrets", "reencrypt", env={**env, "NEENS_SECRET_KEYS": TEST_SECRET_KEY})
    assert wrong.returncode == 2
    assert "cannot be decrypted with NEENS_SECRET_KEYS" in wrong.stderr


def test_serve_and_worker_on_postgresql_without_a_key_refuse_to_start_saying_what_to_do() -> None:
    env = {
        "NEENS_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/none",
        "NEENS_SECRET_KEYS": "",
    }
    for command in (["serve", "--port", "1"], ["worker"]):
        result = neens(*command, env=env)
        assert result.returncode == 2, result.stderr
        assert "NEENS_SECRET_KEYS is required with PostgreSQL" in result.stderr
        assert "neens secrets generate-key" in result.stderr
        assert "Traceback" not in result.stderr
