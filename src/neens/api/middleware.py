"""Guards every request passes before any route sees it, as plain ASGI middleware.

They sit outside FastAPI's routing so that no route can forget them:

- `ErrorEnvelopeMiddleware` answers any exception that escaped the routes with the JSON error
  shape and an error id, and logs the traceback under that id (Starlette's own fallback answers
  plain text and keeps nothing a user can quote back to the operator). Under the pages (`/ui`)
  the same answer is a page, as is the 413 of `BodyLimitMiddleware`.
- `BodyLimitMiddleware` counts the bytes of every request body against
  `NEENS_MAX_REQUEST_BYTES` while they arrive, so an oversized body is refused with 413 before
  it is held in memory; a declared `Content-Length` over the cap is refused before reading.
- `JsonBodyMiddleware` refuses JSON bodies nested deeper than `MAX_JSON_DEPTH` with 400 before
  they are parsed (Python's parser and pydantic recurse per level, and a few thousand levels
  raise RecursionError), and bodies that give a key twice in one object (which value counts
  depends on the reader).
- `UnstorableParameterMiddleware` refuses a NUL character in the path (404: no id holds one) or
  in a query parameter (422 naming it): PostgreSQL cannot compare text holding NUL at all. The
  pages refuse it the same way, as a page.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from itertools import accumulate

from neens_eval.strict_json import DuplicateKey, no_duplicate_keys
from starlette.datastructures import Headers, QueryParams
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from neens.api.body import too_large
from neens.api.errors import error_body
from neens.api.guards import is_json_media_type
from neens.domain.storable import MAX_JSON_DEPTH, safe_label
from neens.errors import (
    InvalidInput,
    NeensError,
    NotFound,
    PayloadTooLarge,
    Unprocessable,
    UnsupportedMediaType,
)
from neens.store.busy import RETRY_AFTER_S, busy_database_reason
from neens.web.fallback import fallback_page, is_page_path

log = logging.getLogger("neens.api")


async def send_error(exc: NeensError, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer `exc` in the one error shape, straight from a middleware; under the pages, as a
    page saying the same."""
    response: Response
    if is_page_path(scope["path"]):
        response = fallback_page(exc.status_code, exc.message)
    else:
        response = JSONResponse(error_body(exc.code, exc.message, exc.field), exc.status_code)
    await response(scope, receive, send)


def new_error_id() -> str:
    return f"err_{secrets.token_hex(8)}"


class HttpMiddleware:
    """An ASGI middleware that guards HTTP requests and passes every other scope straight on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


_REPEATED_SLASHES = re.compile("//+")
_REPEATED_SLASHES_RAW = re.compile(b"//+")


class MergeSlashesMiddleware(HttpMiddleware):
    """A path with repeated slashes is the path with single ones, as web servers merge them:
    `NEENS_BASE_URL=http://host/` followed by `/v1/traces` makes `//v1/traces`, which would
    otherwise be a 404 an OpenTelemetry exporter only logs, losing every span."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if "//" in path:
            scope = {
                **scope,
                "path": _REPEATED_SLASHES.sub("/", path),
                "raw_path": _REPEATED_SLASHES_RAW.sub(b"/", scope.get("raw_path") or b""),
            }
        await self.app(scope, receive, send)


class ErrorEnvelopeMiddleware(HttpMiddleware):
    """The last line: an unexpected exception becomes a 500 with an error id that is in the log."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if not started and (reason := busy_database_reason(exc)) is not None:
                await self._busy(scope, receive, send, reason)
                return
            error_id = new_error_id()
            log.exception(
                "internal error %s answering %s %s",
                error_id,
                scope.get("method"),
                scope.get("path"),
            )
            if started:
                raise  # the server closes the connection; the log line has the id
            message = (
                f"the server failed on this request (error id {error_id}); retry, and if it "
                "fails again give this id to whoever runs this Neens server"
            )
            if is_page_path(scope["path"]):
                await fallback_page(500, message)(scope, receive, send)
                return
            body = error_body("internal_error", message)
            body["error"]["errorId"] = error_id
            await JSONResponse(body, status_code=500)(scope, receive, send)

    @staticmethod
    async def _busy(scope: Scope, receive: Receive, send: Send, reason: str) -> None:
        """503 with `Retry-After`: the database was busy or out of reach, not the request wrong."""
        log.warning(
            "database busy answering %s %s: %s (answered 503, retry after %d s)",
            scope.get("method"),
            scope.get("path"),
            reason,
            RETRY_AFTER_S,
        )
        message = (
            f"the database is busy or out of reach ({safe_label(reason, 200)}); retry the "
            f"request in {RETRY_AFTER_S} s"
        )
        headers = {"Retry-After": str(RETRY_AFTER_S)}
        if is_page_path(scope["path"]):
            page = fallback_page(503, message)
            page.headers.update(headers)
            await page(scope, receive, send)
            return
        body = error_body("unavailable", message)
        await JSONResponse(body, status_code=503, headers=headers)(scope, receive, send)


class _BodyTooLarge(PayloadTooLarge):
    """Raised from `receive` once the body passed the cap; whatever the app answers is dropped."""


class BodyLimitMiddleware(HttpMiddleware):
    """Every request body, on every route, is capped at `max_bytes` as it arrives."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await send_error(too_large(self.max_bytes), scope, receive, send)
            return
        received = 0
        over = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    over = True
                    raise _BodyTooLarge(too_large(self.max_bytes).message)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if over:
                return  # the app answered a body it could not read whole; 413 replaces it
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not over or started:
                raise
        if over and not started:
            await send_error(too_large(self.max_bytes), scope, receive, send)


