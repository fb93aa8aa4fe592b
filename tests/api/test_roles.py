"""The route × role table of docs/server.md is what the app enforces, for every route.

The table in the docs is the one declaration: this test reads it, fails when a route of the
OpenAPI document has no row (a new route needs a role decision) or a row names no route, and
calls every route with no key, an `ingest` key, an `admin` key and another project's key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.conftest import auth
from tests.support.openapi import document as openapi_document
from tests.support.sqlite_only import sqlite_only

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/\S*)` \| ([^|]+) \|$")
WHO = {"anyone, no key": {"none", "ingest", "admin"}, "ingest, admin": {"ingest", "admin"}}


def documented_roles() -> dict[tuple[str, str], set[str]]:
    """The docs' route × role table: (method, path) -> the roles that may call it."""
    text = (ROOT / "docs" / "server.md").read_text(encoding="utf-8")
    table: dict[tuple[str, str], set[str]] = {}
    for line in text.splitlines():
        if (match := ROW.match(line)) is not None:
            method, path, who = match.groups()
            table[(method, path)] = WHO.get(who.strip(), {who.strip()})
    return table


def app_routes() -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, operations in openapi_document()["paths"].items()
        for method in operations
    ]


def test_every_route_has_exactly_one_role_decision_in_the_docs() -> None:
    table = documented_roles()
    routes = app_routes()
    assert sorted(set(routes) - set(table)) == [], "routes without a row in docs/server.md"
    assert sorted(set(table) - set(routes)) == [], "rows of docs/server.md naming no route"
    assert all(roles <= {"none", "ingest", "admin"} for roles in table.values()), table


