"""`neens serve` builds its app with `freeze_startup_heap`: once started, with the statistics
libraries loaded, what startup made is moved out of the cyclic garbage collector's reach, so a
request that builds many objects (a sweep comparison) does not rescan it on every full
collection, and the youngest generation is collected less often. The app the tests build does
not touch the collector unless asked."""

from __future__ import annotations

import asyncio
import gc
import sys
import time

from neens.api.app import YOUNG_GENERATION_THRESHOLD, create_app
from neens.settings import Settings
from neens.store.db import Database


async def test_the_served_app_freezes_what_startup_made_once_the_stats_libraries_are_loaded(
    settings: Settings, db: Database
) -> None:
    gc.unfreeze()
    thresholds = gc.get_threshold()
    app = create_app(settings, database=db, freeze_startup_heap=True)
    try:
        async with app.router.lifespan_context(app):
            deadline = time.monotonic() + 60
            while gc.get_freeze_count() == 0:
                assert time.monotonic() < deadline, "startup froze nothing"
                await asyncio.sleep(0.05)
            assert "statsmodels.stats.proportion" in sys.modules, "frozen after the stats load"
            frozen = gc.get_freeze_count()
            assert frozen > 10_000
            assert gc.get_threshold() == (YOUNG_GENERATION_THRESHOLD, *thresholds[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


async def test_an_app_not_asked_to_freeze_leaves_the_collector_alone(
    settings: Settings, db: Database
) -> None:
    gc.unfreeze()
    thresholds = gc.get_threshold()
    app = create_app(settings, database=db)
    async with app.router.lifespan_context(app):
        deadline = time.monotonic() + 60
        while "statsmodels.stats.proportion" not in sys.modules:
            assert time.monotonic() < deadline, "the stats libraries never loaded"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # past the moment a served app would freeze
        assert gc.get_freeze_count() == 0
        assert gc.get_threshold() == thresholds
