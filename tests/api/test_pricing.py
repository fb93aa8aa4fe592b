"""Pricing: genai-prices by default, project overrides, and unpriced never shown as free."""

from __future__ import annotations

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.conftest import auth
from tests.support.otlp import agent_trace, export_request

PROTO = {"Content-Type": "application/x-protobuf"}


async def _send(client: httpx.AsyncClient, key: CreatedKey, model: str) -> str:
    tid, spans = agent_trace(model=model)
    r = await client.post(
        "/v1/traces",
        content=export_request(spans).SerializeToString(),
        headers={**auth(key), **PROTO},
    )
    assert r.status_code == 200
    return tid.hex()


async def test_a_session_calling_an_unknown_model_is_unpriced_and_names_the_model(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    sid = await _send(client, ingest_key, "acme-internal-llm-7b")
    session = (await client.get(f"/sessions/{sid}", headers=auth(ingest_key))).json()
    assert session["costUsd"] is None
    assert session["costStatus"] == "unpriced"
    assert any("acme-internal-llm-7b" in m for m in session["unpricedModels"])
    llm_spans = [c for c in session["spans"][0]["children"] if c["kind"] == "llm"]
    assert all(c["costUsd"] is None for c in llm_spans)
    assert all("acme-internal-llm-7b" in c["unpricedReason"] for c in llm_spans)


async def test_setting_a_price_reprices_stored_sessions_and_new_ones(
    client: httpx.AsyncClient, ingest_key: CreatedKey, admin_key: CreatedKey
) -> None:
    sid = await _send(client, ingest_key, "acme-internal-llm-7b")
    r = await client.put(
        "/model-pricing/acme-internal-llm-7b",
        json={"inputPerMTokUsd": 0.5, "outputPerMTokUsd": 1.5},
        headers=auth(admin_key),
    )
    assert r.status_code == 200
    assert r.json() == {
        "model": "acme-internal-llm-7b",
        "inputPerMTokUsd": 0.5,
        "outputPerMTokUsd": 1.5,
        "source": "override",
        "repricedSessions": 1,
    }
    expected = 2 * (1000 * 0.5 + 200 * 1.5) / 1e6
    session = (await client.get(f"/sessions/{sid}", headers=auth(ingest_key))).json()
    assert session["costUsd"] == pytest.approx(expected, rel=1e-12)
    assert session["costStatus"] == "priced"
    fresh = await _send(client, ingest_key, "acme-internal-llm-7b")
    session = (await client.get(f"/sessions/{fresh}", headers=auth(ingest_key))).json()
    assert session["costUsd"] == pytest.approx(expected, rel=1e-12)

    listed = (await client.get("/model-pricing", headers=auth(ingest_key))).json()
    assert [p["model"] for p in listed["prices"]] == ["acme-internal-llm-7b"]

    r = await client.delete("/model-pricing/acme-internal-llm-7b", headers=auth(admin_key))
    assert r.status_code == 204
    session = (await client.get(f"/sessions/{sid}", headers=auth(ingest_key))).json()
    assert session["costUsd"] is None


async def test_an_override_wins_over_genai_prices(
    client: httpx.AsyncClient, ingest_key: CreatedKey, admin_key: CreatedKey
) -> None:
    await client.put(
        "/model-pricing/gpt-4o",
        json={"inputPerMTokUsd": 1.0, "outputPerMTokUsd": 1.0},
        headers=auth(admin_key),
    )
    sid = await _send(client, ingest_key, "gpt-4o")
    session = (await client.get(f"/sessions/{sid}", headers=auth(ingest_key))).json()
    assert session["costUsd"] == pytest.approx(2 * 1200 / 1e6, rel=1e-12)


async def test_prices_are_per_project(
    client: httpx.AsyncClient,
    ingest_key: CreatedKey,
    admin_key: CreatedKey,
    other_project_key: CreatedKey,
) -> None:
    await client.put(
        "/model-pricing/acme-internal-llm-7b",
        json={"inputPerMTokUsd": 1.0, "outputPerMTokUsd": 1.0},
        headers=auth(admin_key),
    )
    sid = await _send(client, other_project_key, "acme-internal-llm-7b")
    session = (await client.get(f"/sessions/{sid}", headers=auth(other_project_key))).json()
    assert session["costUsd"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"inputPerMTokUsd": -1, "outputPerMTokUsd": 1}, "inputPerMTokUsd"),
        ({"inputPerMTokUsd": 1}, "outputPerMTokUsd"),
        ({"inputPerMTokUsd": 1, "outputPerMTokUsd": "cheap"}, "outputPerMTokUsd"),
        ({"inputPerMTokUsd": 1, "outputPerMTokUsd": 1, "currency": "EUR"}, "currency"),
    ],
)
async def test_a_bad_price_is_refused_naming_the_field(
    client: httpx.AsyncClient, admin_key: CreatedKey, body: dict[str, object], field: str
) -> None:
    r = await client.put("/model-pricing/m", json=body, headers=auth(admin_key))
    assert r.status_code == 422
    assert r.json()["error"]["field"] == field


