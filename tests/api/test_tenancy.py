"""Another project's id answers exactly like an id that was never created, on every route.

Every route of the OpenAPI document with an id in its path needs a case below; a route without
one fails the test by name, so a route added later cannot skip the check. Each case is called
with project B's admin key (so no role masks the answer) and project A's ids, then with ids of
the same shape that exist nowhere: same status, same body but for the id. Routes with two ids
are also called with B's own first id and A's second. Afterwards A's resources read exactly as
before: nothing B sent changed them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from neens.store.keys import CreatedKey
from tests.api.test_roles import _project
from tests.conftest import auth
from tests.support.openapi import document as openapi_document

SRC = Path(__file__).resolve().parents[2] / "src" / "neens"
PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


@dataclass(frozen=True)
class Case:
    status: int
    """What the route answers for an id that does not exist (and so for another project's)."""
    body: dict[str, Any] | None = None
    """A valid body, so the answer comes from the lookup and not from validation."""


CASES: dict[tuple[str, str], Case] = {
    ("GET", "/agent-connections/{connection_id}"): Case(404),
    ("PATCH", "/agent-connections/{connection_id}"): Case(404, {"model": "changed"}),
    ("GET", "/datasets/{dataset_id}"): Case(404),
    ("GET", "/datasets/{dataset_id}/versions"): Case(404),
    ("POST", "/datasets/{dataset_id}/versions"): Case(404, {"items": [{"input": "x"}]}),
    ("GET", "/datasets/{dataset_id}/versions/{version_id}"): Case(404),
    ("POST", "/datasets/{dataset_id}/versions/{version_id}/golden"): Case(404),
    ("GET", "/datasets/{dataset_id}/versions/{version_id}/items"): Case(404),
    ("GET", "/judges/{judge_id}"): Case(404),
    ("PATCH", "/judges/{judge_id}"): Case(404, {"enabled": False}),
    # Cases run in this order: B deletes A's price before it sets one of its own.
    ("DELETE", "/model-pricing/{model}"): Case(404),
    # A price is a project's own setting for a model name: B setting "my-model" sets B's.
    ("PUT", "/model-pricing/{model}"): Case(200, {"inputPerMTokUsd": 7, "outputPerMTokUsd": 9}),
    ("GET", "/notification-sinks/{sink_id}/deliveries"): Case(404),
    ("DELETE", "/notification-sinks/{sink_id}"): Case(404),
    ("GET", "/preprod-evals/{run_id}"): Case(404),
    ("POST", "/preprod-evals/{run_id}/cancel"): Case(404),
    ("GET", "/preprod-evals/{run_id}/comparison"): Case(404),
    ("GET", "/preprod-evals/{run_id}/gate"): Case(404),
    ("GET", "/preprod-evals/{run_id}/items"): Case(404),
    ("POST", "/preprod-evals/{run_id}/items/{item_id}/error"): Case(404, {"reason": "crashed"}),
    ("GET", "/preprod-evals/{run_id}/metrics"): Case(404),
    ("GET", "/sessions/{session_id}"): Case(404),
    ("GET", "/sessions/{session_id}/failure-modes"): Case(404),
    # The session is looked up first, so B's body cannot tell whether A's mode id exists.
    ("POST", "/sessions/{session_id}/failure-modes"): Case(
        404, {"failureModeId": "fm_000000000000000000000000", "confirmed": True}
    ),
    ("GET", "/stress-test-suites/{suite_id}"): Case(404),
    ("GET", "/model-sweeps/{sweep_id}"): Case(404),
    ("POST", "/model-sweeps/{sweep_id}/cancel"): Case(404),
    ("GET", "/model-sweeps/{sweep_id}/comparison"): Case(404),
    ("GET", "/model-sweeps/{sweep_id}/evidence"): Case(404),
    ("POST", "/share-links/{link_id}/revoke"): Case(404),
    ("GET", "/model-sweeps/{sweep_id}/arms/{arm_id}/regressions"): Case(404),
}
PUBLIC = {("GET", "/share/{token}")}
"""Routes whose path id is itself the permission: a share link's token opens its result for
anyone who holds it, with no key (tests/api/test_share_links.py tests what it shows)."""

QUERY_CASES: list[tuple[str, dict[str, str]]] = [
    ("/preprod-compare", {"runs": "run_id"}),
    ("/preprod-compare/trajectory", {"run": "run_id", "baseline": "run_id", "item": "item_id"}),
]
"""Routes that take ids in the query string: query parameter -> the kind of id it takes."""


def routes_with_path_ids() -> list[tuple[str, str]]:
    return sorted(
        (method.upper(), path)
        for path, operations in openapi_document()["paths"].items()
        for method in operations
        if PARAM.search(path)
    )


def fill(path: str, ids: dict[str, str]) -> str:
    return PARAM.sub(lambda m: ids[m.group(1)], path)


def missing_twin(ident: str) -> str:
    """An id of the same shape (prefix, length, separators) that exists nowhere."""
    head, sep, tail = (re.split(r"([_-])", ident, maxsplit=1) + ["", ""])[:3]
    if not sep:
        head, tail = "", head
    return head + sep + "".join(("1" if c == "0" else "0") if c.isalnum() else c for c in tail)


def answer(r: httpx.Response, idents: list[str]) -> tuple[int, str]:
    """The status and body, with the ids the caller chose blanked out."""
    text = r.text
    for ident in idents:
        text = text.replace(ident, "<id>")
    return r.status_code, text


def test_every_route_with_an_id_in_its_path_has_a_case() -> None:
    routes = [r for r in routes_with_path_ids() if r not in PUBLIC]
    assert [r for r in routes if r not in CASES] == [], "routes with no tenancy case"
    assert [r for r in CASES if r not in routes] == [], "cases naming no route"


def test_a_missing_twin_has_the_shape_of_the_id_and_is_another_id() -> None:
    for ident in ["ppr_3f9c0a", "sess-prj_ab01", "my-model", "plain"]:
        twin = missing_twin(ident)
        assert twin != ident and len(twin) == len(ident)
        assert [c.isalnum() for c in twin] == [c.isalnum() for c in ident]


async def _snapshot(client: httpx.AsyncClient, key: CreatedKey, ids: dict[str, str]) -> list[Any]:
    """Everything project A can read about its own resources."""
    reads = [("GET", "/model-pricing")] + [r for r in CASES if r[0] == "GET"]
    seen = []
    for _, path in reads:
        url = fill(path, ids)
        r = await client.get(url, headers=auth(key))
        assert r.status_code == 200, f"{url}: {r.text}"
        body = r.json()
        body.pop("waitingFor", None)  # says how long the run has waited, which moves on
        seen.append((url, body))
    return seen


async def test_another_projects_id_answers_like_a_missing_one_on_every_route(
    client: httpx.AsyncClient, admin_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    a = await _project(client, admin_key)
    r = await client.put(
        f"/model-pricing/{a['model']}",
        json=CASES[("PUT", "/model-pricing/{model}")].body,
        headers=auth(admin_key),
    )
    assert r.status_code == 200, r.text
    b = await _project(client, other_project_key)
    before = await _snapshot(client, admin_key, a)
    as_b = auth(other_project_key)
    failures = []
    for (method, path), case in CASES.items():
        params = PARAM.findall(path)
        # Every way of taking the leading ids from B's own project and the rest from A's.
        for own in range(len(params)):
            mine = set(params[:own])
            foreign = {p: a[p] for p in params if p not in mine}
            urls = []
            for chosen in (foreign, {p: missing_twin(v) for p, v in foreign.items()}):
                url = fill(path, {**b, **chosen})
                response = await client.request(method, url, json=case.body, headers=as_b)
                urls.append((url, answer(response, list(chosen.values()))))
            (url, got), (twin_url, expected) = urls
            if got != expected or got[0] != case.status:
                failures.append(f"{method} {url} -> {got}; {twin_url} -> {expected}")
    assert failures == []
    assert await _snapshot(client, admin_key, a) == before


async def test_another_projects_run_in_a_query_answers_like_a_missing_one(
    client: httpx.AsyncClient, admin_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    a = await _project(client, admin_key)
    for path, params in QUERY_CASES:
        answers = []
        for ids in (a, {k: missing_twin(v) for k, v in a.items()}):
            query = {name: ids[kind] for name, kind in params.items()}
            r = await client.get(path, params=query, headers=auth(other_project_key))
            answers.append(answer(r, [ids["run_id"], ids["item_id"]]))
        assert answers[0] == answers[1], path
        assert answers[0][0] == 404, answers[0]


def test_no_route_or_view_writes_its_own_project_filter() -> None:
    """The project filter is spelled in `neens.store.tenancy` alone (the ingest writer's bulk
    statements over the sessions table, which address rows by their project key, aside)."""
    spelled = re.compile(r"project_id\s*(==|!=)")
    found = [
        f"{path.relative_to(SRC)}:{n}"
        for layer in ("api", "views", "store", "engine")
        for path in sorted((SRC / layer).rglob("*.py"))
        if path.name != "tenancy.py" and "migrations" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if spelled.search(line) and ".c.project_id" not in line
    ]
    assert found == []
