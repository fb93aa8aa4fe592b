"""The simulated endpoints, each behaviour observed over real HTTP, as a caller would see it."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest

from neens.demo.endpoints import (
    CALLS_PATH,
    DEFAULT_ANSWER,
    PRICED_MODEL,
    UNPRICED_MODEL,
    Agent,
    ChatModel,
    Reply,
    Scripted,
    agent_suite,
    chat_completion,
    empty,
    flaky,
    garbage,
    hang_up_server,
    judge,
    oversize,
    priced,
    refused_url,
    serve,
    server_error,
    slow,
    steady,
    unpriced,
    wrong_shape,
)
from neens.domain.pricing import PriceBook, PriceLookupError

ANSWERS = {"Where is order 17?": "It shipped.", "Can I return shoes?": "Within 30 days."}


def post(url: str, body: object, timeout: float = 5.0) -> httpx.Response:
    return httpx.post(url, json=body, timeout=timeout)


def test_a_steady_agent_answers_by_input_after_its_latency_and_counts_its_calls() -> None:
    agent = steady(ANSWERS, latency_s=0.2)
    with serve(agent) as server:
        started = time.monotonic()
        first = post(agent.url, {"input": "Where is order 17?"})
        took = time.monotonic() - started
        second = post(agent.url, {"input": "Something else"})
        counts = httpx.get(server.url(CALLS_PATH)).json()
        health = httpx.get(server.url("/healthz"))

    assert agent.url == server.url("/agent")
    assert (first.status_code, first.json()) == (200, {"output": "It shipped."})
    assert second.json() == {"output": DEFAULT_ANSWER}
    assert 0.2 <= took < 2.0
    assert agent.call_count == 2
    assert [call.body for call in agent.calls] == [
        {"input": "Where is order 17?"},
        {"input": "Something else"},
    ]
    assert counts == {"total": 2, "paths": {"/agent": 2}}
    assert health.status_code == 200 and agent.call_count == 2  # neither is a call


def test_answers_can_be_a_rule_and_a_shared_dict_can_change_mid_run() -> None:
    rule = steady(lambda prompt: "answer " + prompt.removeprefix("question "), path="/rule")
    answers = dict(ANSWERS)
    table = steady(answers)
    with serve(rule, table):
        assert post(rule.url, {"input": "question 7"}).json() == {"output": "answer 7"}
        answers["Where is order 17?"] = "Lost."
        assert post(table.url, {"input": "Where is order 17?"}).json() == {"output": "Lost."}


def test_an_agent_refuses_a_request_without_its_input() -> None:
    agent = steady(ANSWERS)
    with serve(agent):
        assert post(agent.url, {"prompt": "hi"}).status_code == 400
        assert httpx.post(agent.url, content=b"not json").status_code == 400


@pytest.mark.parametrize(
    ("first", "fraction", "statuses"),
    [
        (0, 0.5, [200, 500, 200, 500, 200, 500]),
        (2, 0.0, [500, 500, 200, 200, 200, 200]),
        (1, 0.25, [500, 200, 200, 200, 500, 200, 200, 200, 500]),
        (0, 1.0, [500, 500, 500]),
    ],
)
def test_a_flaky_agent_fails_its_first_calls_then_a_fraction_spread_evenly(
    first: int, fraction: float, statuses: list[int]
) -> None:
    agent = flaky(ANSWERS, first=first, fraction=fraction)
    with serve(agent):
        seen = [post(agent.url, {"input": "Can I return shoes?"}) for _ in statuses]
    assert [r.status_code for r in seen] == statuses
    assert all(r.json() == {"output": "Within 30 days."} for r in seen if r.status_code == 200)


def test_a_fraction_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="fraction"):
        Agent(fail_fraction=1.5)


def test_a_slow_endpoint_outlasts_the_timeout_and_is_released_when_the_server_stops() -> None:
    endpoint = slow(30.0)
    with serve(endpoint):
        with pytest.raises(httpx.ReadTimeout):
            post(endpoint.url, {"input": "hi"}, timeout=0.3)
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 5.0
    assert endpoint.call_count == 1


def test_a_dead_endpoint_refuses_the_connection() -> None:
    with pytest.raises(httpx.ConnectError):
        post(refused_url(), {"input": "hi"})


def test_a_hang_up_endpoint_accepts_and_closes_without_an_answer() -> None:
    with hang_up_server() as dead:
        with pytest.raises(httpx.RemoteProtocolError):
            post(dead.url, {"input": "hi"})
    assert dead.call_count == 1


def test_garbage_empty_wrong_shape_and_error_replies() -> None:
    endpoints = [garbage(), empty(), wrong_shape(), server_error()]
    with serve(*endpoints):
        nul, nothing, shape, error = (post(e.url, {"input": "hi"}) for e in endpoints)

    assert nul.status_code == 200 and nul.headers["content-type"] == "application/json"
    assert b"\x00" in nul.content
    with pytest.raises(UnicodeDecodeError):
        nul.content.decode()
    assert (nothing.status_code, nothing.content) == (200, b"")
    assert "output" not in shape.json() and shape.headers["content-type"] == "application/json"
    assert (error.status_code, error.text) == (500, "internal error")
    with pytest.raises(json.JSONDecodeError):
        error.json()


def test_an_oversize_reply_is_well_formed_and_as_large_as_asked() -> None:
    endpoint = oversize(9)
    with serve(endpoint):
        reply = post(endpoint.url, {"input": "hi"}, timeout=30.0)
    assert len(reply.content) > 9 * 1024 * 1024
    assert set(reply.json()["output"]) == {"x"}


def test_priced_and_unpriced_agents_report_usage_for_a_known_and_an_unknown_model() -> None:
    known, unknown = priced(ANSWERS), unpriced(ANSWERS)
    request = {"model": "whatever", "messages": [{"role": "user", "content": "Where is order 17?"}]}
    with serve(known, unknown):
        replies = [post(e.url, request).json() for e in (known, unknown)]

    for reply in replies:
        assert reply["object"] == "chat.completion"
        assert reply["choices"][0]["message"] == {"role": "assistant", "content": "It shipped."}
        assert reply["usage"]["prompt_tokens"] > 0 and reply["usage"]["completion_tokens"] > 0
    assert [r["model"] for r in replies] == [PRICED_MODEL, UNPRICED_MODEL]
    book, usage = PriceBook(), replies[0]["usage"]
    cost, _ = book.cost(PRICED_MODEL, None, usage["prompt_tokens"], usage["completion_tokens"])
    assert cost > 0
    with pytest.raises(PriceLookupError):
        book.cost(UNPRICED_MODEL, None, 1, 1)


def test_the_judge_speaks_chat_completions_to_the_official_openai_client() -> None:
    model = judge('{"score": 0.9, "reason": "correct"}')
    with serve(model):
        client = openai.OpenAI(base_url=model.base_url, api_key="sk-simulated", max_retries=0)
        completion = client.chat.completions.create(
            model="judge-model",
            messages=[{"role": "system", "content": "Grade."}, {"role": "user", "content": "4"}],
        )

    assert model.base_url.endswith("/v1")
    assert completion.choices[0].message.content == '{"score": 0.9, "reason": "correct"}'
    assert completion.model == "judge-model"
    assert completion.usage is not None and completion.usage.total_tokens == 15
    [call] = model.calls
    assert call.path == "/v1/chat/completions"
    assert call.body["messages"][-1] == {"role": "user", "content": "4"}
    assert call.headers["authorization"] == "Bearer sk-simulated"


def test_a_chat_model_scripts_errors_in_openai_shape_and_arbitrary_bodies() -> None:
    replies = [Reply(503), Reply(503), "fine", Reply(body="<html>gateway</html>"), None]
    model = ChatModel(lambda _: replies.pop(0))
    with serve(model):
        error = post(model.url, {"messages": []})
        client = openai.OpenAI(base_url=model.base_url, api_key="k", max_retries=1)
        retried = client.chat.completions.create(model="m", messages=[])
        html = post(model.url, {"messages": []})
        null = post(model.url, {"messages": []}).json()
        assert post(model.url, [1]).status_code == 400

    assert error.status_code == 503 and error.headers["retry-after-ms"] == "1"
    assert error.json()["error"]["type"] == "server_error"
    assert retried.choices[0].message.content == "fine"  # after one retry of a 503
    assert (html.status_code, html.text) == (200, "<html>gateway</html>")
    assert null["choices"][0]["message"]["content"] is None
    assert model.call_count == 6


def test_chat_completion_builds_tool_calls_and_empty_choices() -> None:
    tool = {"role": "assistant", "content": None, "tool_calls": []}
    built = chat_completion(None, model="m", message=tool, finish_reason="tool_calls")
    assert built["choices"][0]["message"] == tool
    assert built["choices"][0]["finish_reason"] == "tool_calls"
    assert "usage" not in built
    assert chat_completion("x", model="m", choices=[])["choices"] == []


def test_scripted_replies_go_in_order_and_the_last_one_stays() -> None:
    scripted = Scripted()
    scripted.reply("GET", "/x", Reply(503), Reply(200, {"ok": 1}))
    scripted.reply("POST", "/raw", Reply(301, b"<html/>", {"Location": "https://elsewhere.test/"}))
    with serve(scripted) as server:
        statuses = [httpx.get(server.url("/x"), params={"a": "1 2"}).status_code for _ in range(3)]
        moved = httpx.post(server.url("/raw"), json={"k": "v"}, headers={"X-Key": "nk_1"})
        missing = httpx.get(server.url("/nowhere"))

    assert scripted.url == server.url()
    assert statuses == [503, 200, 200]
    assert scripted.calls[1].headers["user-agent"].startswith("python-httpx")
    assert "content-type" not in moved.headers  # raw bytes carry only the label they are given
    assert (moved.status_code, moved.content) == (301, b"<html/>")
    assert moved.headers["location"] == "https://elsewhere.test/"
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert scripted.calls[0].query == {"a": ["1 2"]}
    assert (scripted.calls[3].body, scripted.calls[3].headers["x-key"]) == ({"k": "v"}, "nk_1")
    assert scripted.paths() == ["GET /x"] * 3 + ["POST /raw", "GET /nowhere"]


def test_a_server_can_come_back_on_the_same_port_with_the_same_endpoints() -> None:
    agent = steady(ANSWERS)
    with serve(agent) as first:
        post(agent.url, {"input": "hi"})
        port = int(first.url().rsplit(":", 1)[1])
    with pytest.raises(httpx.ConnectError):
        post(agent.url, {"input": "hi"})
    with serve(agent, port=port):
        assert post(agent.url, {"input": "Can I return shoes?"}).status_code == 200
    assert agent.call_count == 2


def test_concurrent_calls_overlap_rather_than_queue() -> None:
    agent = steady(ANSWERS, latency_s=1.0)
    with serve(agent):
        threads = [
            threading.Thread(target=post, args=(agent.url, {"input": "hi"})) for _ in range(8)
        ]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        took = time.monotonic() - started
    assert agent.call_count == 8
    assert took < 4.0  # eight calls in half the time they would take one after another


def test_the_agent_suite_mounts_every_behaviour_at_its_path() -> None:
    answers = dict(ANSWERS)
    suite = agent_suite(answers, usage={"prompt_tokens": 7, "completion_tokens": 3})
    with serve(*suite) as server:
        chat = post(
            server.url("/chat"),
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "Can I return shoes?"}]},
        ).json()
        nested = post(server.url("/nested"), {"input": "Where is order 17?"}).json()
        assert post(server.url("/no-answer"), {"input": "x"}).json() == {
            "result": "the answer is somewhere else"
        }

    assert sorted(e.path for e in suite) == sorted(
        ["/neens", "/chat", "/nested", "/flaky", "/slow", "/500", "/garbage", "/empty"]
        + ["/oversize", "/no-answer"]
    )
    assert chat["model"] == "gpt-4o"
    assert chat["usage"] == {"prompt_tokens": 7, "completion_tokens": 3}
    assert chat["choices"][0]["message"]["content"] == "Within 30 days."
    assert nested == {"data": {"answers": [{"text": "It shipped."}]}}
    assert [call.path for call in server.calls] == ["/chat", "/nested", "/no-answer"]


def test_two_endpoints_at_one_path_are_refused() -> None:
    with pytest.raises(ValueError, match="share a path"), serve(steady(), steady()):
        pass
