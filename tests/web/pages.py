"""Reading pages in tests: signing in through the form, and the values a page shows.

A page writes each value it renders as `data-field` (the JSON twin's field name) and
`data-value` (the value as JSON), inside elements naming what it belongs to (`data-item`,
`data-run`, …). `fields` reads them back with the text a person sees, so a test can hold the
page against its JSON twin.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

import httpx

from neens.store.keys import CreatedKey

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
SCOPES = (
    "data-item",
    "data-run",
    "data-cohort",
    "data-metric",
    "data-rule",
    "data-session",
    "data-span",
    "data-dataset",
    "data-version",
    "data-step",
    "data-insight",
    "data-sweep",
    "data-arm",
    "data-agent",
    "data-point",
    "data-mode",
)
ABSENT = object()


@dataclass(frozen=True)
class Shown:
    scope: dict[str, str]
    """The `data-*` scopes around the value: {"data-item": "dsi_…"}."""
    field: str
    value: Any
    """The `data-value`, decoded; ABSENT when the element carries none."""
    text: str
    """What a person reads, whitespace collapsed."""


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict[str, str], list[str]]] = []
        self.found: list[Shown] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        self.stack.append((tag, {k: v or "" for k, v in attrs}, []))

    def handle_data(self, data: str) -> None:
        for _, attrs, text in self.stack:
            if "data-field" in attrs:
                text.append(data)

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            name, attrs, text = self.stack.pop()
            if "data-field" in attrs:
                scope = {k: v for _, a, _ in self.stack for k, v in a.items() if k in SCOPES}
                value = json.loads(attrs["data-value"]) if "data-value" in attrs else ABSENT
                shown = " ".join("".join(text).split())
                self.found.append(Shown(scope, attrs["data-field"], value, shown))
            if name == tag:
                return


def fields(html: str) -> list[Shown]:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.found


def shown(html: str, field: str, **scope: Any) -> list[Shown]:
    """The values of `field` in exactly the scopes given: `item="dsi_…"` for `data-item`,
    `item=...` for any item; no scope for the values outside every scope."""
    wanted = {f"data-{k}": v for k, v in scope.items()}
    return [
        s
        for s in fields(html)
        if s.field == field
        and s.scope.keys() == wanted.keys()
        and all(v is ... or s.scope[k] == v for k, v in wanted.items())
    ]


def same(s: Shown, value: Any, text: str | None = None) -> None:
    """`s` carries `value` and, when given, reads `text`."""
    assert s.value is not ABSENT and s.value == value, (s, value)
    if text is not None:
        assert s.text == text, (s, text)


def one(html: str, field: str, **scope: Any) -> Shown:
    found = shown(html, field, **scope)
    assert len(found) == 1, f"{field} {scope}: {found}"
    return found[0]


CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    match = CSRF.search(html)
    assert match, "the page has no form token"
    return match.group(1)


async def sign_in(client: httpx.AsyncClient, key: CreatedKey | str) -> None:
    """Sign `client` in through the form, as a browser does."""
    page = await client.get("/ui/sign-in")
    assert page.status_code == 200, page.text
    r = await client.post(
        "/ui/sign-in",
        data={"csrf_token": csrf_of(page.text), "key": getattr(key, "key", key), "next": ""},
    )
    assert r.status_code == 303, r.text
    assert r.headers["location"] == "/ui/preprod-evals"


async def page(client: httpx.AsyncClient, path: str, **params: Any) -> str:
    r = await client.get(path, params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    return r.text


async def twin(client: httpx.AsyncClient, key: CreatedKey, path: str, **params: Any) -> Any:
    r = await client.get(path, params=params, headers={"Authorization": f"Bearer {key.key}"})
    assert r.status_code == 200, r.text
    return r.json()
