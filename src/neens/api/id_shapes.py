"""A path that names a resource by an id of the wrong shape: a 404 about the resource.

Sweep and run ids in paths are matched by their prefix (`api.paths`), so `/model-sweeps/x` is
no route at all to the router. To the person who typed it, it is a sweep that does not exist:
the answer says so, names the path parameter and the prefix its ids have, after checking the
key as the route itself would, rather than telling them to check the server's base URL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from neens.api.access import access_refusal
from neens.domain.storable import safe_label
from neens.errors import NeensError, NotFound

SHAPED_IDS: Final = {"sweep_id": ("model sweep", "msw-"), "run_id": ("pre-prod run", "ppr_")}
"""Path parameters matched by their prefix: what they name, and the prefix."""
_PARAMETER = re.compile(r"\{(\w+)(?::\w+)?\}")


@dataclass(frozen=True)
class _Loose:
    """A route whose shaped ids are matched as any path segment."""

    pattern: re.Pattern[str]
    methods: frozenset[str]
    route: APIRoute


def _api_routes(routes: list[BaseRoute]) -> list[APIRoute]:
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif (router := getattr(route, "original_router", None)) is not None:
            found.extend(_api_routes(router.routes))
    return found


def _loose_routes(request: Request) -> list[_Loose]:
    cached: list[_Loose] | None = getattr(request.app.state, "loose_routes", None)
    if cached is not None:
        return cached
    loose = []
    for route in _api_routes(request.app.router.routes):
        if not any(f"{{{name}:" in route.path for name in SHAPED_IDS):
            continue
        parts = _PARAMETER.split(route.path)
        # split gives text, name, text, name, …: the text escaped, each parameter a segment.
        regex = "".join(
            re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts)
        )
        loose.append(_Loose(re.compile(regex), frozenset(route.methods or ()), route))
    request.app.state.loose_routes = loose
    return loose


async def wrong_shape_refusal(request: Request) -> NeensError | None:
    """The answer to a request no route matched because an id has the wrong shape: the key's
    401 or 403 first, else a 404 naming the resource; None for any other unmatched path."""
    path = request.url.path
    for loose in _loose_routes(request):
        match = loose.pattern.fullmatch(path)
        if match is None or request.method not in loose.methods:
            continue
        for name, (what, prefix) in SHAPED_IDS.items():
            value = match.groupdict().get(name)
            if value is not None and not value.startswith(prefix):
                refusal = await access_refusal(request, loose.route)
                return refusal or NotFound(
                    f"no {what} {safe_label(value, 200)} in this project (its ids start with "
                    f"{prefix})",
                    field=name,
                )
    return None
