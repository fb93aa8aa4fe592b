"""Fixtures for tests that drive a live server from outside the app's event loop."""

from __future__ import annotations

import asyncio

import pytest

from neens.store.db import Database
from neens.store.keys import CreatedKey, Role, create_key


def _make_key(database_url: str, role: Role) -> CreatedKey:
    async def make() -> CreatedKey:
        db = Database(database_url)
        try:
            return await create_key(db, company="Acme", project="Support agent", role=role)
        finally:
            await db.dispose()

    return asyncio.run(make())


@pytest.fixture
def key(database_url: str) -> CreatedKey:
    """An ingest key in the database a `live_server` of the same test serves."""
    return _make_key(database_url, "ingest")


@pytest.fixture
def admin_key(database_url: str, key: CreatedKey) -> CreatedKey:
    """An admin key of the same project as `key`, for configuration routes."""
    return _make_key(database_url, "admin")