async def test_removing_a_price_that_was_never_set_is_404(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    r = await client.delete("/model-pricing/nothing-here", headers=auth(admin_key))
    assert r.status_code == 404


async def test_model_names_with_slashes_work(
    client: httpx.AsyncClient, ingest_key: CreatedKey, admin_key: CreatedKey
) -> None:
    r = await client.put(
        "/model-pricing/meta-llama/Llama-3-8B",
        json={"inputPerMTokUsd": 0.1, "outputPerMTokUsd": 0.2},
        headers=auth(admin_key),
    )
    assert r.status_code == 200
    assert r.json()["model"] == "meta-llama/Llama-3-8B"


PRICE = {"inputPerMTokUsd": 0.1, "outputPerMTokUsd": 0.2}


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("", "empty"),
        ("%20", "empty"),
        ("%20%09", "empty"),
        ("m" * 501, "at most 500 characters"),
        ("%FF", "not valid UTF-8"),
        ("gpt-4o%FF", "not valid UTF-8"),
        ("%ED%A0%80", "not valid UTF-8"),  # a surrogate, which UTF-8 cannot encode
        ("%C3", "not valid UTF-8"),  # a truncated sequence
    ],
)
@pytest.mark.parametrize("method", ["PUT", "DELETE"])
async def test_a_model_name_no_span_can_report_is_refused_naming_model(
    client: httpx.AsyncClient, admin_key: CreatedKey, path: str, words: str, method: str
) -> None:
    body = PRICE if method == "PUT" else None
    r = await client.request(method, f"/model-pricing/{path}", json=body, headers=auth(admin_key))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "unprocessable"
    assert r.json()["error"]["field"] == "model"
    assert words in r.json()["error"]["message"]
    listed = (await client.get("/model-pricing", headers=auth(admin_key))).json()["prices"]
    assert listed == []


async def test_the_longest_and_non_ascii_model_names_are_kept_exactly(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    longest = "m" * 500
    for name, path in [
        (longest, longest),
        ("\ufffd", "%EF%BF%BD"),  # the replacement character itself, validly encoded
        ("modèle-ß", "mod%C3%A8le-%C3%9F"),
        (" padded ", "%20padded%20"),
    ]:
        r = await client.put(f"/model-pricing/{path}", json=PRICE, headers=auth(admin_key))
        assert r.status_code == 200, r.text
        assert r.json()["model"] == name
    listed = (await client.get("/model-pricing", headers=auth(admin_key))).json()["prices"]
    assert sorted(p["model"] for p in listed) == sorted([longest, "\ufffd", "modèle-ß", " padded "])
    r = await client.delete("/model-pricing/%EF%BF%BD", headers=auth(admin_key))
    assert r.status_code == 204
    r = await client.delete(f"/model-pricing/{longest}", headers=auth(admin_key))
    assert r.status_code == 204
