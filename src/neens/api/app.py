"""`create_app`: builds the FastAPI application. Nothing connects or reads the environment at
import time; the database is opened (and migrated) in the lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from neens import __version__
from neens.api.errors import install_error_handlers
from neens.api.routers import datasets, health, pricing, sessions, traces
from neens.settings import Settings
from neens.store import migrate
from neens.store.db import Database


def create_app(settings: Settings, *, database: Database | None = None) -> FastAPI:
    """The Neens server. Pass `database` to share one engine with the caller (tests)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = database or Database(settings.resolved_database_url())
        if settings.migrate_on_start and database is None:
            await migrate.upgrade(settings.resolved_database_url())
        app.state.db = db
        try:
            yield
        finally:
            if database is None:
                await db.dispose()

    app = FastAPI(
        title="Neens",
        version=__version__,
        summary="Which version of your LLM agent is safe to ship, and which model to run it on.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    install_error_handlers(app)
    for module in (health, datasets, traces, sessions, pricing):
        app.include_router(module.router)
    return app
