"""`POST /sessions` (native JSON) and listing sessions."""

from __future__ import annotations

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.conftest import auth

SPEC_EXAMPLE = {
    "session": {"id": "trace-eval-001", "agent_name": "my-agent"},
    "spans": [
        {
            "id": "span-1",
            "name": "agent.run",
            "kind": "agent",
            "input": "<golden prompt>",
            "output": "<answer>",
            "attributes": {
                "neens.eval_run_id": "ppr_1234",
                "neens.dataset_item_id": "dsi_1",
                "neens.version_label": "release-2.1",
            },
        }
    ],
}


async def test_the_spec_native_session_is_stored_with_its_correlation_keys(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.post("/sessions", json=SPEC_EXAMPLE, headers=auth(ingest_key))
    assert r.status_code == 200, r.text
    assert r.json() == {
        "sessionId": "trace-eval-001",
        "acceptedSpans": 1,
        "rejectedSpans": 0,
        "rejections": [],
        "warnings": [],
    }
    session = (await client.get("/sessions/trace-eval-001", headers=auth(ingest_key))).json()
    assert session["agentName"] == "my-agent"
    assert session["source"] == "native"
    assert session["input"] == "<golden prompt>"
    assert session["output"] == "<answer>"
    assert session["evalRunId"] == "ppr_1234"
    assert session["datasetItemId"] == "dsi_1"
    assert session["versionLabel"] == "release-2.1"
    assert session["spans"][0]["kind"] == "agent"


async def test_native_llm_spans_are_priced_from_model_and_tokens(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    body = {
        "session": {"id": "s-llm", "agent_name": "refund-agent"},
        "spans": [
            {
                "id": "root",
                "name": "agent.run",
                "kind": "agent",
                "input": "hi",
                "start_time": "2026-11-30T08:00:00Z",
                "end_time": "2026-11-30T08:00:02Z",
            },
            {
                "id": "llm",
                "parent_id": "root",
                "name": "chat",
                "kind": "llm",
                "model": "gpt-4o",
                "input_tokens": 1000,
                "output_tokens": 200,
                "start_time": "2026-11-30T08:00:00.5Z",
                "end_time": "2026-11-30T08:00:01Z",
            },
        ],
    }
    r = await client.post("/sessions", json=body, headers=auth(ingest_key))
    assert r.status_code == 200, r.text
    session = (await client.get("/sessions/s-llm", headers=auth(ingest_key))).json()
    assert session["models"] == ["gpt-4o"]
    assert session["costUsd"] == pytest.approx(0.0045, rel=1e-9)
    assert session["latencyMs"] == pytest.approx(2000.0)
    assert session["stepCount"] == 1


async def test_native_spans_sent_later_merge_into_the_session(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    await client.post("/sessions", json=SPEC_EXAMPLE, headers=auth(ingest_key))
    more = {
        "session": {"id": "trace-eval-001"},
        "spans": [{"id": "span-2", "parent_id": "span-1", "name": "lookup", "kind": "tool"}],
    }
    await client.post("/sessions", json=more, headers=auth(ingest_key))
    session = (await client.get("/sessions/trace-eval-001", headers=auth(ingest_key))).json()
    assert session["spanCount"] == 2
    assert session["agentName"] == "my-agent"
    assert [c["name"] for c in session["spans"][0]["children"]] == ["lookup"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"session": {"id": "x"}, "spans": []}, "spans"),
        ({"session": {"id": ""}, "spans": [{"id": "a", "name": "n"}]}, "session.id"),
        ({"session": {"id": "x"}, "spans": [{"name": "n"}]}, "spans[0].id"),
        (
            {"session": {"id": "x"}, "spans": [{"id": "a", "name": "n", "input_tokens": -3}]},
            "spans[0].input_tokens",
        ),
        (
            {"session": {"id": "x"}, "spans": [{"id": "a", "name": "n", "status": "meh"}]},
            "spans[0].status",
        ),
        (
            {"session": {"id": "x"}, "spans": [{"id": "a", "name": "n", "colour": "red"}]},
            "spans[0].colour",
        ),
        (
            {"session": {"id": "x"}, "spans": [{"id": "a", "name": "n", "output": "a\x00b"}]},
            "spans[0].output",
        ),
        ({"spans": [{"id": "a", "name": "n"}]}, "session"),
        # A time without an offset is refused, never assumed to be UTC.
        (
            {
                "session": {"id": "x"},
                "spans": [{"id": "a", "name": "n", "start_time": "2026-11-30T08:00:00"}],
            },
            "spans[0].start_time",
        ),
        (
            {"session": {"id": "x"}, "spans": [{"id": "a", "name": "n", "end_time": 10**30}]},
            "spans[0].end_time",
        ),
        # Valid instants whose UTC form falls outside years 1-9999.
        (
            {
                "session": {"id": "x"},
                "spans": [{"id": "a", "name": "n", "start_time": "0001-01-01T00:00:00+05:00"}],
            },
            "spans[0].start_time",
        ),
        (
            {
                "session": {"id": "x"},
                "spans": [{"id": "a", "name": "n", "end_time": "9999-12-31T23:59:59-05:00"}],
            },
            "spans[0].end_time",
        ),
    ],
)
async def test_a_bad_native_session_is_refused_naming_the_field_and_stores_nothing(
    client: httpx.AsyncClient, ingest_key: CreatedKey, body: dict[str, object], field: str
) -> None:
    r = await client.post("/sessions", json=body, headers=auth(ingest_key))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    assert (await client.get("/sessions", headers=auth(ingest_key))).json()["sessions"] == []


