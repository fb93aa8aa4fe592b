"""What a browser gets under `/ui` when the pages' own error handling is never reached: a form
body over the size cap (refused while it arrives) and an unexpected failure (even of the
templates themselves) are answered as pages with the pages' security headers, not as the API's
JSON; the API keeps answering JSON for the same causes."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.routing import Mount

from neens.api.app import create_app
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.conftest import auth

CAP = 4_096


class _BrokenTemplates:
    """Every template fails to load: the page fails, and so does the pages' own error page."""

    def get_template(self, name: str) -> Any:
        raise RuntimeError(f"template {name} is unreadable")


@pytest.fixture
async def neens(settings: Settings, db: Database) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    app = create_app(settings.model_copy(update={"max_request_bytes": CAP}), database=db)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            yield app, c


def _is_page(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text[:300]
    assert r.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert r.headers["x-frame-options"] == "DENY"
    assert '<a href="/ui/">Back to Neens</a>' in r.text
    return r.text


async def test_a_form_over_the_size_cap_is_a_page_and_the_api_still_answers_json(
    neens: tuple[Any, httpx.AsyncClient], ingest_key: CreatedKey
) -> None:
    _, client = neens
    big = {"key": "x" * (2 * CAP)}
    declared = await client.post("/ui/sign-in", data=big)
    text = _is_page(declared, 413)
    assert f"over the {CAP}-byte limit" in text

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(4):
            yield b"key=" + b"x" * CAP

    streamed = await client.post(
        "/ui/sign-in",
        content=chunks(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    _is_page(streamed, 413)

    api = await client.post("/datasets", json=big, headers=auth(ingest_key))
    assert api.status_code == 413
    assert api.json()["error"]["code"] == "payload_too_large"


async def test_an_unexpected_failure_under_ui_is_a_page_with_the_logged_error_id(
    neens: tuple[Any, httpx.AsyncClient], caplog: pytest.LogCaptureFixture
) -> None:
    app, client = neens
    [pages] = [r.app for r in app.routes if isinstance(r, Mount) and r.path == "/ui"]
    pages.state.templates = _BrokenTemplates()
    with caplog.at_level(logging.ERROR, logger="neens.api"):
        r = await client.get("/ui/sign-in")
    text = _is_page(r, 500)
    found = re.search(r"error id (err_[0-9a-f]{16})", text)
    assert found is not None, text
    assert "unreadable" not in text  # the cause stays in the log
    logged = [rec for rec in caplog.records if found.group(1) in rec.getMessage()]
    assert len(logged) == 1 and "unreadable" in str(logged[0].exc_info[1])  # type: ignore[index]


async def test_markup_in_a_fallback_message_is_text() -> None:
    from neens.web.fallback import fallback_page

    page = fallback_page(500, "<script>alert(1)</script>")
    assert b"<script>" not in page.body
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in page.body
