"""Fixtures for tests that drive a live server from outside the app's event loop."""

from __future__ import annotations

import asyncio

import pytest

from neens.store.db import Database
from neens.store.keys import CreatedKey, create_key


@pytest.fixture
def key(database_url: str) -> CreatedKey:
    """An ingest key in the database a `live_server` of the same test serves."""

    async def make() -> CreatedKey:
        db = Database(database_url)
        try:
            return await create_key(db, company="Acme", project="Support agent", role="ingest")
        finally:
            await db.dispose()

    return asyncio.run(make())
