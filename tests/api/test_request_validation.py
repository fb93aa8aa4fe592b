"""Every field of every JSON request body, walked from the OpenAPI document, so a field added
later is covered too: text no database can store (a NUL character, a lone surrogate) is a 422
naming the field on both databases, never a 500, whether the field is stored or only looked up
by; and a wrong value (empty, wrong type) is reported with the field's JSON path alone, once,
in words, never with pydantic's union branches (`function-after[…]`, `none`) or a memory
address."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from neens.api.errors import field_path, problems_body
from neens.api.schemas.agent_connections import ConnectionUpdate
from neens.store.keys import CreatedKey
from tests.conftest import auth
from tests.support.openapi import document
from tests.support.sqlite_only import sqlite_only

FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*")
"""A field as docs/api.md describes it: the request's own spelling, list positions in brackets."""
LEAKS = ("0x", "function-after", "function-wrap", "constrained-str", "Input should be None")
"""pydantic's internals, and the message of an optional field's None branch."""
KEY = object()
"""In a slot's path: the key of a free-form object (`{"\\ud800": …}`) rather than a value."""


@dataclass(frozen=True)
class Slot:
    """One field of one route's body: where it is, and its (resolved) schema."""

    method: str
    url: str
    base: dict[str, Any]
    """What every body of this route holds (a discriminated union's tag)."""
    path: tuple[Any, ...]
    schema: dict[str, Any]

    @property
    def name(self) -> str:
        parts = ["<key>" if p is KEY else p for p in self.path]
        return f"{self.method} {self.url} {self.base or ''} {field_path(parts)}"

    def body(self, value: Any) -> dict[str, Any]:
        """The route's base body with `value` at this slot."""
        return {**self.base, **_placed(self.path, value)}

    def field_named(self, fields: list[str]) -> bool:
        """Whether one of the reported fields is this slot or holds it (a list or an object of
        free-form values is named as a whole); for a key, the object or the key in it."""
        path = field_path([p for p in self.path if p is not KEY])
        if self.path and self.path[-1] is KEY:  # the key itself may be named, escaped
            return any(f and (f == path or f.startswith(f"{path}.")) for f in fields)
        return any(f and (path == f or path.startswith((f"{f}.", f"{f}["))) for f in fields)


def _placed(path: tuple[Any, ...], value: Any) -> Any:
    """`value` at `path` in objects and one-item lists built around it."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if head is KEY:
        return {value: "v"}
    if isinstance(head, int):
        return [_placed(rest, value)]
    return {head: _placed(rest, value)}


def _kind(schema: dict[str, Any]) -> str | None:
    if "enum" in schema or "const" in schema:
        return "enum"
    return schema.get("type")


def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _walk(
    schema: dict[str, Any], path: tuple[Any, ...], components: dict[str, Any], depth: int = 0
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Every field below `schema`: objects' properties, list items, free-form values and keys."""
    schema = _resolve(schema, components)
    branches = [b for b in schema.get("anyOf", []) if b.get("type") != "null"]
    if len(branches) > 1:  # e.g. a time as text or as a number: no value is of a wrong type
        kinds = {_kind(_resolve(b, components)) for b in branches}
        yield path, {"type": "string" if "string" in kinds else "union", "x-any": True}
        for branch in branches:
            yield from ((p, s) for p, s in _walk(branch, path, components, depth) if p != path)
        return
    if branches:
        yield from _walk(branches[0], path, components, depth)
        return
    if path:
        yield path, schema
    if depth > 4:
        return
    for name, sub in schema.get("properties", {}).items():
        yield from _walk(sub, (*path, name), components, depth + 1)
    if schema.get("type") == "array" and "items" in schema:
        yield from _walk(schema["items"], (*path, 0), components, depth + 1)
    extra = schema.get("additionalProperties")
    if schema.get("type") == "object" and extra not in (None, False):
        value = {"type": "string", "x-any": True} if extra is True or extra == {} else extra
        yield (*path, KEY), {"type": "string"}
        yield from _walk(value, (*path, "k"), components, depth + 1)


def slots() -> list[Slot]:
    doc = document()
    components = doc["components"]["schemas"]
    out = []
    for url, operations in doc["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema")
            if not schema or set(content) != {"application/json"}:
                continue  # OTLP's routes decode their own bodies (tests/ingest)
            concrete = re.sub(r"\{[^}]+\}", "x_1", url)
            variants: list[tuple[dict[str, Any], dict[str, Any]]] = [({}, schema)]
            if "oneOf" in schema:
                tag = schema["discriminator"]["propertyName"]
                mapping = schema["discriminator"]["mapping"]
                variants = [({tag: value}, {"$ref": ref}) for value, ref in mapping.items()]
            for base, variant in variants:
                for path, sub in _walk(variant, (), components):
                    if path[-1] in base:
                        continue
                    out.append(Slot(method.upper(), concrete, base, path, sub))
    return out


