"""The suite's own hygiene: a test's app is freed once the test is over (tests/conftest.py), so a
test process does not carry every app it made into each garbage collection."""

from __future__ import annotations

import gc
import weakref

from neens.api.app import create_app
from neens.settings import Settings
from tests.conftest import forget_finished_apps


async def test_an_app_is_freed_once_the_test_is_over(database_url: str) -> None:
    app = create_app(Settings(database_url=database_url, migrate_on_start=False))
    async with app.router.lifespan_context(app):
        pass
    gone = weakref.ref(app)
    del app
    forget_finished_apps()
    gc.collect()
    assert gone() is None, [type(r).__name__ for r in gc.get_referrers(gone())]
