"""An LLM judge's `endpoint.apiKey`: sent as `Authorization: Bearer <apiKey>`, so it is refused
when it is empty or could not be sent as an HTTP header value."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.support.preprod import auth
from tests.support.sqlite_only import sqlite_only


def _body(judge_type: str, api_key: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": f"judge-{judge_type}",
        "type": judge_type,
        "template": "{output}",
        "endpoint": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m", "apiKey": api_key},
    }
    if judge_type == "classifier":
        body["labels"] = ["a", "b"]
    return body


@sqlite_only("the schema refuses the key before any query; stored keys: test_secrets_at_rest.py")
@pytest.mark.parametrize("judge_type", ["llm_prompt", "classifier"])
@pytest.mark.parametrize(
    ("api_key", "says"),
    [
        ("", "leave it out"),
        ("   ", "leave it out"),
        ("\t", "leave it out"),
        ("a\nb", "printable ASCII"),
        ("sk-\r\nX-Injected: 1", "printable ASCII"),
        ("sk-\x00", "NUL"),
        ("sk-\x7f", "printable ASCII"),
        ("sk-\u00e9t\u00e9", "printable ASCII"),
        ("sk-\u2028", "printable ASCII"),
        (" sk-x", "start or end with a space"),
        ("sk-x\t", "start or end with a space"),
        ("s" * 8193, "8192"),
    ],
)
async def test_an_api_key_that_cannot_be_sent_is_refused(
    client: httpx.AsyncClient, admin_key: CreatedKey, judge_type: str, api_key: str, says: str
) -> None:
    r = await client.post("/judges", json=_body(judge_type, api_key), headers=auth(admin_key))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "endpoint.apiKey", r.text
    assert says in r.json()["error"]["message"], r.text
    if api_key.strip():
        assert api_key not in r.text  # a secret is not echoed back


@pytest.mark.parametrize(("api_key", "has_key"), [("sk-proj_AbC.123-~+/=", True), (None, False)])
async def test_a_usable_api_key_or_none_is_accepted(
    client: httpx.AsyncClient, admin_key: CreatedKey, api_key: str | None, has_key: bool
) -> None:
    body = _body("llm_prompt", api_key)
    if api_key is None:
        del body["endpoint"]["apiKey"]
    r = await client.post("/judges", json=body, headers=auth(admin_key))
    assert r.status_code == 201, r.text
    assert r.json()["hasApiKey"] is has_key


async def test_a_null_api_key_means_no_key(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    r = await client.post("/judges", json=_body("llm_prompt", None), headers=auth(admin_key))
    assert r.status_code == 201, r.text
    assert r.json()["hasApiKey"] is False


async def test_the_endpoint_cannot_be_changed_by_patch(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    """PATCH changes no endpoint, so no apiKey slips in that way."""
    r = await client.post("/judges", json=_body("llm_prompt", "sk-x"), headers=auth(admin_key))
    assert r.status_code == 201, r.text
    changed = await client.patch(
        f"/judges/{r.json()['id']}",
        json={"endpoint": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m", "apiKey": "a\nb"}},
        headers=auth(admin_key),
    )
    assert changed.status_code == 422, changed.text
    assert changed.json()["error"]["field"] == "endpoint", changed.text