SLOTS = slots()


async def _send(
    client: httpx.AsyncClient, key: CreatedKey, slot: Slot, value: Any
) -> httpx.Response:
    # Encoded here with ASCII escapes: a lone surrogate travels as `\ud800`, as a client's JSON
    # library sends it, and the route's parser decodes it back into the string.
    return await client.request(
        slot.method,
        slot.url,
        content=json.dumps(slot.body(value)).encode(),
        headers={**auth(key), "Content-Type": "application/json"},
    )


def test_the_walk_finds_the_fields_of_every_json_body() -> None:
    names = {slot.name for slot in SLOTS}
    for expected in (
        "POST /preprod-evals  dataset_id",
        "POST /preprod-evals  agent_connection_id",
        "POST /stress-test-suites  failureModeIds[0]",
        "POST /model-sweeps  judgeDeploymentIds[0]",
        "POST /model-sweeps/preview  arms[0].agentConnectionId",
        "POST /judges {'type': 'composite'} components[0].judgeId",
        "PATCH /agent-connections/x_1  headers.k",
        "POST /sessions  spans[0].attributes.<key>",
    ):
        assert expected in names, sorted(names)
    routes = {
        (method.upper(), re.sub(r"\{[^}]+\}", "x_1", url))
        for url, operations in document()["paths"].items()
        for method, operation in operations.items()
        if set(operation.get("requestBody", {}).get("content", {})) == {"application/json"}
    }
    assert {(s.method, s.url) for s in SLOTS} == routes
    assert len(routes) >= 19


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\x00", "ok\x00"])
async def test_unstorable_text_in_any_field_is_a_422_naming_the_field(
    client: httpx.AsyncClient, admin_key: CreatedKey, text: str
) -> None:
    failures = []
    for slot in SLOTS:
        if _kind(slot.schema) != "string":
            continue
        r = await _send(client, admin_key, slot, text)
        error = r.json().get("error", {}) if r.status_code != 204 else {}
        fields = [p["field"] for p in error.get("errors", [error])]
        if r.status_code != 422 or not slot.field_named(fields):
            failures.append(f"{slot.name}: {r.status_code} {r.text[:300]}")
    assert not failures, "\n".join(failures)


def _wrong_type(schema: dict[str, Any]) -> Any:
    if schema.get("x-any"):
        return None  # a free-form value takes anything
    kind = _kind(schema)
    if kind in ("string", "enum"):
        return 12345
    if kind in ("integer", "number", "boolean"):
        return "not-a-value"
    if kind == "array":
        return "not-a-list"
    if kind == "object":
        return "not-an-object"
    return None  # a free-form value takes anything


