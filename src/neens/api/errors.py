"""The single JSON error shape: `{"error": {"code", "message", "field"?}}`.

Every error body Neens sends is built here, so clients parse one shape whatever failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

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


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["field"] = field
    return {"error": error}


def field_path(loc: Sequence[Any], body: Any = None) -> str:
    """pydantic's location tuple as a path a person reads: `items[3].input`.

    A tagged union adds the tag to the location (`managed.check`); walking the request body
    alongside tells a tag (not a key of the object, but its `type` value) from a field name.
    """
    parts: list[Any] = []
    current = body
    for part in loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc:
        if (
            isinstance(current, dict)
            and isinstance(part, str)
            and part not in current
            and part in current.values()
        ):
            continue
        parts.append(part)
        if isinstance(current, dict):
            current = current.get(part)
        elif isinstance(current, list) and isinstance(part, int) and part < len(current):
            current = current[part]
        else:
            current = None
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _validation_message(err: dict[str, Any], path: str) -> str:
    if err.get("type") == "missing":
        return f"{path} is required"
    if err.get("type") == "extra_forbidden":
        return f"{path} is not a known field"
    if err.get("type") == "json_invalid":
        return "request body is not valid JSON"
    message = str(err.get("msg", "is invalid"))
    return f"{path}: {message}" if path else message


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(NeensError)
    async def _neens_error(_: Request, exc: NeensError) -> JSONResponse:
        return JSONResponse(
            error_body(exc.code, exc.message, exc.field), status_code=exc.status_code
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        loc = first.get("loc", ())
        path = field_path(loc, exc.body if loc and loc[0] == "body" else None)
        if first.get("type") in ("union_tag_invalid", "union_tag_not_found"):
            ctx = first.get("ctx")
            tag = str(ctx.get("discriminator", "") if isinstance(ctx, dict) else "").strip("'")
            path = f"{path}.{tag}" if path else tag
        status = 400 if first.get("type") == "json_invalid" else 422
        message = _validation_message(first, path)
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        return JSONResponse(
            error_body(HTTP_CODES[status], message, path or None), status_code=status
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = HTTP_CODES.get(exc.status_code, "http_error")
        return JSONResponse(
            error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers
        )
