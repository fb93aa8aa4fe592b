"""Errors every route shares: the 500 envelope with its logged id, NUL characters in the URL,
bounded query integers, validation answers that list every problem, malformed JSON reported by
position, 415 for a body that is not JSON, and the Allow header of a 405."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from neens.api.app import create_app
from neens.api.deps import get_db
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.conftest import auth
from tests.support.sqlite_only import sqlite_only


async def test_an_unexpected_failure_answers_the_envelope_with_an_error_id_that_is_logged(
    settings: Settings, db: Database, ingest_key: CreatedKey, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(settings, database=db)

    async def broken_db() -> Database:
        raise RuntimeError("the database driver fell over")

    app.dependency_overrides[get_db] = broken_db
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            with caplog.at_level(logging.ERROR, logger="neens.api"):
                r = await c.get("/datasets", headers=auth(ingest_key))
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert error["code"] == "internal_error"
    assert error["errorId"].startswith("err_")
    assert error["errorId"] in error["message"]
    assert "fell over" not in r.text  # the cause stays in the log, not with the client
    logged = [rec for rec in caplog.records if error["errorId"] in rec.getMessage()]
    assert len(logged) == 1
    assert logged[0].exc_info is not None
    assert "fell over" in str(logged[0].exc_info[1])


@pytest.mark.parametrize(
    "path",
    [
        "/datasets/ds_%00",
        "/datasets/ds_1/versions/dsv_%00/items",
        "/sessions/a%00b",
        "/preprod-evals/ppr_%00/gate",
        "/judges/%00",
        "/agent-connections/conn_%00",
        "/notification-sinks/sink_%00/deliveries",
    ],
)
async def test_a_nul_character_in_the_path_is_a_404(
    client: httpx.AsyncClient, admin_key: CreatedKey, path: str
) -> None:
    r = await client.get(path, headers=auth(admin_key))
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/datasets"), ("POST", "/v2/traces"), ("GET", "/preprod-evals/ppr_1/nope")],
)
async def test_a_path_no_route_has_is_a_404_that_says_to_check_the_base_url(
    client: httpx.AsyncClient, admin_key: CreatedKey, method: str, path: str
) -> None:
    """A base URL with a path of its own (`…/api`) reaches no route; the answer says so, and
    the CLIs print it as the error."""
    r = await client.request(method, path, headers=auth(admin_key))
    assert r.status_code == 404, r.text
    error = r.json()["error"]
    assert error["code"] == "not_found"
    assert error["message"].startswith(f"no route {method} '{path}' on this server; ")
    assert error["message"].endswith("check the base URL")


@pytest.mark.parametrize(
    ("method", "path", "message", "field"),
    [
        ("GET", "/model-sweeps/x", "no model sweep 'x' in this project (its ids start with msw-)",
         "sweep_id"),
        ("POST", "/model-sweeps/x/cancel", "no model sweep 'x' in this project (its ids start "
         "with msw-)", "sweep_id"),
        ("GET", "/model-sweeps/run-1/arms/arm_1/regressions", "no model sweep 'run-1' in this "
         "project (its ids start with msw-)", "sweep_id"),
        ("GET", "/preprod-evals/%FF", "no pre-prod run '\ufffd' in this project (its ids start "
         "with ppr_)", "run_id"),
    ],
)  # fmt: skip
@sqlite_only("no route matches, so no query is made; the key check is tested on both: test_auth")
async def test_an_id_of_the_wrong_shape_is_a_404_about_the_resource(
    dialect: str,
    client: httpx.AsyncClient,
    admin_key: CreatedKey,
    method: str,
    path: str,
    message: str,
    field: str,
) -> None:
    """Sweep and run ids are routed by their prefix, so `/model-sweeps/x` matches no route; the
    answer is about the sweep, not a hint to check the base URL, after the key's own check."""
    r = await client.request(method, path, headers=auth(admin_key))
    assert r.status_code == 404, r.text
    assert r.json()["error"] == {"code": "not_found", "message": message, "field": field}
    keyless = await client.request(method, path)
    assert keyless.status_code == 401, keyless.text


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/datasets?name=a%00b", "name"),
        ("/sessions?agent_name=%00", "agent_name"),
        ("/preprod-evals?dataset_id=ds_%00", "dataset_id"),
        ("/scores?run_id=%00", "run_id"),
        ("/preprod-compare?runs=ppr_%00", "runs"),
    ],
)
async def test_a_nul_character_in_a_query_parameter_is_a_422_naming_it(
    client: httpx.AsyncClient, admin_key: CreatedKey, url: str, field: str
) -> None:
    r = await client.get(url, headers=auth(admin_key))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    assert "NUL" in r.json()["error"]["message"]