async def test_a_wrong_value_in_any_field_is_reported_by_its_json_path_in_words(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    failures = []
    for slot in SLOTS:
        if slot.path[-1] is KEY:
            continue
        wrong = _wrong_type(slot.schema)
        for value in ("", wrong):
            if value is None:
                continue
            r = await _send(client, admin_key, slot, value)
            if r.status_code >= 500:
                failures.append(f"{slot.name} = {value!r}: {r.status_code} {r.text[:300]}")
                continue
            if r.status_code != 422:
                if value is wrong:
                    failures.append(f"{slot.name} = {value!r}: {r.status_code}, not 422")
                continue
            error = r.json()["error"]
            problems = error.get("errors", [error])
            fields = [p["field"] for p in problems if p["field"] is not None]
            bad = [f for f in fields if not FIELD.fullmatch(f)]
            leaks = [
                leak
                for leak in LEAKS
                if leak in error["message"] or any(leak in p["message"] for p in problems)
            ]
            if bad or leaks or (value is wrong and not slot.field_named(fields)):
                failures.append(f"{slot.name} = {value!r}: {r.text[:400]}")
            if len(problems) != len({(p["field"], p["message"]) for p in problems}):
                failures.append(f"{slot.name} = {value!r}: a problem listed twice: {r.text}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"name": ""}, "name", "name: String should have at least 1 character"),
        ({"name": 5}, "name", "name: Input should be a valid string"),
        ({"provider": 5}, "provider", "provider: Input should be a valid string"),
        (
            {"provider": "p" * 101},
            "provider",
            "provider: String should have at most 100 characters",
        ),
        ({"headers": 5}, "headers", "headers: Input should be a valid dictionary"),
        (
            {"headers": {"X-Key": 5}},
            "headers.X-Key",
            "headers.X-Key: Input should be a valid string",
        ),
        ({"url": 5}, "url", "url: URL input should be a string or URL"),
        ({"url": "nope"}, "url", "url: Input should be a valid URL, relative URL without a base"),
        ({"name": "\ud800"}, "name", "name: contains a lone surrogate (\\ud800) at offset 0"),
        ({"name": None}, "name", "name: cannot be null; leave it out to keep its value"),
    ],
)
async def test_a_connection_update_names_the_field_once(
    client: httpx.AsyncClient,
    admin_key: CreatedKey,
    body: dict[str, Any],
    field: str,
    message: str,
) -> None:
    h = auth(admin_key)
    created = await client.post(
        "/agent-connections", json={"name": "c", "url": "https://agent.example.com/run"}, headers=h
    )
    assert created.status_code == 201, created.text
    r = await client.patch(
        f"/agent-connections/{created.json()['id']}",
        content=json.dumps(body).encode(),
        headers={**h, "Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert r.json() == {"error": {"code": "unprocessable", "message": message, "field": field}}


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/preprod-evals", {"dataset_id": "\ud800", "version_label": "v"}, "dataset_id"),
        (
            "/preprod-evals",
            {
                "dataset_id": "DATASET",
                "version_label": "v",
                "runner_mode": "push",
                "agent_connection_id": "\ud800",
            },
            "agent_connection_id",
        ),
        ("/preprod-evals", {"dataset_id": "ds_\x00", "version_label": "v"}, "dataset_id"),
        ("/stress-test-suites", {"name": "s", "failureModeIds": ["\ud800"]}, "failureModeIds[0]"),
        (
            "/model-sweeps",
            {
                "versionLabel": "v",
                "datasetId": "DATASET",
                "judgeDeploymentIds": ["\ud800"],
                "arms": [{"label": "a", "agentConnectionId": "conn_x"}],
            },
            "judgeDeploymentIds[0]",
        ),
        (
            "/model-sweeps/preview",
            {
                "datasetId": "DATASET",
                "judgeDeploymentIds": ["\ud800"],
                "arms": [{"label": "a", "agentConnectionId": "conn_x"}],
            },
            "judgeDeploymentIds[0]",
        ),
        (
            "/judges",
            {"name": "jj", "type": "composite", "components": [{"judgeId": "\ud800", "weight": 1}]},
            "components[0].judgeId",
        ),
    ],
)
async def test_ids_with_unstorable_text_are_a_422_not_a_500(
    client: httpx.AsyncClient,
    admin_key: CreatedKey,
    url: str,
    body: dict[str, Any],
    field: str,
) -> None:
    """The cases that answered 500: an id only looked up by, never stored."""
    h = auth(admin_key)
    dataset = await client.post("/datasets", json={"name": "d"}, headers=h)
    version = await client.post(
        f"/datasets/{dataset.json()['id']}/versions",
        json={"items": [{"input": "q"}], "golden": True},
        headers=h,
    )
    assert version.status_code == 201, version.text
    text = json.dumps(body).replace("DATASET", dataset.json()["id"])
    r = await client.post(
        url, content=text.encode(), headers={**h, "Content-Type": "application/json"}
    )
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == field, r.text
    assert "lone surrogate" in error["message"] or "NUL" in error["message"], r.text


@pytest.mark.parametrize(
    "url",
    [
        "/datasets/%ED%A0%80",
        "/datasets?name=%ED%A0%80",
        "/preprod-evals?dataset_id=%ED%A0%80",
        "/sessions/%ED%A0%80/failure-modes",
        "/scores?run_id=%ED%A0%80",
    ],
)
async def test_a_surrogate_spelled_in_the_url_is_never_a_500(
    client: httpx.AsyncClient, admin_key: CreatedKey, url: str
) -> None:
    """A URL is decoded as UTF-8 with replacement, so its parameters never hold a surrogate."""
    r = await client.get(url, headers=auth(admin_key))
    assert r.status_code in (200, 404), r.text


