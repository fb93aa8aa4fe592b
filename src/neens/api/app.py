"""`create_app`: builds the FastAPI application. Nothing connects or reads the environment at
import time; the database is opened (and migrated), and the span writer, the job workers and the
MCP endpoint's session manager are started, in the lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline
from starlette.responses import RedirectResponse
from starlette.routing import Route

from neens import __version__
from neens.api.errors import install_error_handlers
from neens.api.guards import require_json_content_type, require_known_query_parameters
from neens.api.middleware import (
    BodyLimitMiddleware,
    ContentEncodingMiddleware,
    ErrorEnvelopeMiddleware,
    JsonBodyMiddleware,
    MergeSlashesMiddleware,
    UnstorableParameterMiddleware,
)
from neens.api.openapi import install_openapi
from neens.api.routers import (
    agent_connections,
    datasets,
    failure_modes,
    health,
    insights,
    judges,
    logs,
    model_sweeps,
    notification_sinks,
    preprod_compare,
    preprod_evals,
    preprod_imports,
    preprod_review,
    pricing,
    scores,
    sessions,
    share_links,
    stress_test_suites,
    sweep_decisions,
    sweep_evidence,
    traces,
)
from neens.domain.pricing import load_price_table
from neens.domain.stats import wilson_interval
from neens.engine.handlers import open_worker
from neens.engine.ingest import SpanWriter
from neens.mcp.on_demand import McpOnDemand
from neens.secrets import load_secret_box
from neens.settings import Settings
from neens.store import migrate
from neens.store.db import Database
from neens.store.secrets import reencrypt
from neens.web.app import create_web_app
from neens.web.fallback import PAGES

ROUTERS = (
    health,
    datasets,
    traces,
    logs,
    # Before `sessions`: a session id may hold `/`, so `GET /sessions/{id}` takes the rest of
    # the path, and `/sessions/{id}/failure-modes` must be matched first.
    failure_modes,
    sessions,
    pricing,
    agent_connections,
    judges,
    preprod_evals,
    preprod_imports,
    preprod_review,
    preprod_compare,
    model_sweeps,
    sweep_decisions,
    sweep_evidence,
    share_links,
    stress_test_suites,
    scores,
    insights,
    notification_sinks,
)

OTLP_RECEIVERS: Final = frozenset({"/v1/traces", "/v1/logs"})
"""The OTLP/HTTP receivers: these paths read, decompress (gzip) and bound their own bodies."""


YOUNG_GENERATION_THRESHOLD = 50_000
"""Allocations between two collections of the youngest generation in `neens serve` (Python's
default is 700)."""


def _freeze_startup_heap(_: object) -> None:
    gc.collect()  # what startup left behind is freed first: frozen objects are never collected
    gc.freeze()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *gc.get_threshold()[1:])


def create_app(
    settings: Settings, *, database: Database | None = None, freeze_startup_heap: bool = False
) -> FastAPI:
    """The Neens server. Pass `database` to share one engine with the caller (tests).

    `freeze_startup_heap` (the `neens serve` process): once started, with the statistics
    libraries loaded, the objects made so far (modules, the app, the ORM's metadata: some 350,000)
    are moved out of the cyclic garbage collector's reach (`gc.freeze`). They live as long as the
    process anyway, and otherwise every full collection a request triggers rescans them all
    (about 0.3 s): a sweep comparison that builds tens of thousands of rows triggers several.
    The youngest generation is then collected every `YOUNG_GENERATION_THRESHOLD` allocations
    instead of 700: ingest makes a dozen short-lived containers a span (records, views,
    attribute dicts) that reference counting frees anyway, and collecting them 70 times more
    often cost about 6% of ingest's CPU (bench/otlp_ingest.py, paired rounds)."""
    mcp = McpOnDemand()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = database or Database(settings.resolved_database_url())
        if settings.migrate_on_start and database is None:
            await migrate.upgrade(settings.resolved_database_url())
        db.secrets = load_secret_box(settings)
        await reencrypt(db, rotate=False)
        load_price_table()
        # The statistics libraries take seconds to import: load them off the event loop now, so
        # the first comparison a caller asks for does not pay for it.
        warm_stats = asyncio.create_task(asyncio.to_thread(wilson_interval, 1, 2))
        if freeze_startup_heap:
            warm_stats.add_done_callback(_freeze_startup_heap)
        writer = SpanWriter(db)
        writer.start()
        async with open_worker(db, settings) as worker:
            app.state.db = db
            app.state.span_writer = writer
            app.state.worker = worker
            stop = asyncio.Event()
            worker_task = (
                asyncio.create_task(worker.run(stop), name="neens-worker")
                if settings.workers_in_process
                else None
            )
            try:
                async with mcp.running():
                    yield
            finally:
                stop.set()
                if worker_task is not None:
                    worker.notify()
                    with contextlib.suppress(asyncio.CancelledError):
                        await worker_task
                await writer.stop()
                await warm_stats  # a thread cannot be cancelled; it is done long before this
                if database is None:
                    await db.dispose()

    # /docs and /redoc serve their scripts from an installed package: they work offline.
    app = FastAPIOffline(
        title="Neens",
        version=__version__,
        summary="Which version of your LLM agent is safe to ship, and which model to run it on.",
        lifespan=lifespan,
        dependencies=[
            Depends(require_known_query_parameters),
            Depends(require_json_content_type),
        ],
    )
    app.state.settings = settings
    install_error_handlers(app)
    install_openapi(app)
    for module in ROUTERS:
        app.include_router(module.router)
    # MCP over streamable HTTP, behind the same Bearer key (docs/mcp.md); not an OpenAPI route.
    app.router.routes.append(
        Route("/mcp", mcp, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    )
    # The pages, under /ui/ where no API route is (docs/pages.md); not OpenAPI routes either.
    app.router.routes.append(
        Route("/ui", lambda _: RedirectResponse("/ui/", status_code=308), include_in_schema=False)
    )
    app.mount("/ui", create_web_app(app.state))
    # Innermost first: each add wraps the ones before it.
    app.add_middleware(JsonBodyMiddleware, own_decoders=OTLP_RECEIVERS)
    app.add_middleware(ContentEncodingMiddleware, decoders=OTLP_RECEIVERS)
    app.add_middleware(UnstorableParameterMiddleware, pages=PAGES)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    app.add_middleware(ErrorEnvelopeMiddleware)
    app.add_middleware(MergeSlashesMiddleware)
    return app