async def test_an_item_offset_past_64_bits_is_a_422_naming_offset(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    h = auth(ingest_key)
    ds = (await client.post("/datasets", json={"name": "d"}, headers=h)).json()["id"]
    v = await client.post(f"/datasets/{ds}/versions", json={"items": [{"input": "q"}]}, headers=h)
    url = f"/datasets/{ds}/versions/{v.json()['id']}/items"
    for offset in (2**63, 2**64 + 5, 10**30):
        r = await client.get(url, params={"offset": offset}, headers=h)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "offset"
    assert (await client.get(url, params={"offset": 0}, headers=h)).json()["items"][0]["input"]


async def test_every_validation_problem_is_listed_with_its_field(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    h = auth(ingest_key)
    ds = (await client.post("/datasets", json={"name": "d"}, headers=h)).json()["id"]
    r = await client.post(
        f"/datasets/{ds}/versions",
        json={"items": [{"input": 3}, {"expected_output": "x"}], "golden": "maybe", "x": 1},
        headers=h,
    )
    assert r.status_code == 422
    error = r.json()["error"]
    fields = [p["field"] for p in error["errors"]]
    assert fields == ["items[0].input", "items[1].input", "golden", "x"]
    assert error["field"] == "items[0].input"
    for problem in error["errors"]:
        assert problem["message"] in error["message"]
    assert "more problem" not in error["message"]


async def test_a_single_problem_has_no_list_and_no_pydantic_prefix(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.post("/datasets", json={"name": "   "}, headers=auth(ingest_key))
    assert r.status_code == 422
    assert r.json() == {
        "error": {
            "code": "unprocessable",
            "message": "name: must not be blank",
            "field": "name",
        }
    }


@pytest.mark.parametrize("headers", [{"Content-Type": "application/json"}, {}])
async def test_an_empty_body_names_the_required_fields(
    client: httpx.AsyncClient, ingest_key: CreatedKey, headers: dict[str, str]
) -> None:
    r = await client.post("/datasets", content=b"", headers={**auth(ingest_key), **headers})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "name"
    assert "empty" in error["message"] and "name" in error["message"]


@pytest.mark.parametrize("body", [b"null", b"[1, 2]", b'"text"', b"42"])
async def test_a_body_that_is_not_an_object_says_so(
    client: httpx.AsyncClient, ingest_key: CreatedKey, body: bytes
) -> None:
    r = await client.post(
        "/sessions", content=body, headers={**auth(ingest_key), "Content-Type": "application/json"}
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["message"] == "request body must be a JSON object"


async def test_malformed_json_is_reported_by_line_and_column(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.post(
        "/datasets",
        content=b'{\n  "name": "d",\n  oops\n}',
        headers={**auth(ingest_key), "Content-Type": "application/json"},
    )
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "invalid_input"
    assert "field" not in error
    assert "line 3, column 3 (char 19)" in error["message"], error["message"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_a_body_that_is_not_json_on_a_json_route_is_a_415(
    client: httpx.AsyncClient, ingest_key: CreatedKey, content_type: str | None
) -> None:
    headers = auth(ingest_key)
    if content_type is not None:
        headers["Content-Type"] = content_type
    r = await client.post("/datasets", content=b'{"name": "d"}', headers=headers)
    assert r.status_code == 415, r.text
    error = r.json()["error"]
    assert error["code"] == "unsupported_media_type"
    assert error["field"] == "Content-Type"
    assert "application/json" in error["message"]
    ok = await client.post(
        "/datasets",
        content=b'{"name": "d"}',
        headers={**auth(ingest_key), "Content-Type": "application/json; charset=utf-8"},
    )
    assert ok.status_code == 201


@pytest.mark.parametrize("charset", ["latin-1", "UTF-16", '"iso-8859-1"'])
async def test_json_in_another_charset_than_utf8_is_a_415_naming_content_type(
    client: httpx.AsyncClient, ingest_key: CreatedKey, charset: str
) -> None:
    """It was read as UTF-8 anyway: a 400 that named no position, or a UTF-16 body taken."""
    name = charset.strip('"').lower()
    r = await client.post(
        "/datasets",
        content='{"name": "café"}'.encode(name),
        headers={**auth(ingest_key), "Content-Type": f"application/json; charset={charset}"},
    )
    assert r.status_code == 415, r.text
    error = r.json()["error"]
    assert error["field"] == "Content-Type"
    assert error["message"].startswith(
        f"this route reads JSON in UTF-8 (as JSON is exchanged), not charset={name};"
    )
    listed = await client.get("/datasets", headers=auth(ingest_key))
    assert listed.json()["datasets"] == []


async def test_a_405_names_every_method_of_the_path(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.put("/datasets", headers=auth(ingest_key))
    assert r.status_code == 405
    assert {m.strip() for m in r.headers["allow"].split(",")} >= {"GET", "POST"}
    r = await client.delete("/judges/jdg_1", headers=auth(ingest_key))
    assert {m.strip() for m in r.headers["allow"].split(",")} >= {"GET", "PATCH"}


async def _nested(depth: int) -> dict[str, object]:
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": [value]}
    return {"items": [{"input": "q", "metadata": value}]}


async def test_deeply_nested_json_is_a_400_and_moderate_nesting_is_stored(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    h = auth(ingest_key)
    ds = (await client.post("/datasets", json={"name": "d"}, headers=h)).json()["id"]
    deep = b'{"items": [{"input": "q", "metadata": ' + b'{"k": [' * 5000 + b"1" + b"]}" * 5000
    deep += b"}]}"
    r = await client.post(
        f"/datasets/{ds}/versions",
        content=deep,
        headers={**h, "Content-Type": "application/json"},
    )
    assert r.status_code == 400, r.text
    assert "levels deep" in r.json()["error"]["message"]
    r = await client.post(f"/datasets/{ds}/versions", json=await _nested(30), headers=h)
    assert r.status_code == 201, r.text


async def test_a_key_given_twice_in_a_body_is_a_400_naming_it_and_nothing_is_made(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    """Readers disagree on which of two equal keys counts: taking the last silently dropped the
    first list of items, or renamed what was created."""
    h = {**auth(admin_key), "Content-Type": "application/json"}
    ds = (await client.post("/datasets", json={"name": "d"}, headers=auth(admin_key))).json()["id"]
    for path, body, key in [
        ("/datasets", b'{"name": "dupA", "name": "dupB"}', "name"),
        (
            f"/datasets/{ds}/versions",
            b'{"items": [{"input": "a"}], "items": [{"input": "b"}, {"input": "c"}]}',
            "items",
        ),
        (f"/datasets/{ds}/versions", b'{"items": [{"input": "a", "input": "b"}]}', "input"),
    ]:
        r = await client.post(path, content=body, headers=h)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["field"] == key
        assert error["message"] == (
            f"request body gives the key '{key}' twice in one object; give each key once"
        )
    names = [d["name"] for d in (await client.get("/datasets", headers=h)).json()["datasets"]]
    assert names == ["d"]
    versions = await client.get(f"/datasets/{ds}/versions", headers=h)
    assert versions.json()["versions"] == []


async def test_brackets_inside_strings_do_not_count_as_nesting(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    h = auth(ingest_key)
    r = await client.post("/datasets", json={"name": '[[[{"\\' * 200}, headers=h)
    assert r.status_code == 422  # too long a name, but read: the brackets were text
    assert r.json()["error"]["field"] == "name"


async def _chunks(total: int, pulled: list[int], size: int = 1 << 20) -> AsyncIterator[bytes]:
    """`total` bytes of a JSON-looking body, a chunk at a time, counting what was read."""
    chunk = b" " * size
    yield b'{"items": [{"input": "'
    sent = 0
    while sent < total:
        pulled.append(size)
        sent += size
        yield chunk


@pytest.mark.parametrize("path", ["/sessions", "/datasets/ds_1/versions", "/datasets"])
async def test_a_body_over_the_cap_is_refused_on_every_route_without_reading_it_whole(
    client: httpx.AsyncClient, ingest_key: CreatedKey, settings: Settings, path: str
) -> None:
    pulled: list[int] = []
    r = await client.post(
        path,
        content=_chunks(60 << 20, pulled),
        headers={**auth(ingest_key), "Content-Type": "application/json"},
    )
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["code"] == "payload_too_large"
    assert "NEENS_MAX_REQUEST_BYTES" in error["message"]
    assert sum(pulled) <= settings.max_request_bytes + (1 << 20)


async def test_a_declared_length_over_the_cap_is_refused_before_reading(
    client: httpx.AsyncClient, ingest_key: CreatedKey, settings: Settings
) -> None:
    pulled: list[int] = []
    r = await client.post(
        "/sessions",
        content=_chunks(60 << 20, pulled),
        headers={
            **auth(ingest_key),
            "Content-Type": "application/json",
            "Content-Length": str(60 << 20),
        },
    )
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "payload_too_large"
    assert pulled == []


async def test_a_body_under_the_cap_is_read_in_full(
    settings: Settings, db: Database, ingest_key: CreatedKey
) -> None:
    app = create_app(settings.model_copy(update={"max_request_bytes": 64 * 1024}), database=db)
    big = "x" * (40 * 1024)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            h = auth(ingest_key)
            ds = (await c.post("/datasets", json={"name": "d"}, headers=h)).json()["id"]
            r = await c.post(
                f"/datasets/{ds}/versions", json={"items": [{"input": big}]}, headers=h
            )
            assert r.status_code == 201, r.text
            r = await c.post(
                f"/datasets/{ds}/versions", json={"items": [{"input": big * 2}]}, headers=h
            )
            assert r.status_code == 413


async def test_the_index_points_to_the_docs_and_needs_no_key(client: httpx.AsyncClient) -> None:
    r = await client.get("/")
    assert r.status_code == 200
    body = r.json()
    for link in (body["docs"], body["openapi"], body["health"]):
        assert (await client.get(link)).status_code == 200


async def test_the_api_reference_page_loads_its_assets_from_the_server_itself(
    client: httpx.AsyncClient,
) -> None:
    for page in ("/docs", "/redoc"):
        html = (await client.get(page)).text
        scripts = [
            part.split('"', 1)[0] for part in html.split('src="')[1:] if not part.startswith("{")
        ]
        assert scripts, html
        for src in scripts:
            assert src.startswith("/"), f"{page} loads {src} from another host"
            asset = await client.get(src)
            assert asset.status_code == 200 and len(asset.content) > 10_000, src
        for href in html.split('href="')[1:]:
            assert href.startswith("/"), f"{page} links {href[:60]} from another host"


async def test_an_unknown_query_parameter_is_a_422_naming_it(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.get("/sessions", params={"agent": "refund-agent"}, headers=auth(ingest_key))
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["field"] == "agent"
    assert "agent_name" in error["message"]
    r = await client.get("/sessions", params={"agent_name": "x"}, headers=auth(ingest_key))
    assert r.status_code == 200


async def test_a_single_value_query_parameter_given_twice_is_a_422(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.get("/datasets?name=a&name=b", headers=auth(ingest_key))
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "name"


async def test_a_body_with_hundreds_of_problems_answers_a_bounded_list(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    h = auth(ingest_key)
    ds = (await client.post("/datasets", json={"name": "d"}, headers=h)).json()["id"]
    items = [{"input": i} for i in range(500)]
    r = await client.post(f"/datasets/{ds}/versions", json={"items": items}, headers=h)
    assert r.status_code == 422
    error = r.json()["error"]
    assert len(error["errors"]) == 100
    assert error["errors"][99]["field"] == "items[99].input"
    assert "and 490 more problems (100 of 500 listed in errors)" in error["message"]
    assert len(r.content) < 20_000


@pytest.mark.parametrize("dialect", ["postgresql"])
async def test_a_nul_character_that_reaches_postgresql_is_a_422_not_a_500(
    settings: Settings, db: Database, ingest_key: CreatedKey
) -> None:
    """An id looked up with a NUL in it: SQLite finds nothing, PostgreSQL refuses the text."""
    app = create_app(settings, database=db)

    async def lookup_with_nul() -> Database:
        async with db.read() as s:
            await s.execute(text("SELECT :v"), {"v": "ds_\x00"})
        return db

    app.dependency_overrides[get_db] = lookup_with_nul
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            r = await c.get("/datasets", headers=auth(ingest_key))
    assert r.status_code == 422, r.text
    assert "NUL" in r.json()["error"]["message"]


@pytest.mark.parametrize("dialect", ["postgresql"])
async def test_a_nul_character_in_a_json_key_that_reaches_postgresql_is_a_422(
    settings: Settings, db: Database, ingest_key: CreatedKey
) -> None:
    app = create_app(settings, database=db)

    async def json_with_nul() -> Database:
        async with db.read() as s:
            await s.execute(text("SELECT CAST(:v AS jsonb)"), {"v": '{"a\\u0000": 1}'})
        return db

    app.dependency_overrides[get_db] = json_with_nul
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://neens.test") as c:
            r = await c.get("/datasets", headers=auth(ingest_key))
    assert r.status_code == 422, r.text


async def test_a_problem_inside_a_field_is_named_down_to_its_part(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    """The 422's field is the part of the value at fault, not the whole field holding it."""
    h = auth(admin_key)
    ds = (await client.post("/datasets", json={"name": "golden"}, headers=h)).json()["id"]
    r = await client.post(
        f"/datasets/{ds}/versions", json={"items": [{"input": "q"}], "golden": True}, headers=h
    )
    assert r.status_code == 201, r.text
    judge = await client.post(
        "/judges", json={"name": "exact", "type": "managed", "check": "exact_match"}, headers=h
    )
    judge_id = judge.json()["id"]
    base = {"dataset_id": ds, "version_label": "v1"}
    cases: list[tuple[dict[str, Any], str, str]] = [
        (
            {"gate": {"cost": {"max_avg_usd": 1e999}}},
            "gate.cost.max_avg_usd",
            "gate.cost.max_avg_usd: is inf, which JSON cannot represent",
        ),
        (
            {"baseline": {"kind": "preprod_run"}},
            "baseline.value",
            "baseline.value: is required for kind preprod_run",
        ),
        (
            {"baseline": {"kind": "prod_window", "range": "7d", "value": "ppr_x"}},
            "baseline.value",
            "baseline.value: does not apply to kind prod_window",
        ),
        (
            {"judge_deployment_ids": [judge_id, judge_id]},
            "judge_deployment_ids[1]",
            "judge 'exact' is listed twice (also at [0]); list each judge once",
        ),
    ]
    for extra, field, message in cases:
        r = await client.post(
            "/preprod-evals", content=json.dumps({**base, **extra}), headers={
                **h, "Content-Type": "application/json"
            },
        )  # fmt: skip
        assert r.status_code == 422, r.text
        assert (r.json()["error"]["field"], r.json()["error"]["message"]) == (field, message)
    r = await client.get("/preprod-compare", params={"runs": "ppr_nope"}, headers=h)
    assert r.status_code == 404, r.text
    assert r.json()["error"]["field"] == "runs"


async def test_a_number_too_long_to_read_is_said_to_be_one(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    body = b'{"name": "d", "x": ' + b"9" * 5000 + b"}"
    r = await client.post(
        "/datasets", content=body, headers={**auth(admin_key), "Content-Type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert "a number too long to read (over 4,300 digits)" in r.json()["error"]["message"]