async def _native(
    client: httpx.AsyncClient, key: CreatedKey, sid: str, agent: str | None, start: str
) -> None:
    session: dict[str, object] = {"id": sid}
    if agent:
        session["agent_name"] = agent
    body = {
        "session": session,
        "spans": [
            {
                "id": "r",
                "name": "agent.run",
                "kind": "agent",
                "start_time": start,
                "end_time": start,
            }
        ],
    }
    r = await client.post("/sessions", json=body, headers=auth(key))
    assert r.status_code == 200, r.text


async def test_sessions_filter_by_agent_and_time_and_page_newest_first(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    await _native(client, ingest_key, "a1", "refund-agent", "2026-11-01T10:00:00Z")
    await _native(client, ingest_key, "a2", "escalation-agent", "2026-11-02T10:00:00Z")
    await _native(client, ingest_key, "a3", "refund-agent", "2026-11-03T10:00:00Z")
    await _native(client, ingest_key, "a4", None, "2026-11-04T10:00:00Z")
    h = auth(ingest_key)

    async def ids(**params: object) -> list[str]:
        r = await client.get("/sessions", params=params, headers=h)
        assert r.status_code == 200, r.text
        return [s["id"] for s in r.json()["sessions"]]

    assert await ids() == ["a4", "a3", "a2", "a1"]
    assert await ids(agent_name="refund-agent") == ["a3", "a1"]
    assert await ids(start="2026-11-02T00:00:00Z", end="2026-11-04T00:00:00Z") == ["a3", "a2"]
    assert await ids(start="2026-11-02T00:00:00+00:00", agent_name="refund-agent") == ["a3"]
    # A session with no agent name keeps a null agent name; it is never folded into another.
    unnamed = (await client.get("/sessions/a4", headers=h)).json()
    assert unnamed["agentName"] is None

    first = (await client.get("/sessions", params={"limit": 3}, headers=h)).json()
    assert [s["id"] for s in first["sessions"]] == ["a4", "a3", "a2"]
    rest = (
        await client.get("/sessions", params={"limit": 3, "cursor": first["nextCursor"]}, headers=h)
    ).json()
    assert [s["id"] for s in rest["sessions"]] == ["a1"]
    assert rest["nextCursor"] is None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start": "2026-11-02T00:00:00"}, "start"),  # no offset: refused, never assumed UTC
        ({"start": "yesterday"}, "start"),
        ({"start": "0.5"}, "start"),  # not read as a Unix time: the format is ISO 8601
        ({"start": "2026-11-02T00:00:00Z", "end": "2026-11-01T00:00:00Z"}, "end"),
        ({"cursor": "abc"}, "cursor"),
        ({"cursor": "99999999999999999999999"}, "cursor"),  # beyond any row key
        ({"cursor": "٣"}, "cursor"),  # a digit, but not an ASCII one
        ({"start": "0001-01-01T00:00:00+05:00"}, "start"),  # year 0 in UTC
        ({"end": "9999-12-31T23:59:59-05:00"}, "end"),  # year 10000 in UTC
        ({"limit": 0}, "limit"),
    ],
)
async def test_bad_session_filters_are_refused_naming_the_parameter(
    client: httpx.AsyncClient, ingest_key: CreatedKey, params: dict[str, object], field: str
) -> None:
    r = await client.get("/sessions", params=params, headers=auth(ingest_key))
    assert r.status_code == 422
    assert r.json()["error"]["field"] == field


