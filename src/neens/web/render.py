"""Rendering a page: the Jinja2 environment (templates from this package, autoescape always on),
and the headers every page answers with.

Nothing is ever marked safe: every value is printed through autoescape, so a dataset item, an
agent's answer or a run name holding markup shows as text. The Content-Security-Policy allows
scripts and styles from this server only, a second wall should a value ever slip through.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined

from neens import __version__
from neens.web.formats import FILTERS
from neens.web.guard import Viewer
from neens.web.nav import NAV

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def segment(value: str) -> str:
    """`value` as one path segment of a link: every reserved character escaped (`/` too), and a
    segment of only dots (a session may be called `..`) escaped too, as a browser would
    otherwise resolve it (`/ui/sessions/..` leads to `/ui/`)."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def query(**params: Any) -> str:
    """A query string from the parameters given; None values are left out, lists repeat."""
    pairs: list[tuple[str, str]] = []
    for name, value in params.items():
        if value is None:
            continue
        for one in value if isinstance(value, list | tuple) else [value]:
            pairs.append((name, str(one)))
    return f"?{urlencode(pairs)}" if pairs else ""


FULL_CHARS = 10_000
"""The most characters of one text a page shows in full (macros.html `full`); the rest is
counted and left to the JSON twin."""


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("neens.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    env.filters["segment"] = segment
    env.globals.update(nav=NAV, neens_version=__version__, query=query, full_chars=FULL_CHARS)
    return env


def render(
    request: Request,
    template: str,
    viewer: Viewer | None,
    *,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """The page `template` for `viewer` (None on sign-in and error pages without a session).

    A page names its JSON twin with `twin` (the API path answering the same data), shown in
    its footer and linked as `rel=alternate`; `twin_public` when the twin needs no key."""
    env: Environment = request.app.state.templates
    context.setdefault("twin", None)
    context.setdefault("section", None)
    context.setdefault("twin_public", False)
    context.setdefault("robots_noindex", False)
    html = env.get_template(template).render(request=request, viewer=viewer, **context)
    return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)
