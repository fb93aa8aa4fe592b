"""The contracts users build on: OpenAPI, the error shape, and docs that match the code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from neens.api.openapi import OPEN_OPERATIONS
from neens.api.openapi_dump import render
from neens.settings import Settings
from neens.store.keys import CreatedKey
from tests.conftest import auth
from tests.support.openapi import document as openapi_document

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_openapi_schema_matches_the_app() -> None:
    committed = (ROOT / "schemas" / "openapi.json").read_text(encoding="utf-8")
    assert committed == render(), "schemas/openapi.json is stale: run `make openapi`"


def test_every_operation_id_is_tag_dash_name() -> None:
    for path, operations in openapi_document()["paths"].items():
        for method, operation in operations.items():
            tag = operation["tags"][0].replace("-", "_")
            assert re.fullmatch(rf"{tag}-[a-z_]+", operation["operationId"]), (method, path)


def test_every_body_field_is_described() -> None:
    schemas: dict[str, Any] = openapi_document()["components"]["schemas"]
    missing = [
        f"{name}.{field}"
        for name, schema in schemas.items()
        for field, prop in schema.get("properties", {}).items()
        if not prop.get("description")
    ]
    assert missing == []


def test_every_error_answer_is_documented_in_the_error_shape() -> None:
    document = openapi_document()
    assert "HTTPValidationError" not in document["components"]["schemas"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            errors = {s for s in responses if s.startswith(("4", "5"))}
            if "requestBody" in operation:
                assert {"400", "413", "415", "422"} <= errors, (method, path)
            if operation["tags"] != ["health"] and operation["operationId"] not in OPEN_OPERATIONS:
                assert {"401", "403"} <= errors, (method, path)
                assert operation["security"] == [{"apiKey": []}]
            else:  # no key: nothing to refuse it for
                assert "security" not in operation and not {"401", "403"} & errors, (method, path)
            for status in errors:
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}, (method, path)


def test_every_setting_is_documented() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for name in Settings.model_fields:
        assert f"`NEENS_{name.upper()}`" in text, f"NEENS_{name.upper()} is not in the docs"


def test_every_route_is_documented() -> None:
    docs = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    for path, operations in openapi_document()["paths"].items():
        for method in operations:
            assert f"{method.upper()} {path}" in docs, f"{method.upper()} {path} is undocumented"


async def test_every_error_has_the_one_shape(
    client: httpx.AsyncClient, ingest_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    h = auth(ingest_key)
    ds = (await client.post("/datasets", json={"name": "d"}, headers=h)).json()["id"]
    responses = [
        await client.get("/datasets"),  # 401
        await client.put("/model-pricing/m", json={}, headers=h),  # 403
        await client.get(f"/datasets/{ds}", headers=auth(other_project_key)),  # 404
        await client.get("/no-such-route", headers=h),  # 404 from routing
        await client.patch("/datasets", headers=h),  # 405
        await client.post("/datasets", json={"name": "d"}, headers=h),  # 409
        await client.post("/v1/traces", content=b"x", headers={**h, "Content-Type": "text/csv"}),
        await client.post("/datasets", json={"name": 3}, headers=h),  # 422
        await client.post(
            "/datasets", content=b"{", headers={**h, "Content-Type": "application/json"}
        ),  # 400
        await client.post(
            "/v1/traces", content=b"\xff", headers={**h, "Content-Type": "application/x-protobuf"}
        ),  # 400
    ]
    statuses = [r.status_code for r in responses]
    assert statuses == [401, 403, 404, 404, 405, 409, 415, 422, 400, 400]
    for r in responses:
        body = r.json()
        assert set(body) == {"error"}, r.text
        assert {"code", "message"} <= set(body["error"]) <= {"code", "message", "field"}, r.text
        assert isinstance(body["error"]["code"], str) and body["error"]["code"]
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]


@pytest.mark.parametrize("doc", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_docs_link_only_to_files_that_exist(doc: str) -> None:
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+\.md)", text):
        assert (ROOT / "docs" / target).exists(), f"{doc} links to missing {target}"