def test_a_union_branch_is_not_part_of_the_field_path() -> None:
    """pydantic locates an optional (`X | None`) field's errors under each branch it tried."""
    cases = [
        ({"name": ""}, "name"),
        ({"headers": {"a": 5}}, "headers.a"),
        ({"headers": {"none": 5}}, "headers.none"),
        ({"url": "x"}, "url"),
    ]
    for body, field in cases:
        try:
            ConnectionUpdate.model_validate(body)
        except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError
            errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]  # type: ignore[attr-defined]
        else:
            raise AssertionError(body)
        error = problems_body(errors, body)["error"]
        assert error["field"] == field, error
        assert "errors" not in error, error
    assert field_path(("query", "limit", "int")) == "limit"
    assert field_path(("body", "items", 3, "input"), {"items": [{}] * 4}, kind="missing") == (
        "items[3].input"
    )


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/datasets", {"name": "d", "\ud800": 1}, "\\ud800"),
        ("/datasets", {"name": "d", "a\x00": 1}, "a\\x00"),
        (
            "/agent-connections",
            {"name": "c", "url": "https://agent.example.com", "headers": {"\ud800": 5}},
            "headers.\\ud800",
        ),
    ],
)
async def test_a_key_no_database_can_store_is_named_escaped(
    client: httpx.AsyncClient, admin_key: CreatedKey, url: str, body: dict[str, Any], field: str
) -> None:
    """The field named is the key sent, escaped: as it was, the answer could not be encoded."""
    r = await client.post(
        url,
        content=json.dumps(body).encode(),
        headers={**auth(admin_key), "Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field, r.text


NAME_FIELDS = frozenset({"name", "label", "version_label", "versionLabel", "model", "provider"})
"""Names, labels and model names people read in lists, pages and the frontier chart."""
RECORDED_AS_SENT = ("/sessions",)
"""Routes that store what an agent reported (a span's name), as it reported it."""


def name_slots() -> list[Slot]:
    return [
        slot
        for slot in SLOTS
        if slot.path[-1] in NAME_FIELDS
        and _kind(slot.schema) == "string"
        and not slot.url.startswith(RECORDED_AS_SENT)
    ]


def test_the_name_fields_are_found() -> None:
    names = {slot.name for slot in name_slots()}
    for expected in (
        "POST /datasets  name",
        "POST /agent-connections  name",
        "PATCH /agent-connections/x_1  name",
        "POST /agent-connections  model",
        "POST /model-sweeps  arms[0].label",
        "POST /model-sweeps  versionLabel",
        "POST /preprod-evals  version_label",
        "POST /preprod-evals/imports  version_label",
        "POST /notification-sinks  name",
        "POST /judges {'type': 'llm_prompt'} endpoint.model",
        "POST /agent-connections  provider",
        "PATCH /agent-connections/x_1  provider",
    ):
        assert expected in names, sorted(names)


@sqlite_only("a name is refused by the schema before any query; stored names: each route's tests")
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("   ", "must not be blank"),
        ("\t\n", "must not be blank"),
        ("two\nlines", "must not hold control characters (U+000A at position 3)"),
        ("arm\x0b", "must not hold control characters (U+000B at position 3)"),
        ("\x1b[31mred", "must not hold control characters (U+001B at position 0)"),
        ("c1\x85", "must not hold control characters (U+0085 at position 2)"),
        # a right-to-left override reverses the verdict sentence a label sits in
        ("mini\u202e", "must not hold control characters (U+202E at position 4)"),
        ("\u2067isolate", "must not hold control characters (U+2067 at position 0)"),
    ],
)
async def test_a_blank_name_or_one_with_control_characters_is_a_422_naming_it(
    dialect: str, client: httpx.AsyncClient, admin_key: CreatedKey, text: str, message: str
) -> None:
    """A blank name shows as nothing in every list, and a control character breaks a page's
    layout or makes the frontier chart's SVG invalid XML: every name field refuses both."""
    failures = []
    for slot in name_slots():
        r = await _send(client, admin_key, slot, text)
        error = r.json().get("error", {}) if r.status_code != 204 else {}
        problems = error.get("errors", [error])
        named = [p for p in problems if slot.field_named([p.get("field", "")])]
        if r.status_code != 422 or not any(message in p["message"] for p in named):
            failures.append(f"{slot.name}: {r.status_code} {r.text[:300]}")
    assert not failures, "\n".join(failures)


@sqlite_only("a number is refused by the schema before any query; stored numbers: each route's")
@pytest.mark.parametrize("number", [math.inf, -math.inf, math.nan])
async def test_a_number_json_cannot_hold_is_a_422_naming_the_field(
    dialect: str, client: httpx.AsyncClient, admin_key: CreatedKey, number: float
) -> None:
    """`Infinity`, `-Infinity`, `NaN` (and `1e999`, which reads as infinity) in any number field:
    stored, each would come back as null, which means "not recorded"."""
    failures = []
    for slot in SLOTS:
        if _kind(slot.schema) not in ("number", "integer") or slot.schema.get("x-any"):
            continue
        r = await _send(client, admin_key, slot, number)
        error = r.json().get("error", {}) if r.status_code != 204 else {}
        fields = [p["field"] for p in error.get("errors", [error])]
        if r.status_code != 422 or not slot.field_named(fields):
            failures.append(f"{slot.name}: {r.status_code} {r.text[:300]}")
        elif not any(why in r.text for why in ("finite", "JSON cannot", "valid integer")):
            failures.append(f"{slot.name}: does not say why: {r.text[:300]}")
    assert not failures, "\n".join(failures)
