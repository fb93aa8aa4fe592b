"""Who is signed in, checked on every request, and the checks every form post passes.

- The cookie (`cookies`) names a key id; the key is read from the database on every request
  (`store.keys.signed_in`), so a revoked key signs its page sessions out at their next request,
  and its role and project are always the current ones.
- CSRF: every form carries the session's random token (`csrf_token`), compared in constant time
  with the one in the signed cookie; the sign-in form too, with a token set before sign-in, so a
  foreign page cannot sign a browser in with the attacker's key. On top of that, a post whose
  `Origin` header names another host (or `null`) is refused, and the cookie is `SameSite=Lax`,
  which browsers do not send with a cross-site post at all.
- `next` after sign-in is only ever a path under `/ui/` (`safe_next`): never another host.
"""

from __future__ import annotations

import hmac
import posixpath
import re
import time
import unicodedata
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from fastapi import Request
from starlette.datastructures import State
from starlette.responses import Response

from neens.queue.worker import Worker
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import Principal, SignedIn, signed_in
from neens.web import cookies
from neens.web.cookies import PageSession

PREFIX = "/ui"
HOME = f"{PREFIX}/preprod-evals"
SIGN_IN = f"{PREFIX}/sign-in"
FORM_TYPE = "application/x-www-form-urlencoded"
MAX_FORM_FIELDS = 1000


class SignInRequired(Exception):
    """No valid session: the page answers a redirect to sign in, back to `next_path` after."""

    def __init__(self, next_path: str, *, clear: bool) -> None:
        super().__init__(next_path)
        self.next_path = next_path
        self.clear = clear
        """Whether the cookie held a session that is no longer valid (revoked key, expired)."""


class FormRefused(Exception):
    """A form post that failed the CSRF or Origin check (403)."""


@dataclass(frozen=True, slots=True)
class Viewer:
    """The signed-in key: what each page is rendered for."""

    who: SignedIn
    session: PageSession

    @property
    def principal(self) -> Principal:
        return self.who.principal

    @property
    def is_admin(self) -> bool:
        return self.who.principal.role == "admin"

    @property
    def csrf(self) -> str:
        return self.session.csrf


def shared(request: Request) -> State:
    """The API application's state (database, settings, worker), shared with the pages."""
    state: State = request.app.state.shared
    return state


def db_of(request: Request) -> Database:
    db: Database = shared(request).db
    return db


def settings_of(request: Request) -> Settings:
    settings: Settings = shared(request).settings
    return settings


def worker_of(request: Request) -> Worker:
    worker: Worker = shared(request).worker
    return worker


def signing_keys(request: Request) -> list[bytes]:
    """The cookie keys (derived once per secret box, which a server keeps for its lifetime)."""
    return db_of(request).secrets.derived_keys(cookies.PURPOSE)


def read_session(request: Request) -> PageSession | None:
    return cookies.decode(request.cookies.get(cookies.COOKIE), signing_keys(request), time.time())


def _here(request: Request) -> str:
    path = request.url.path
    return f"{path}?{request.url.query}" if request.url.query else path


async def current_viewer(request: Request) -> Viewer:
    """The dependency of every page but sign-in: the signed-in key, read again now."""
    session = read_session(request)
    if session is None or session.key_id is None:
        stale = session is None and cookies.COOKIE in request.cookies
        raise SignInRequired(_here(request), clear=stale)
    who = await signed_in(db_of(request), session.key_id, session.csrf)
    if who is None:
        raise SignInRequired(_here(request), clear=True)
    return Viewer(who, session)


def is_secure(request: Request) -> bool:
    public = settings_of(request).public_url or ""
    return request.url.scheme == "https" or public.startswith("https://")


