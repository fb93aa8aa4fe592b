"""The single JSON error shape: `{"error": {"code", "message", "field"?}}`.

Every error body Neens sends is built here (or, for the guards that run before routing, by
`neens.api.middleware` with `error_body`), so clients parse one shape whatever failed. A request
with several invalid fields also carries `errors`, one `{field, message}` per problem; an
unexpected failure (500) carries `errorId`, the id its traceback is logged under.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from neens.api.access import access_refusal
from neens.api.id_shapes import wrong_shape_refusal
from neens.api.schemas.base import LocatedValueError, error_message
from neens.domain.storable import safe_label
from neens.errors import NeensError

HTTP_CODES = {
    400: "invalid_input",
    401: "not_authenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "unprocessable",
}


class FieldProblem(BaseModel):
    """One problem of a request that has several."""

    field: str | None = Field(
        default=None, description="The field, parameter or header at fault, if one is."
    )
    message: str = Field(description="What is wrong with it and what to do.")


class ErrorDetail(BaseModel):
    """What went wrong."""

    model_config = ConfigDict(populate_by_name=True)

    code: str = Field(
        description="Stable machine-readable code: invalid_input, not_authenticated, forbidden, "
        "not_found, method_not_allowed, conflict, payload_too_large, unsupported_media_type, "
        "unprocessable or internal_error."
    )
    message: str = Field(description="What is wrong and, where there is one, what to do.")
    field: str | None = Field(
        default=None,
        description="The field, parameter or header at fault (the first one when there are "
        "several), in the request's own spelling with list positions in brackets.",
    )
    errors: list[FieldProblem] | None = Field(
        default=None, description="Every problem, when the request has more than one."
    )
    error_id: str | None = Field(
        default=None,
        alias="errorId",
        description="On a 500: the id the server logged the failure under; quote it when "
        "reporting the problem.",
    )


class ErrorEnvelope(BaseModel):
    """The one shape of every error answer."""

    error: ErrorDetail = Field(description="The error: its code, its message and what is at fault.")


MAX_PROBLEMS_IN_MESSAGE = 10
"""A message names this many problems; `errors` lists up to `MAX_LISTED_PROBLEMS`."""
MAX_LISTED_PROBLEMS = 100


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["field"] = field
    return {"error": error}


_NO_BODY: Any = object()
"""`field_path`'s body when there is none to walk (a query, path or header parameter)."""

_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff]")

_BRANCH_SPELLING: Final = re.compile(
    r"none|str|int|float|bool|bytes|url|constrained-str|[a-z][a-z-]*\[.*\]", re.DOTALL
)
"""How pydantic names the branch of a union it tried: `none`, `str`, `constrained-str`,
`function-after[check(), dict[str,str]]`, `list[ComponentIn]` (only looked at when there is no
body to tell a branch from a field)."""


def field_path(loc: Sequence[Any], body: Any = _NO_BODY, *, kind: str | None = None) -> str:
    """pydantic's location tuple as a path a person reads: `items[3].input`.

    A union adds the branch it tried to the location: its tag for a tagged union
    (`managed.check`), else the branch's schema (`name.function-after[…]`, `name.none`,
    `components.list[ComponentIn][0]`). Walking the request body alongside tells a branch from
    a field: a field is a key of the object it is in (or, for a `missing` error, the last part),
    an index is a position in a list, and anything else is a branch, left out. Without a body
    (a parameter), a part after the first that is spelled as pydantic names a branch is left
    out. `kind` is the error's type.
    """
    return _render(_located(loc, body, kind)[0])


def _located(loc: Sequence[Any], body: Any, kind: str | None) -> tuple[list[Any], Any]:
    """`field_path`'s parts, and the value of the body they lead to (`_NO_BODY` without one)."""
    rest = list(loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc)
    if kind == "none_required" and rest and rest[-1] == "none" and len(rest) > 1:
        rest.pop()  # the None branch of an optional union, even when the object has a "none" key
    parts: list[Any] = []
    current = _NO_BODY if body is None else body
    for index, part in enumerate(rest):
        if current is _NO_BODY:
            if not (parts and isinstance(part, str) and _BRANCH_SPELLING.fullmatch(part)):
                parts.append(part)
        elif isinstance(current, dict) and isinstance(part, str):
            if part not in current and "\ufffd" in part:
                part = _key_sent(current, part)
            if part in current:
                parts.append(part)
                current = current[part]
            elif kind == "missing" and index == len(rest) - 1:
                parts.append(part)
            # Else a tagged union's tag (a value of the object) or a branch: left out.
        elif isinstance(part, int):
            parts.append(part)
            in_list = isinstance(current, list) and 0 <= part < len(current)
            current = current[part] if in_list else None
        # Else the branch tried for a list or a scalar: left out.
    return parts, current


