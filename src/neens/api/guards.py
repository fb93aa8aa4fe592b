"""Checks every route runs before its own dependencies, installed once on the app."""

from __future__ import annotations

from typing import Any, get_args, get_origin

from fastapi import Request
from fastapi.dependencies.models import Dependant

from neens.api.access import access_refusal
from neens.errors import Unprocessable, UnsupportedMediaType


def is_json_media_type(content_type: str) -> bool:
    """Whether a Content-Type names JSON: `application/json` or any `application/…+json`."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def require_json_content_type(request: Request) -> None:
    """On routes that take a JSON body, a non-empty body of another type is a 415.

    Without it FastAPI would hand the raw bytes to validation and answer a puzzling 422
    ("Input should be a valid dictionary"). Routes that read their own body (`/v1/traces`)
    declare no body field and are left alone.
    """
    route = request.scope.get("route")
    if getattr(route, "body_field", None) is None:
        return
    content_type = request.headers.get("content-type")
    if is_json_media_type(content_type or ""):
        return
    length = request.headers.get("content-length")
    if length == "0" or (length is None and "transfer-encoding" not in request.headers):
        return  # no body: validation names the missing fields
    if (refusal := await access_refusal(request)) is not None:
        raise refusal
    raise UnsupportedMediaType(
        f"this route reads JSON, not {content_type!r}; send Content-Type: application/json"
        if content_type
        else "this route reads JSON; send Content-Type: application/json",
        field="Content-Type",
    )


def _is_sequence(annotation: Any) -> bool:
    if get_origin(annotation) in (list, tuple, set, frozenset):
        return True
    return any(_is_sequence(arg) for arg in get_args(annotation))


def _declared_query(dependant: Dependant) -> dict[str, bool]:
    """The query parameters the route reads, each with whether it may repeat."""
    names = {
        field.alias: _is_sequence(field.field_info.annotation) for field in dependant.query_params
    }
    for sub in dependant.dependencies:
        names.update(_declared_query(sub))
    return names


PUBLIC_LINKS = frozenset({"/share/{token}"})
"""Routes reached by a link people paste into chats and mail, which often gains parameters on
the way (`?utm_source=…`): these read no parameter and ignore any they are given."""


async def require_known_query_parameters(request: Request) -> None:
    """A query parameter the route does not read, or one given twice that holds one value, is a
    422 naming it, as an unknown body field is.

    Otherwise FastAPI keeps the last of repeated values, and a misspelt filter (`?agent=` for
    `?agent_name=`) silently answers everything.
    """
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if not isinstance(dependant, Dependant) or getattr(route, "path", None) in PUBLIC_LINKS:
        return
    known = _declared_query(dependant)
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if (name not in known or (name in seen and not known[name])) and (
            refusal := await access_refusal(request)
        ) is not None:
            raise refusal
        if name not in known:
            readable = name.replace("\x00", "\\x00")
            expected = ", ".join(sorted(known)) if known else "none"
            raise Unprocessable(
                f"{readable} is not a known query parameter of this route (it reads: {expected})",
                field=readable,
            )
        if name in seen and not known[name]:
            raise Unprocessable(f"{name} is given more than once; give it once", field=name)
        seen.add(name)