def set_session_cookie(response: Response, request: Request, session: PageSession) -> None:
    response.set_cookie(
        cookies.COOKIE,
        cookies.encode(session, signing_keys(request)[0]),
        max_age=cookies.LIFETIME_S,
        path=PREFIX,
        secure=is_secure(request),
        httponly=True,
        samesite="lax",
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(
        cookies.COOKIE, path=PREFIX, secure=is_secure(request), httponly=True, samesite="lax"
    )


def safe_next(value: str | None) -> str:
    """Where to go after sign-in: `value` when it is a path of these pages, else the home page.

    Refused: anything with a scheme or a host (`https://evil`, `//evil`), backslashes (which
    browsers read as slashes), control characters, and paths outside `/ui/` once dot segments
    are resolved (`/ui/..//evil` reads as `//evil`). Browsers read `%2e` as a dot in a path and
    some servers `%2f` as a slash, so an encoded dot, slash or backslash in the path, at any
    depth of encoding, is refused too: no page path needs one."""
    if not value or _unsafe_text(value):
        return HOME
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or value.startswith("//"):
        return HOME
    decoded = _decoded_path(parts.path)
    if decoded is None or _unsafe_text(decoded):
        return HOME
    for path in (parts.path, decoded):
        resolved = posixpath.normpath(path) + ("/" if path.endswith("/") else "")
        if not resolved.startswith(f"{PREFIX}/") or resolved.startswith(SIGN_IN):
            return HOME
    return value


_ENCODED_SEPARATOR = re.compile(r"%(2e|2f|5c)", re.IGNORECASE)
_MAX_DECODINGS = 4


def _unsafe_text(text: str) -> bool:
    """Backslashes and control characters (C0, DEL, C1), which browsers drop or read as `/`."""
    return "\\" in text or any(unicodedata.category(c) == "Cc" for c in text)


def _decoded_path(path: str) -> str | None:
    """`path` percent-decoded until it no longer changes; None when some layer holds an encoded
    dot, slash or backslash, or it keeps changing."""
    for _ in range(_MAX_DECODINGS):
        if _ENCODED_SEPARATOR.search(path):
            return None
        decoded = unquote(path)
        if decoded == path:
            return path
        path = decoded
    return None


@dataclass(frozen=True, slots=True)
class Form:
    fields: dict[str, list[str]]

    def get(self, name: str, default: str = "") -> str:
        values = self.fields.get(name)
        return values[-1] if values else default

    def getlist(self, name: str) -> list[str]:
        return list(self.fields.get(name, []))


DEFAULT_PORTS = {"http": 80, "https": 443}


def _host_port(netloc: str, scheme: str) -> tuple[str, int | None]:
    try:
        parts = urlsplit(f"//{netloc}")
        return (parts.hostname or "", parts.port or DEFAULT_PORTS.get(scheme))
    except ValueError:  # a port that is not a number
        return ("", None)


def _origin_allowed(request: Request) -> bool:
    """Whether the post's `Origin` names this server: the host it was sent to (`Host`), or
    `NEENS_PUBLIC_URL`'s; a default port written or not is the same origin."""
    origin = request.headers.get("origin")
    if origin is None:
        return True  # older browsers omit it on same-origin posts; the token still decides
    parts = urlsplit(origin)
    if origin == "null" or parts.scheme not in DEFAULT_PORTS or not parts.netloc:
        return False
    sent_from = _host_port(parts.netloc.lower(), parts.scheme)
    allowed = {_host_port(request.headers.get("host", "").lower(), parts.scheme)}
    public = settings_of(request).public_url
    if public:
        url = urlsplit(public)
        allowed.add(_host_port(url.netloc.lower(), url.scheme))
    return sent_from in allowed


async def read_form(request: Request, session: PageSession | None) -> Form:
    """The posted form, once its Origin and CSRF token have been checked against `session`."""
    if not _origin_allowed(request):
        raise FormRefused("this form was posted from another site")
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != FORM_TYPE:
        raise FormRefused(f"a form is posted as {FORM_TYPE}")
    try:
        text = (await request.body()).decode("utf-8")
        fields = parse_qs(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise FormRefused("the form could not be read") from None
    form = Form(fields)
    token = form.get("csrf_token")
    if (
        session is None
        or not token.isascii()
        or not token
        or not hmac.compare_digest(token, session.csrf)
    ):
        raise FormRefused(
            "this form is out of date or was not sent by this site: reload the page and send it "
            "again"
        )
    return form