def _render(parts: Sequence[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            if _UNSTORABLE.search(text):  # a key sent with one: escaped, so the answer encodes
                text = ascii(text)[1:-1]
            out += f".{text}" if out else text
    return out


def _key_sent(obj: dict[Any, Any], located: str) -> str:
    """The key of `obj` that pydantic located as `located`: it spells a key holding a lone
    surrogate with U+FFFD, as UTF-8 decoding with replacement does."""
    for key in obj:
        if isinstance(key, str) and _UNSTORABLE.search(key):
            if key.encode("utf-8", "surrogatepass").decode("utf-8", "replace") == located:
                return key
    return located


def _validation_message(err: dict[str, Any], path: str) -> str:
    kind = err.get("type")
    if kind == "missing":
        return f"{path} is required"
    if kind == "extra_forbidden":
        return f"{path} is not a known field"
    if not path and kind in ("model_attributes_type", "model_type", "dict_type"):
        return "request body must be a JSON object"
    message = error_message(err)
    return f"{path}: {message}" if path else message


def _json_position_message(err: dict[str, Any], doc: Any) -> str:
    """`Expecting ',' delimiter at line 2, column 5 (char 17)`, as json reports it."""
    ctx = err.get("ctx")
    reason = str(ctx.get("error", "")) if isinstance(ctx, dict) else ""
    loc = err.get("loc", ())
    pos = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
    if pos is None or not isinstance(doc, str):
        return f"request body is not valid JSON: {reason}".rstrip(": ")
    line = doc.count("\n", 0, pos) + 1
    column = pos - doc.rfind("\n", 0, pos)
    return (
        f"request body is not valid JSON: {reason or 'syntax error'} "
        f"at line {line}, column {column} (char {pos})"
    )


def _required_fields(request: Request) -> list[str]:
    """The required top-level fields of the route's JSON body, as the client spells them."""
    route = request.scope.get("route")
    body_field = getattr(route, "body_field", None)
    field_info = getattr(body_field, "field_info", None)
    model = getattr(field_info, "annotation", None)
    fields = getattr(model, "model_fields", None)
    if not isinstance(fields, dict):
        return []
    return [info.alias or name for name, info in fields.items() if info.is_required()]


def _problem(err: dict[str, Any], body: Any) -> tuple[str, str]:
    """One validation error as (field, message)."""
    loc = err.get("loc", ())
    kind = err.get("type")
    parts, current = _located(loc, body if loc and loc[0] == "body" else _NO_BODY, kind)
    key = err.get("input")
    if (
        kind == "string_unicode"
        and isinstance(key, str)
        and isinstance(current, dict)
        and key in current
    ):
        # pydantic locates an unknown key it cannot read at the object that has it: name the key.
        parts = [*parts, key]
    ctx = err.get("ctx")
    error = ctx.get("error") if isinstance(ctx, dict) else None
    if isinstance(error, LocatedValueError):
        parts = [*parts, *error.where]
    path = _render(parts)
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        ctx = err.get("ctx")
        tag = str(ctx.get("discriminator", "") if isinstance(ctx, dict) else "").strip("'")
        path = f"{path}.{tag}" if path else tag
    return path, _validation_message(err, path)


def validation_error_body(
    request: Request, exc: RequestValidationError
) -> tuple[int, dict[str, Any]]:
    """Every problem of the request, each with its field; `field` is the first one's."""
    errors = list(exc.errors()) or [{"loc": (), "msg": "invalid request"}]
    first = errors[0]
    if first.get("type") == "json_invalid":
        return 400, error_body(HTTP_CODES[400], _json_position_message(first, exc.body))
    if first.get("type") == "missing" and tuple(first.get("loc", ())) == ("body",):
        required = _required_fields(request)
        names = ", ".join(required)
        message = (
            f"the request body is empty: send a JSON object with {names}"
            if required
            else "the request body is empty: send a JSON object"
        )
        return 422, error_body(HTTP_CODES[422], message, required[0] if required else "body")
    return 422, problems_body(errors, exc.body)


def problems_body(errors: Sequence[Any], body: Any) -> dict[str, Any]:
    """The 422 error body of a request body's validation errors (pydantic's `errors()`, located
    under `body`): every problem with its field; `field` is the first one's."""
    problems = _merged_problems(errors, body)
    message = "; ".join(message for _, message in problems[:MAX_PROBLEMS_IN_MESSAGE])
    if len(problems) > MAX_PROBLEMS_IN_MESSAGE:
        listed = min(len(problems), MAX_LISTED_PROBLEMS)
        message += (
            f"; and {len(problems) - MAX_PROBLEMS_IN_MESSAGE} more problems "
            f"({listed} of {len(problems)} listed in errors)"
        )
    out = error_body(HTTP_CODES[422], message, problems[0][0] or None)
    if len(problems) > 1:
        out["error"]["errors"] = [
            {"field": field or None, "message": message}
            for field, message in problems[:MAX_LISTED_PROBLEMS]
        ]
    return out


def _merged_problems(errors: Sequence[Any], body: Any) -> list[tuple[str, str]]:
    """Each problem once: a field that fails every branch of an optional union (`X | None`) is
    reported by its other branch's message alone, not also with "Input should be None", and a
    problem pydantic reports twice (once per branch tried) is listed once."""
    located = [(err.get("type"), _problem(err, body)) for err in errors]
    if not located:
        return [("", "invalid request")]
    others = [problem[0] for kind, problem in located if kind != "none_required"]
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for kind, problem in located:
        if (kind == "none_required" and _within_any(problem[0], others)) or problem in seen:
            continue
        seen.add(problem)
        problems.append(problem)
    return problems


def _within_any(path: str, others: list[str]) -> bool:
    """Whether another problem is at `path` or inside it (`components[0].judgeId`)."""
    return any(
        other == path or other.startswith((f"{path}.", f"{path}[")) or not path for other in others
    )


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def _allowed_methods(request: Request) -> str | None:
    """Every method the path answers to: Starlette names only the first route that matched."""
    routes = request.app.router.routes
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes
        )
    ]
    return ", ".join(allowed) or None


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(NeensError)
    async def _neens_error(_: Request, exc: NeensError) -> JSONResponse:
        return JSONResponse(
            error_body(exc.code, exc.message, exc.field), status_code=exc.status_code
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, body = validation_error_body(request, exc)
        # A body that is not JSON at all is found before the route checks the key
        # (`api.access`): the key's problem is the answer when it has one.
        if status == 400 and (refusal := await access_refusal(request)) is not None:
            return JSONResponse(
                error_body(refusal.code, refusal.message, refusal.field), refusal.status_code
            )
        return JSONResponse(body, status_code=status)

    @app.exception_handler(DataError)
    async def _unstorable_text(_: Request, exc: DataError) -> JSONResponse:
        """PostgreSQL refuses a NUL character in any text or JSON it is given, even to compare.

        Fields Neens stores refuse NUL when validated; this catches the rest (an id the request
        only looked something up by, which SQLite would simply not find, or a JSON key).
        """
        reason = str(exc.orig)
        if "NUL (0x00)" not in reason and "\\u0000 cannot be converted" not in reason:
            raise exc
        message = (
            "a text value in this request holds a NUL character (\\u0000), which no value "
            "stored in Neens can contain; remove it"
        )
        return JSONResponse(error_body(HTTP_CODES[422], message), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = HTTP_CODES.get(exc.status_code, "http_error")
        headers = dict(exc.headers or {})
        message = str(exc.detail)
        if exc.status_code == 405:
            allowed = _allowed_methods(request)
            if allowed:
                headers["Allow"] = allowed
                message = f"{request.method} is not allowed here; this path answers {allowed}"
        elif exc.status_code == 404 and message == "Not Found":
            if (refusal := await wrong_shape_refusal(request)) is not None:
                return JSONResponse(
                    error_body(refusal.code, refusal.message, refusal.field),
                    refusal.status_code,
                )
            # No route has this path: most often a base URL with a path of its own (`…/api`).
            message = (
                f"no route {request.method} {safe_label(request.url.path, 200)} on this server; "
                "its API is served from the root of its address (every route is listed at "
                "/openapi.json): check the base URL"
            )
        elif exc.status_code == 400 and message == "There was an error parsing the body":
            message = (
                "request body is not valid JSON: it is not UTF-8 text, nests too deeply, or "
                "holds a number too long to read (over 4,300 digits)"
            )
        return JSONResponse(error_body(code, message), status_code=exc.status_code, headers=headers)
