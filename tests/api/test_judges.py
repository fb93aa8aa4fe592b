"""Judges over HTTP: each type, validation, the Primary Score, and LLM judges on a run."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from neens.demo.endpoints import ChatModel, agent_suite, serve, serve_one
from neens.store.keys import CreatedKey
from tests.support.preprod import (
    auth,
    golden_dataset,
    items_of,
    push_through,
)

ITEMS = [{"input": "Where is order 17?", "expected_output": "Order 17 shipped on 3 June."}]
RIGHT = {ITEMS[0]["input"]: ITEMS[0]["expected_output"]}


async def _judge(
    client: httpx.AsyncClient, key: CreatedKey, body: dict[str, Any]
) -> httpx.Response:
    return await client.post("/judges", json=body, headers=auth(key))


async def test_each_judge_type_is_created_and_secrets_are_never_returned(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    managed = await _judge(
        client,
        admin_key,
        {
            "name": "has-order-id",
            "type": "managed",
            "check": "regex",
            "config": {"pattern": r"order \d+"},
        },
    )
    assert managed.status_code == 201, managed.text
    assert managed.json()["id"].startswith("jdg_")
    llm = await _judge(
        client,
        admin_key,
        {
            "name": "faithfulness",
            "type": "llm_prompt",
            "template": "Question: {input}\nAnswer: {output}\nReference: {expected_output}",
            "endpoint": {
                "baseUrl": "http://127.0.0.1:9/v1",
                "model": "judge-1",
                "apiKey": "sk-secret",
            },
        },
    )
    assert llm.status_code == 201, llm.text
    assert llm.json()["hasApiKey"] is True
    assert "sk-secret" not in llm.text
    composite = await _judge(
        client,
        admin_key,
        {
            "name": "quality",
            "type": "composite",
            "components": [
                {"judgeId": managed.json()["id"], "weight": 1},
                {"judgeId": llm.json()["id"], "weight": 3},
            ],
        },
    )
    assert composite.status_code == 201, composite.text
    listed = (await client.get("/judges", headers=auth(admin_key))).json()["judges"]
    assert "sk-secret" not in str(listed)
    names = {j["name"] for j in listed}
    assert {
        "Primary Score",
        "Expected-output similarity",
        "has-order-id",
        "faithfulness",
        "quality",
    } <= names


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "type": "managed", "check": "regex", "config": {}}, "config.pattern"),
        (
            {"name": "x", "type": "managed", "check": "regex", "config": {"pattern": "("}},
            "config.pattern",
        ),
        ({"name": "x", "type": "managed", "check": "telepathy"}, "check"),
        (
            {
                "name": "x",
                "type": "managed",
                "check": "json_field_match",
                "config": {"path": "a..b"},
            },
            "config.path",
        ),
        (
            {
                "name": "x",
                "type": "llm_prompt",
                "template": "no placeholder",
                "endpoint": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m"},
            },
            "template",
        ),
        (
            {
                "name": "x",
                "type": "llm_prompt",
                "template": "{output}",
                "endpoint": {"baseUrl": "ftp://x", "model": "m"},
            },
            "endpoint.baseUrl",
        ),
        ({"name": "x", "type": "composite", "components": []}, "components"),
        (
            {"name": "x", "type": "composite", "components": [{"judgeId": "jdg_nope"}]},
            "components[0].judgeId",
        ),
        (
            {
                "name": "x",
                "type": "composite",
                "components": [{"judgeId": "jdg_nope", "weight": 0}],
            },
            "components[0].weight",
        ),
        ({"name": "x", "type": "oracle"}, "type"),
    ],
)
async def test_bad_judges_are_refused_naming_the_field(
    client: httpx.AsyncClient, admin_key: CreatedKey, body: dict[str, Any], field: str
) -> None:
    r = await _judge(client, admin_key, body)
    assert r.status_code in (404, 422), r.text
    assert r.json()["error"]["field"] == field, r.text


async def test_the_primary_score_can_be_reweighted_but_not_made_cyclic(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    judges = (await client.get("/judges", headers=auth(admin_key))).json()["judges"]
    primary = next(j for j in judges if j["isPrimary"])
    contains = await _judge(
        client,
        admin_key,
        {
            "name": "mentions-shipping",
            "type": "managed",
            "check": "contains",
            "config": {"value": "shipped"},
        },
    )
    wrapper = await _judge(
        client,
        admin_key,
        {
            "name": "wrapper",
            "type": "composite",
            "components": [{"judgeId": primary["id"]}],
        },
    )
    r = await client.patch(
        f"/judges/{primary['id']}",
        json={"components": [{"judgeId": wrapper.json()["id"]}]},
        headers=auth(admin_key),
    )
    assert r.status_code == 422
    assert "cycle" in r.json()["error"]["message"]
    r = await client.patch(
        f"/judges/{primary['id']}",
        json={"components": [{"judgeId": contains.json()["id"], "weight": 2}]},
        headers=auth(admin_key),
    )
    assert r.status_code == 200
    assert r.json()["config"]["components"] == [{"judgeId": contains.json()["id"], "weight": 2.0}]


async def test_an_llm_judge_scores_a_run_and_keeps_its_prompt_and_reply(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    """The judge model is a fake OpenAI-compatible server: it stands in for a provider."""
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    with serve_one(ChatModel('{"score": 0.9, "reason": "matches the reference"}')) as llm:
        judge = await _judge(
            client,
            admin_key,
            {
                "name": "faithfulness",
                "type": "llm_prompt",
                "template": "Q: {input}\nA: {output}\nRef: {expected_output}",
                "endpoint": {"baseUrl": llm.base_url, "model": "judge-1", "apiKey": "sk-x"},
            },
        )
        with serve(*agent_suite(RIGHT)) as agents:
            done = run = await push_through(
                client,
                admin_key,
                dataset_id,
                agents.url("/neens"),
                judge_deployment_ids=[judge.json()["id"]],
            )
    assert done["status"] == "completed"
    [item] = await items_of(client, admin_key, run["id"])
    assert item["score"] == pytest.approx(0.9)
    [sent] = llm.calls
    assert sent.headers["authorization"] == "Bearer sk-x"
    prompt = (
        f"Q: {ITEMS[0]['input']}\nA: {RIGHT[ITEMS[0]['input']]}\nRef: {RIGHT[ITEMS[0]['input']]}"
    )
    assert sent.body["messages"][-1]["content"] == prompt
    scores = (
        await client.get("/scores", params={"run_id": run["id"]}, headers=auth(admin_key))
    ).json()["scores"]
    assert scores[0]["prompt"] == prompt
    assert scores[0]["rawReply"] == '{"score": 0.9, "reason": "matches the reference"}'
    assert scores[0]["source"] == "preprod"


async def test_a_judge_reply_that_cannot_be_parsed_is_an_error_never_a_zero(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    with serve_one(ChatModel("I think it is pretty good!")) as llm:
        judge = await _judge(
            client,
            admin_key,
            {
                "name": "vibes",
                "type": "llm_prompt",
                "template": "Rate: {output}",
                "endpoint": {"baseUrl": llm.base_url, "model": "judge-1"},
            },
        )
        with serve(*agent_suite(RIGHT)) as agents:
            done = run = await push_through(
                client,
                admin_key,
                dataset_id,
                agents.url("/neens"),
                judge_deployment_ids=[judge.json()["id"]],
            )
    [item] = await items_of(client, admin_key, run["id"])
    assert item["status"] == "error"
    assert item["score"] is None
    assert "vibes" in item["error"]
    # Every item errored in scoring: nothing was scored, so the run failed and its gate fails.
    assert done["status"] == "failed"
    [score] = (
        await client.get("/scores", params={"run_id": run["id"]}, headers=auth(admin_key))
    ).json()["scores"]
    assert score["score"] is None
    assert score["unscoredReason"] == "grade_parse_failure"
    assert score["rawReply"] == "I think it is pretty good!"


async def test_an_api_key_and_credentials_in_the_base_url_are_refused_together(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    """The URL's user and password go out as Basic authorization, replacing the key's Bearer
    header: the key would be stored and never sent."""

    def judge(base_url: str, **endpoint: str) -> dict[str, object]:
        return {
            "name": f"j{len(endpoint)}{len(base_url)}",
            "type": "llm_prompt",
            "template": "{output}",
            "endpoint": {"baseUrl": base_url, "model": "judge-1", **endpoint},
        }

    both = await _judge(
        client, admin_key, judge("http://juser:jpass@127.0.0.1:9/v1", apiKey="sk-secret")
    )
    assert both.status_code == 422, both.text
    error = both.json()["error"]
    assert error["field"] == "endpoint.apiKey" and "not both" in error["message"]
    assert "jpass" not in both.text and "sk-secret" not in both.text
    for body in (
        judge("http://juser:jpass@127.0.0.1:9/v1"),
        judge("http://127.0.0.1:9/v1", apiKey="sk-secret"),
    ):
        r = await _judge(client, admin_key, body)
        assert r.status_code == 201, r.text
