"""Who may call a route, checked before anything about the request itself is reported.

A key's problems come first: a request without a valid key is a 401 and an ingest key on an
admin route a 403 whatever it sends, as docs/server.md says. FastAPI reads and decodes the body
before it solves a route's dependencies (where the key is checked), and the app's guards (the
Content-Type, unknown query parameters, the body's nesting) run before them too, so each of
those, when it is about to refuse a request, asks `access_refusal` first and answers with the
key's problem instead when there is one. A request that is refused for nothing checks its key
once, in the route's own dependency.
"""

from __future__ import annotations

from typing import Final

from fastapi import Request
from fastapi.dependencies.models import Dependant

from neens.api.deps import RequireRole, authenticate, ingest_context
from neens.errors import NeensError, NotAuthenticated
from neens.store.keys import Role

ANY_ROLE: Final[tuple[Role, ...]] = ("admin", "ingest")


def _admitted_roles(dependant: Dependant) -> tuple[Role, ...] | None:
    """The roles the route's dependencies admit; None for a route that takes no key."""
    found: tuple[Role, ...] | None = None
    for sub in dependant.dependencies:
        call = sub.call
        if isinstance(call, RequireRole):
            return call.roles
        if call is authenticate or call is ingest_context:
            found = ANY_ROLE
        deeper = _admitted_roles(sub)
        if deeper is not None and (found is None or len(deeper) < len(found)):
            found = deeper
    return found


async def access_refusal(request: Request, route: object = None) -> NeensError | None:
    """The 401 or 403 the route (default: the matched one) would answer this request's key
    with, or None (a route without a key, or a key it admits)."""
    dependant = getattr(route or request.scope.get("route"), "dependant", None)
    if not isinstance(dependant, Dependant):
        return None
    roles = _admitted_roles(dependant)
    if roles is None:
        return None
    try:
        principal = await authenticate(request, request.app.state.db)
    except NotAuthenticated as exc:
        return exc
    if principal.role not in roles:
        return RequireRole(*roles).refusal(principal.role)
    return None
