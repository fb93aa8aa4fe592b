"""Push mode: Neens calls real agent endpoints on loopback, records, links and scores."""

from __future__ import annotations

import httpx
import pytest

from neens.demo.endpoints import DEFAULT_ANSWER, Agent, agent_suite, refused_url, serve
from neens.store.keys import CreatedKey
from tests.support.preprod import (
    auth,
    connection,
    create_run,
    golden_dataset,
    items_of,
    push_through,
    wait_for_run,
)

ITEMS = [
    {"input": "Where is order 17?", "expected_output": "Order 17 shipped on 3 June."},
    {"input": "Can I return shoes?", "expected_output": "Yes, within 30 days."},
    {"input": "Who is the CEO?", "expected_output": "Ada Lovelace."},
]
RIGHT = {item["input"]: item["expected_output"] for item in ITEMS}


async def test_a_push_run_calls_the_agent_once_per_item_and_scores_every_answer(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, version_id = await golden_dataset(client, admin_key, ITEMS)
    with serve(*agent_suite(RIGHT)) as agents:
        conn = await connection(client, admin_key, agents.url("/neens"), model="claude-haiku-4-5")
        run = await create_run(
            client,
            admin_key,
            dataset_id=dataset_id,
            runner_mode="push",
            agent_connection_id=conn,
            version_label="pr-482",
        )
        assert run["status"] == "running"
        assert run["model"] == "claude-haiku-4-5"
        assert run["modelProvider"] == "agent_http"
        assert run["datasetVersionId"] == version_id
        done = await wait_for_run(client, admin_key, run["id"])
    assert done["status"] == "completed"
    assert done["counts"] == {"pending": 0, "captured": 0, "scored": 3, "error": 0}
    # One call per item, with the correlation ids of the neens request format.
    bodies = [call.body for call in agents.calls]
    assert sorted(b["input"] for b in bodies) == sorted(RIGHT)
    assert {b["eval_run_id"] for b in bodies} == {run["id"]}
    assert {b["version_label"] for b in bodies} == {"pr-482"}
    items = await items_of(client, admin_key, run["id"])
    assert {i["item_id"] for i in items} == {b["dataset_item_id"] for b in bodies}
    assert all(i["status"] == "scored" and i["passed"] is True for i in items)
    assert all(i["score"] == pytest.approx(1.0) for i in items)
    # Each answer was recorded as a session linked to its item.
    session = (
        await client.get(f"/sessions/{items[0]['session_id']}", headers=auth(admin_key))
    ).json()
    assert session["output"] == RIGHT[items[0]["input"]]
    assert session["evalRunId"] == run["id"]
    assert session["datasetItemId"] == items[0]["item_id"]


async def test_the_chat_format_sends_the_frozen_model_and_reads_usage_for_cost(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS[:1])
    usage = {"prompt_tokens": 1000, "completion_tokens": 200}
    with serve(*agent_suite(RIGHT, usage=usage)) as agents:
        conn = await connection(
            client, admin_key, agents.url("/chat"), requestFormat="chat", model="gpt-4o"
        )
        run = await create_run(
            client,
            admin_key,
            dataset_id=dataset_id,
            runner_mode="push",
            agent_connection_id=conn,
        )
        await wait_for_run(client, admin_key, run["id"])
    [body] = [call.body for call in agents.calls]
    assert body == {"model": "gpt-4o", "messages": [{"role": "user", "content": ITEMS[0]["input"]}]}
    [item] = await items_of(client, admin_key, run["id"])
    session = (await client.get(f"/sessions/{item['session_id']}", headers=auth(admin_key))).json()
    assert session["inputTokens"] == 1000
    assert session["costUsd"] == pytest.approx((1000 * 2.5 + 200 * 10) / 1e6)


async def test_editing_the_connection_later_does_not_change_a_runs_model(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS[:1])
    conn = await connection(client, admin_key, refused_url(), model="claude-haiku-4-5")
    run = await create_run(
        client, admin_key, dataset_id=dataset_id, runner_mode="push", agent_connection_id=conn
    )
    r = await client.patch(
        f"/agent-connections/{conn}", json={"model": "claude-sonnet-4-5"}, headers=auth(admin_key)
    )
    assert r.json()["model"] == "claude-sonnet-4-5"
    again = (await client.get(f"/preprod-evals/{run['id']}", headers=auth(admin_key))).json()
    assert again["model"] == "claude-haiku-4-5"


async def test_a_connection_without_a_model_records_null_never_a_guess(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS[:1])
    conn = await connection(client, admin_key, refused_url())
    run = await create_run(
        client, admin_key, dataset_id=dataset_id, runner_mode="push", agent_connection_id=conn
    )
    assert run["model"] is None


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/500", "HTTP 500"),
        ("/garbage", "not answer JSON"),
        ("/empty", "empty body"),
        ("/oversize", "8 MiB"),
        ("/no-answer", "no answer at 'output'"),
        # The slow endpoint answers after 5 s: a call limited to 2 s times out.
        pytest.param("/slow", "timeout", marks=pytest.mark.push_timeout(2.0)),
    ],
)
async def test_a_misbehaving_endpoint_errors_each_item_with_its_reason_and_fails_the_run(
    client: httpx.AsyncClient, admin_key: CreatedKey, path: str, reason: str
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS[:2])
    with serve(*agent_suite(RIGHT)) as agents:
        done = run = await push_through(client, admin_key, dataset_id, agents.url(path))
    assert done["status"] == "failed"
    assert done["error"]
    items = await items_of(client, admin_key, run["id"])
    assert [i["status"] for i in items] == ["error", "error"]
    assert all(reason in i["error"] for i in items), [i["error"] for i in items]
    gate = (await client.get(f"/preprod-evals/{run['id']}/gate", headers=auth(admin_key))).json()
    assert gate["passed"] is False