async def test_an_unknown_session_is_404(client: httpx.AsyncClient, ingest_key: CreatedKey) -> None:
    r = await client.get("/sessions/nope", headers=auth(ingest_key))
    assert r.status_code == 404


# --- hardening: no shape of session answers 500; dubious values are flagged -------------------

HUGE = 2**62 + 1


async def test_native_token_totals_beyond_64_bits_are_flagged_not_a_500(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    llm = {"name": "chat", "kind": "llm", "model": "gpt-4o"}
    counts = {"gen_ai.usage.input_tokens": HUGE, "gen_ai.usage.output_tokens": HUGE}
    spans = [{**llm, "id": f"c{n}", "attributes": counts} for n in range(2)]
    r = await client.post(
        "/sessions", json={"session": {"id": "big"}, "spans": spans}, headers=auth(ingest_key)
    )
    assert r.status_code == 200, r.text
    session = (await client.get("/sessions/big", headers=auth(ingest_key))).json()
    assert (session["inputTokens"], session["outputTokens"]) == (None, None)
    assert [w["code"] for w in session["warnings"]] == ["token_sum_overflow"] * 2
    assert session["costStatus"] == "priced" and session["costUsd"] > 0


@pytest.mark.parametrize("tokens", ["120", 120.5, 2**53 + 1, True])
async def test_a_native_token_count_that_is_not_an_integer_is_refused(
    client: httpx.AsyncClient, ingest_key: CreatedKey, tokens: object
) -> None:
    span = {"id": "a", "name": "chat", "kind": "llm", "model": "gpt-4o", "input_tokens": tokens}
    r = await client.post(
        "/sessions", json={"session": {"id": "s"}, "spans": [span]}, headers=auth(ingest_key)
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "spans[0].input_tokens"


async def test_native_dubious_values_are_stored_and_listed_as_warnings(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    spans = [
        {
            "id": "llm",
            "name": "chat",
            "kind": "llm",
            "model": "gpt-4o",
            "output_tokens": 5,
            "attributes": {"gen_ai.usage.input_tokens": "120"},
            "start_time": "2026-11-30T08:00:02Z",
            "end_time": "2026-11-30T08:00:01Z",
        }
    ]
    r = await client.post(
        "/sessions", json={"session": {"id": "odd"}, "spans": spans}, headers=auth(ingest_key)
    )
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["acceptedSpans"] == 1
    assert len(result["warnings"]) == 2
    assert any("gen_ai.usage.input_tokens" in w and "'120'" in w for w in result["warnings"])
    assert any("before start_time" in w for w in result["warnings"])
    session = (await client.get("/sessions/odd", headers=auth(ingest_key))).json()
    assert session["inputTokens"] == 120
    assert session["latencyMs"] is None
    assert sorted(w["code"] for w in session["spans"][0]["warnings"]) == [
        "end_before_start",
        "token_count_text",
    ]


async def test_a_native_chain_of_5000_spans_and_a_parent_cycle_read_back(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    chain = [{"id": "s0", "name": "s0"}] + [
        {"id": f"s{n}", "parent_id": f"s{n - 1}", "name": f"s{n}"} for n in range(1, 5000)
    ]
    cycle = [
        {"id": "x", "parent_id": "y", "name": "x"},
        {"id": "y", "parent_id": "x", "name": "y"},
    ]
    r = await client.post(
        "/sessions",
        json={"session": {"id": "deep"}, "spans": chain + cycle},
        headers=auth(ingest_key),
    )
    assert r.status_code == 200, r.text
    r = await client.get("/sessions/deep", headers=auth(ingest_key))
    assert r.status_code == 200
    session = r.json()
    assert session["spanCount"] == 5002
    assert sorted(s["name"] for s in session["spans"]) == ["s0", "x", "y"]
    assert [w["code"] for w in session["warnings"]] == ["parent_cycle"]
    listed = (await client.get("/sessions", headers=auth(ingest_key))).json()
    assert listed["sessions"][0]["warnings"] == session["warnings"]


def _nested(depth: int) -> str:
    return '{"k":' * depth + '"leaf"' + "}" * depth


@pytest.mark.parametrize("depth", [33, 100])
async def test_native_attributes_nested_too_deep_refuse_only_their_span(
    client: httpx.AsyncClient, ingest_key: CreatedKey, depth: int
) -> None:
    body = (
        '{"session":{"id":"n"},"spans":['
        f'{{"id":"deep","name":"deep","attributes":{{"deep.attr":{_nested(depth)}}}}},'
        f'{{"id":"fine","name":"fine","attributes":{{"ok":{_nested(32)}}}}}]}}'
    )
    r = await client.post(
        "/sessions",
        content=body,
        headers={**auth(ingest_key), "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    result = r.json()
    assert (result["acceptedSpans"], result["rejectedSpans"]) == (1, 1)
    assert "'deep.attr'" in result["rejections"][0]
    assert "32 levels" in result["rejections"][0]
    session = (await client.get("/sessions/n", headers=auth(ingest_key))).json()
    assert [s["name"] for s in session["spans"]] == ["fine"]


async def test_native_session_attributes_nested_too_deep_refuse_every_span(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    body = (
        f'{{"session":{{"id":"n","attributes":{{"deep":{_nested(100)}}}}},'
        '"spans":[{"id":"a","name":"a"},{"id":"b","name":"b"}]}'
    )
    r = await client.post(
        "/sessions", content=body, headers={**auth(ingest_key), "Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["rejectedSpans"] == 2
    assert "session attribute 'deep'" in r.json()["rejections"][0]


@pytest.mark.parametrize("depth", [260, 700, 5000])
async def test_a_native_body_nested_deeper_than_json_bodies_may_be_is_a_clean_400(
    client: httpx.AsyncClient, ingest_key: CreatedKey, depth: int
) -> None:
    span = f'{{"id":"a","name":"a","attributes":{{"x":{_nested(depth)}}}}}'
    body = f'{{"session":{{"id":"n"}},"spans":[{span}]}}'
    r = await client.post(
        "/sessions", content=body, headers={**auth(ingest_key), "Content-Type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert "128 levels" in r.json()["error"]["message"]
    missing = await client.get("/sessions/n", headers=auth(ingest_key))
    assert missing.status_code == 404


async def test_a_session_id_of_a_push_answer_is_refused(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    body = {
        "session": {"id": "ppr_0123456789abcdef01234567:dsi_0123456789abcdef01234567"},
        "spans": [{"id": "agent", "name": "agent.call", "kind": "agent", "output": "forged"}],
    }
    r = await client.post("/sessions", json=body, headers=auth(ingest_key))
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["field"] == "session.id"
    assert "push run" in error["message"]
    assert (await client.get("/sessions", headers=auth(ingest_key))).json()["sessions"] == []
