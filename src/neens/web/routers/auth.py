"""Sign in by pasting an API key, and sign out. The key is checked like a Bearer key
(`resolve_key`); the cookie keeps its id, never the key itself."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from neens.store.keys import resolve_key, signed_in
from neens.store.keys import sign_out as end_session
from neens.web import cookies
from neens.web.guard import (
    HOME,
    SIGN_IN,
    clear_session_cookie,
    db_of,
    read_form,
    read_session,
    safe_next,
    set_session_cookie,
)
from neens.web.render import render

router = APIRouter()


@router.get("/")
async def home() -> Response:
    return RedirectResponse(HOME, status_code=303)


@router.get("/sign-in")
async def sign_in_page(
    request: Request, next: str | None = Query(default=None, max_length=2000)
) -> Response:
    session = read_session(request)
    if session is not None and session.key_id is not None:
        if await signed_in(db_of(request), session.key_id, session.csrf) is not None:
            return RedirectResponse(safe_next(next), status_code=303)
        session = None
    if session is None:
        session = cookies.new_session(None, time.time())
    response = render(
        request, "auth/sign_in.html", None, csrf=session.csrf, next=safe_next(next), error=None
    )
    set_session_cookie(response, request, session)
    return response


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    session = read_session(request)
    form = await read_form(request, session)
    assert session is not None  # read_form refuses a post without a session
    target = safe_next(form.get("next"))
    key = form.get("key").strip()
    principal = await resolve_key(db_of(request), key) if key else None
    # resolve_key may remember a key for a few seconds; a page session starts only with a key
    # the database says is valid now.
    if principal is not None and await signed_in(db_of(request), principal.key_id) is None:
        principal = None
    if principal is None:
        return render(
            request,
            "auth/sign_in.html",
            None,
            status_code=401,
            csrf=session.csrf,
            next=target,
            error="That key is unknown or revoked. Paste an nk_live_… key; create one with "
            "`neens keys create`."
            if key
            else "Paste an API key (nk_live_…) to sign in.",
        )
    response = RedirectResponse(target, status_code=303)
    # A new CSRF token with the new identity: a token seen before sign-in is worth nothing after.
    set_session_cookie(response, request, cookies.new_session(principal.key_id, time.time()))
    return response


@router.post("/sign-out")
async def sign_out(request: Request) -> Response:
    """Ends a session with its form token; a post without a session (already expired, or
    another site's) only clears the cookie, which signs nobody out."""
    session = read_session(request)
    if session is not None and session.key_id is not None:
        await read_form(request, session)
        # Ends the session itself, not only this browser's copy of its cookie.
        ends = datetime.fromtimestamp(session.issued_at + cookies.LIFETIME_S, UTC)
        await end_session(db_of(request), session.key_id, session.csrf, ends)
    response = RedirectResponse(SIGN_IN, status_code=303)
    clear_session_cookie(response, request)
    return response