def test_the_role_column_of_api_md_agrees_with_the_table() -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    meaning = {"none": {"none", "ingest", "admin"}, "any": {"ingest", "admin"}, "admin": {"admin"}}
    row = re.compile(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/\S*)` \| (\w+) \|")
    table = documented_roles()
    seen = 0
    for line in text.splitlines():
        if (match := row.match(line)) is not None:
            method, path, who = match.groups()
            assert meaning[who] == table[(method, path)], line
            seen += 1
    assert seen == len(table)


async def _project(client: httpx.AsyncClient, key: CreatedKey) -> dict[str, str]:
    """One of each resource in the key's project; path parameter name -> id."""
    h = auth(key)
    ds = (await client.post("/datasets", json={"name": "golden"}, headers=h)).json()["id"]
    r = await client.post(
        f"/datasets/{ds}/versions",
        json={"items": [{"input": "q", "expected_output": "a"}], "golden": True},
        headers=h,
    )
    version = r.json()["id"]
    body = {"dataset_id": ds, "version_label": "v1", "runner_mode": "runner"}
    run = (await client.post("/preprod-evals", json=body, headers=h)).json()["id"]
    items = (await client.get(f"/preprod-evals/{run}/items", headers=h)).json()["items"]
    conn = await client.post(
        "/agent-connections",
        json={"name": "agent", "url": "http://127.0.0.1:9/agent", "headers": {"X-Key": "s"}},
        headers=h,
    )
    other = await client.post(
        "/agent-connections",
        json={"name": "other agent", "url": "http://127.0.0.1:9/other"},
        headers=h,
    )
    arms = [
        {"label": "a", "agentConnectionId": conn.json()["id"]},
        {"label": "b", "agentConnectionId": other.json()["id"]},
    ]
    sweep = await client.post(
        "/model-sweeps",
        json={"datasetId": ds, "versionLabel": "v1", "passK": 1, "arms": arms},
        headers=h,
    )
    assert sweep.status_code == 201, sweep.text
    if key.role == "admin":
        r = await client.put("/share-links/settings", json={"enabled": True}, headers=h)
        assert r.status_code == 200, r.text
        link = await client.post(
            "/share-links",
            json={"resourceType": "sweep_decision", "resourceId": sweep.json()["id"]},
            headers=h,
        )
        assert link.status_code == 201, link.text
    judge = await client.post(
        "/judges", json={"name": "exact", "type": "managed", "check": "exact_match"}, headers=h
    )
    sink = await client.post(
        "/notification-sinks", json={"name": "hook", "url": "http://127.0.0.1:9/hook"}, headers=h
    )
    session_id = f"sess-{key.project_id}"
    session = {
        "session": {"id": session_id},
        "spans": [{"id": "s1", "name": "agent.run", "input": "Refund order 1001"}],
    }
    assert (await client.post("/sessions", json=session, headers=h)).status_code == 200
    mode = await client.post("/failure-modes", json={"name": "wrong refund"}, headers=h)
    assert mode.status_code == 201, mode.text
    body = {"failureModeId": mode.json()["id"], "confirmed": True}
    r = await client.post(f"/sessions/{session_id}/failure-modes", json=body, headers=h)
    assert r.status_code == 200, r.text
    body = {"name": "incidents", "failureModeIds": [mode.json()["id"]]}
    suite = await client.post("/stress-test-suites", json=body, headers=h)
    assert suite.status_code == 201, suite.text
    return {
        "dataset_id": ds,
        "version_id": version,
        "run_id": run,
        "item_id": items[0]["item_id"],
        "connection_id": conn.json()["id"],
        "other_connection_id": other.json()["id"],
        "sweep_id": sweep.json()["id"],
        "arm_id": sweep.json()["arms"][0]["id"],
        "link_id": link.json()["id"] if key.role == "admin" else "shl_none",
        "token": link.json()["url"].rsplit("/", 1)[1] if key.role == "admin" else "none",
        "judge_id": judge.json()["id"],
        "sink_id": sink.json()["id"],
        "session_id": session_id,
        "failure_mode_id": mode.json()["id"],
        "suite_id": suite.json()["id"],
        "model": "my-model",
    }


def _sweep_body(ids: dict[str, str], n: int) -> dict[str, Any]:
    return {
        "datasetId": ids["dataset_id"],
        "versionLabel": f"v{n}",
        "passK": 1,
        "arms": [
            {"label": "a", "agentConnectionId": ids["connection_id"]},
            {"label": "b", "agentConnectionId": ids["other_connection_id"]},
        ],
    }


def _body(method: str, path: str, ids: dict[str, str], n: int) -> dict[str, Any] | None:
    """A valid body for the route, so an allowed call gets past validation."""
    bodies: dict[tuple[str, str], dict[str, Any]] = {
        ("POST", "/agent-connections"): {"name": f"c{n}", "url": "http://127.0.0.1:9/a"},
        ("PATCH", "/agent-connections/{connection_id}"): {"model": f"m{n}"},
        ("POST", "/datasets"): {"name": f"d{n}"},
        ("POST", "/datasets/{dataset_id}/versions"): {"items": [{"input": "x"}]},
        ("POST", "/judges"): {"name": f"j{n}", "type": "managed", "check": "exact_match"},
        ("PATCH", "/judges/{judge_id}"): {"enabled": True},
        ("PUT", "/model-pricing/{model}"): {"inputPerMTokUsd": 1, "outputPerMTokUsd": 2},
        ("POST", "/notification-sinks"): {"name": f"s{n}", "url": "http://127.0.0.1:9/h"},
        ("POST", "/preprod-evals"): {"dataset_id": ids["dataset_id"], "version_label": f"v{n}"},
        ("POST", "/preprod-evals/{run_id}/items/{item_id}/error"): {"reason": "agent crashed"},
        ("POST", "/preprod-evals/imports"): {
            "dataset_id": ids["dataset_id"],
            "version_label": f"import {n}",
            "source": {"tool": "promptfoo"},
            "items": [{"item_id": ids["item_id"], "trials": [{"trial": 0, "passed": True}]}],
        },
        ("POST", "/sessions"): {
            "session": {"id": f"s-{n}"},
            "spans": [{"id": "root", "name": "agent.run"}],
        },
        ("POST", "/v1/traces"): {"resourceSpans": []},
        ("POST", "/model-sweeps"): _sweep_body(ids, n),
        ("PUT", "/share-links/settings"): {"enabled": True},
        ("POST", "/share-links"): {"resourceType": "sweep_decision", "resourceId": ids["sweep_id"]},
        ("POST", "/model-sweeps/preview"): _sweep_body(ids, n),
        ("POST", "/v1/logs"): {"resourceLogs": []},
        ("POST", "/failure-modes"): {"name": f"mode {n}"},
        ("POST", "/sessions/{session_id}/failure-modes"): {
            "failureModeId": ids["failure_mode_id"],
            "confirmed": True,
        },
        ("POST", "/stress-test-suites"): {
            "name": f"suite {n}",
            "failureModeIds": [ids["failure_mode_id"]],
        },
    }
    return bodies.get((method, path))


async def _role_problems(
    client: httpx.AsyncClient,
    keys: dict[str, CreatedKey],
    ids: dict[str, str],
    route: tuple[str, str],
) -> list[str]:
    """Call the route as no one, another project's admin, ingest and admin; how each answer
    departs from the docs' table (empty when none does)."""
    method, path = route
    allowed = documented_roles()[route]
    url = re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], path)
    callers: list[tuple[str, dict[str, str]]] = [
        ("none", {}),
        ("other", auth(keys["other"])),
        ("ingest", auth(keys["ingest"])),
        ("admin", auth(keys["admin"])),
    ]
    found: list[str] = []
    for n, (who, headers) in enumerate(callers):
        body = _body(method, path, ids, n)
        r = await client.request(method, url, json=body, headers=headers)
        seen = f"{who}: {method} {url} -> {r.status_code} {r.text[:300]}"
        role = "admin" if who == "other" else who
        if r.status_code >= 500:
            found.append(f"server error; {seen}")
        elif role not in allowed:
            if r.status_code != (401 if who == "none" else 403):
                found.append(f"not refused; {seen}")
            elif r.json()["error"]["code"] not in ("not_authenticated", "forbidden"):
                found.append(f"refused with another code; {seen}")
        elif r.status_code in (401, 403):
            found.append(f"refused; {seen}")
        elif who == "other" and re.search(r"\{\w+_id\}", path) and r.status_code != 404:
            found.append(f"another project's id is not a 404; {seen}")
    return found


@pytest.fixture
def keys(
    ingest_key: CreatedKey, admin_key: CreatedKey, other_project_key: CreatedKey
) -> dict[str, CreatedKey]:
    return {"ingest": ingest_key, "admin": admin_key, "other": other_project_key}


ROUTES = app_routes()
READ_ROUTES = [route for route in ROUTES if route[0] == "GET"]
WRITE_ROUTES = [route for route in ROUTES if route[0] != "GET"]


@sqlite_only(
    "the role check precedes the route's queries; test_tenancy.py checks every route on both"
)
async def test_each_role_gets_what_the_table_says_on_every_read_route(
    client: httpx.AsyncClient, keys: dict[str, CreatedKey]
) -> None:
    """Reads change nothing another read sees, so they share one pair of projects."""
    ids = await _project(client, keys["admin"])
    await _project(client, keys["other"])
    found = [
        problem
        for route in READ_ROUTES
        for problem in await _role_problems(client, keys, ids, route)
    ]
    assert not found, "\n".join(found)


@sqlite_only(
    "the role check precedes the route's queries; test_tenancy.py checks every route on both"
)
@pytest.mark.parametrize("route", WRITE_ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
async def test_each_role_gets_what_the_table_says_on_a_write_route(
    client: httpx.AsyncClient, keys: dict[str, CreatedKey], route: tuple[str, str]
) -> None:
    """Each write route on projects of its own: one route's writes never decide another's."""
    ids = await _project(client, keys["admin"])
    await _project(client, keys["other"])
    found = await _role_problems(client, keys, ids, route)
    assert not found, "\n".join(found)


WHATEVER_IT_SENDS: list[tuple[str, dict[str, str], bytes, str]] = [
    ("a body that is not JSON", {"Content-Type": "application/json"}, b"{bad", ""),
    ("a body that is not declared JSON", {"Content-Type": "text/plain"}, b"{}", ""),
    ("an unknown query parameter", {"Content-Type": "application/json"}, b"{}", "?nope=1"),
]
"""What a route would refuse for the request itself (400, 415, 422) before its key is checked,
were the key not checked first."""


@sqlite_only("the key is checked before the body is read; storage is not reached")
@pytest.mark.parametrize(
    ("what", "headers", "body", "query"), WHATEVER_IT_SENDS, ids=[w[0] for w in WHATEVER_IT_SENDS]
)
async def test_a_caller_a_route_refuses_is_told_so_whatever_it_sends(
    dialect: str,
    client: httpx.AsyncClient,
    keys: dict[str, CreatedKey],
    what: str,
    headers: dict[str, str],
    body: bytes,
    query: str,
) -> None:
    """docs/server.md: without a valid key 401, and an ingest key 403 on a configuration route,
    whatever it sends; a caller the route admits gets the request's own problem."""
    found = []
    table = documented_roles()
    for method, path in WRITE_ROUTES:
        if path.startswith("/v1/") or path == "/share/{token}":
            continue  # OTLP receivers decode their own bodies; a share link takes no key
        url = re.sub(r"\{(\w+)\}", lambda m: f"{m.group(1)}_x", path) + query
        for who, expected in (("none", 401), ("ingest", 403), ("admin", None)):
            if expected == 403 and "ingest" in table[(method, path)]:
                continue
            caller = auth(keys[who]) if who != "none" else {}
            r = await client.request(method, url, content=body, headers={**caller, **headers})
            if expected is not None and r.status_code != expected:
                found.append(f"{who}: {method} {url} -> {r.status_code} {r.text[:200]}")
            if expected is None and r.status_code in (401, 403) or r.status_code >= 500:
                found.append(f"{who}: {method} {url} -> {r.status_code} {r.text[:200]}")
    assert not found, "\n".join(found)