async def test_a_dead_endpoint_fails_the_run_and_the_server_keeps_serving(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    conn = await connection(client, admin_key, refused_url())
    run = await create_run(
        client, admin_key, dataset_id=dataset_id, runner_mode="push", agent_connection_id=conn
    )
    done = await wait_for_run(client, admin_key, run["id"])
    assert done["status"] == "failed"
    items = await items_of(client, admin_key, run["id"])
    assert all("could not reach" in i["error"] for i in items)
    assert (await client.get("/healthz")).status_code == 200


async def test_a_flaky_endpoint_costs_only_the_items_it_failed(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    fourth = {"input": "4th", "expected_output": DEFAULT_ANSWER}
    dataset_id, _ = await golden_dataset(client, admin_key, [*ITEMS, fourth])
    with serve(*agent_suite(RIGHT)) as agents:
        done = run = await push_through(client, admin_key, dataset_id, agents.url("/flaky"))
    items = await items_of(client, admin_key, run["id"])
    statuses = sorted(i["status"] for i in items)
    assert statuses.count("error") == 2  # every other call answered 500
    assert done["status"] in ("completed", "completed_with_regressions")
    assert all("HTTP 500" in i["error"] for i in items if i["status"] == "error")


async def test_answer_path_reads_the_answer_elsewhere(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS[:1])
    with serve(*agent_suite(RIGHT)) as agents:
        done = run = await push_through(
            client,
            admin_key,
            dataset_id,
            agents.url("/nested"),
            connection_fields={"answerPath": "data.answers[0].text"},
        )
    assert done["status"] == "completed"
    [item] = await items_of(client, admin_key, run["id"])
    assert item["passed"] is True


async def test_a_prompt_is_truncated_at_200000_characters_on_the_way_out(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    huge = "é" * 250_000
    dataset_id, _ = await golden_dataset(
        client, admin_key, [{"input": huge, "expected_output": "x"}]
    )
    with serve(*agent_suite()) as agents:
        run = await push_through(client, admin_key, dataset_id, agents.url("/neens"))
    [body] = [call.body for call in agents.calls]
    assert body["input"] == huge[:200_000]
    # The run's frozen item keeps the whole prompt.
    [item] = await items_of(client, admin_key, run["id"])
    assert item["input"] == huge


@pytest.mark.parametrize("wire", ["neens", "chat"])
async def test_the_agent_name_is_what_the_reply_says_never_the_connections_name(
    client: httpx.AsyncClient, admin_key: CreatedKey, wire: str
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    named = {ITEMS[0]["input"]: "refund-agent", ITEMS[1]["input"]: "  "}
    agent = Agent(RIGHT, wire=wire, path="/named", agent_name=named.get, model="gpt-4o")  # type: ignore[arg-type]
    with serve(agent) as agents:
        run = await push_through(
            client, admin_key, dataset_id, agents.url("/named"),
            connection_fields={"name": "support-endpoint", "requestFormat": wire},
        )  # fmt: skip
    assert run["status"] == "completed"
    names = {}
    for item in await items_of(client, admin_key, run["id"]):
        session = (
            await client.get(f"/sessions/{item['session_id']}", headers=auth(admin_key))
        ).json()
        names[item["input"]] = session["agentName"]
    assert names == {
        ITEMS[0]["input"]: "refund-agent",
        ITEMS[1]["input"]: None,  # a blank name is no name
        ITEMS[2]["input"]: None,  # no name in the reply: none, not "support-endpoint"
    }
