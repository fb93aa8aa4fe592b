"""The page answered under `/ui` when the request never reached the pages' own error handling:
a body over the size cap, refused while it arrives, or an unexpected exception caught by the
outermost middleware. Plain HTML with no template, since a template may be what failed."""

from __future__ import annotations

from html import escape

from starlette.responses import HTMLResponse

from neens.web.render import SECURITY_HEADERS

PAGES = "/ui"
"""Where the pages are mounted (`neens.api.app.create_app`)."""

_TITLES = {413: "Too large", 500: "Something went wrong", 503: "Busy"}


def is_page_path(path: str) -> bool:
    return path == PAGES or path.startswith(f"{PAGES}/")


def fallback_page(status: int, message: str) -> HTMLResponse:
    title = _TITLES.get(status, "Error")
    html = (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)} · Neens</title>\n"
        f'<link rel="stylesheet" href="{PAGES}/static/neens.css">\n</head>\n<body>\n'
        f'<main id="main"><section class="narrow">\n<h1>{escape(title)}</h1>\n'
        f'<p class="alert" role="alert">{escape(message)}</p>\n'
        f'<p><a href="{PAGES}/">Back to Neens</a></p>\n</section></main>\n</body>\n</html>\n'
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