# A JSON string, escapes included; possessive so an unterminated string cannot backtrack.
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_DEPTH_STEP = [0] * 256
for _open in b"[{":
    _DEPTH_STEP[_open] = 1
for _close in b"]}":
    _DEPTH_STEP[_close] = -1
_CHUNK = 1 << 16


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether `body`'s objects and arrays nest deeper than `limit`, without parsing it.

    Strings are cut out first (a bracket inside one is text), then only brackets are kept and
    their running depth is followed a chunk at a time, stopping at the first chunk too deep.
    """
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    depth = 0
    for start in range(0, len(brackets), _CHUNK):
        steps = accumulate(
            map(_DEPTH_STEP.__getitem__, brackets[start : start + _CHUNK]), initial=depth
        )
        running = list(steps)
        if max(running) > limit:
            return True
        depth = running[-1]
    return False


class JsonBodyMiddleware(HttpMiddleware):
    """JSON bodies nested deeper than `MAX_JSON_DEPTH` are a clean 400 before parsing, and so
    are bodies that give a key twice in one object: JSON readers disagree on which value counts
    (Python's keeps the last), so `{"items": [a], "items": [b, c]}` would drop `a` unsaid. A
    declared charset other than UTF-8 is a 415: JSON is exchanged in UTF-8, and the body would
    otherwise be read as UTF-8 anyway.

    Paths in `own_decoders` read and bound their bodies themselves (OTLP, possibly gzip).
    """

    def __init__(
        self,
        app: ASGIApp,
        max_depth: int = MAX_JSON_DEPTH,
        own_decoders: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(app)
        self.max_depth = max_depth
        self.own_decoders = own_decoders

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        if (
            scope["path"] in self.own_decoders
            or not is_json_media_type(headers.get("content-type", ""))
            or headers.get("content-encoding", "identity").strip().lower() not in ("", "identity")
        ):
            await self.app(scope, receive, send)
            return
        charset = _charset(headers.get("content-type", ""))
        if charset is not None and charset not in ("utf-8", "utf8"):
            refusal = UnsupportedMediaType(
                f"this route reads JSON in UTF-8 (as JSON is exchanged), not charset={charset}; "
                "send the body as UTF-8 with Content-Type: application/json",
                field="Content-Type",
            )
            await send_error(refusal, scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay(message, receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if json_depth_exceeds(body, self.max_depth):
            error = InvalidInput(
                f"request body nests objects and arrays more than {self.max_depth} levels deep; "
                "flatten it"
            )
            await send_error(error, scope, receive, send)
            return
        if (twice := _key_given_twice(body)) is not None:
            error = InvalidInput(
                f"request body gives the key {safe_label(twice)} twice in one object; give each "
                "key once",
                field=twice,
            )
            await send_error(error, scope, receive, send)
            return
        await self.app(scope, _replay({"type": "http.request", "body": body}, receive), send)


def _charset(content_type: str) -> str | None:
    """The `charset` parameter of a Content-Type, lower-cased and unquoted, or None."""
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


def _key_given_twice(body: bytes) -> str | None:
    """The first key some object of `body` gives twice, or None; a body that is not JSON is
    left for the route to refuse in its own words."""
    try:
        json.loads(body, object_pairs_hook=no_duplicate_keys)
    except DuplicateKey as exc:
        return exc.key
    except (ValueError, RecursionError):
        return None
    return None


class ContentEncodingMiddleware(HttpMiddleware):
    """A body with a Content-Encoding is a 415 naming the header, except on the paths in
    `decoders`, which decode their own (OTLP, gzip): elsewhere an encoded body would be read as
    if it were not, and a plain body labelled gzip would be taken as it is."""

    def __init__(self, app: ASGIApp, *, decoders: frozenset[str]) -> None:
        super().__init__(app)
        self.decoders = decoders

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        encoding = headers.get("content-encoding", "identity").strip().lower()
        has_body = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
        if encoding in ("", "identity") or not has_body or scope["path"] in self.decoders:
            await self.app(scope, receive, send)
            return
        error = UnsupportedMediaType(
            f"Content-Encoding {encoding!r} is not read here: send the body unencoded (only "
            f"{', '.join(sorted(self.decoders))} read gzip)",
            field="Content-Encoding",
        )
        await send_error(error, scope, receive, send)


def _replay(first: Message, receive: Receive) -> Receive:
    """A `receive` that hands out `first`, then defers to the server's own."""
    pending: list[Message] = [first]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


def unstorable_parameter(scope: Scope) -> NeensError | None:
    """A NUL character in the path (404: no id holds one) or in a query parameter (422 naming
    it); None when the request has none."""
    if "\x00" in scope["path"]:
        return NotFound("no resource here: the path holds a NUL character (%00)")
    for name, value in QueryParams(scope.get("query_string", b"")).multi_items():
        if "\x00" in name or "\x00" in value:
            field = name.replace("\x00", "\\x00")
            return Unprocessable(
                f"{field} holds a NUL character (%00), which no value can contain; remove it",
                field=field,
            )
    return None


class UnstorableParameterMiddleware(HttpMiddleware):
    """A NUL character in the path is a 404 and in a query parameter a 422 naming it, in the
    JSON error shape; paths under `pages` are left to the pages, which answer the same as a
    page (`neens.web.app`)."""

    def __init__(self, app: ASGIApp, *, pages: str | None = None) -> None:
        super().__init__(app)
        self.pages = pages

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if self.pages and (path == self.pages or path.startswith(f"{self.pages}/")):
            await self.app(scope, receive, send)
            return
        error = unstorable_parameter(scope)
        if error is not None:
            await send_error(error, scope, receive, send)
            return
        await self.app(scope, receive, send)
