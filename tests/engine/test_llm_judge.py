"""LLM judges calling a real HTTP server that speaks the OpenAI chat-completions format."""

from __future__ import annotations

import importlib
import time
from typing import Any

import openai
import pytest

from neens.demo.endpoints import (
    JSON_LABEL,
    ChatModel,
    Reply,
    chat_completion,
    refused_url,
    serve_one,
)
from neens.domain.judges import JudgeCase
from neens.engine import destinations
from neens.engine.llm_judge import (
    SCORE_SYSTEM_PROMPT,
    LlmEndpoint,
    classifier_system_prompt,
    classify_with_llm,
    judge_with_llm,
)
from neens.errors import Unprocessable

TEMPLATE = 'Question: {input}\nAnswer: {output}\nReference: {expected_output}\nReply {"score": x}'
CASE = JudgeCase(input="What is 2+2?", output="4", expected_output="four")
PROMPT = 'Question: What is 2+2?\nAnswer: 4\nReference: four\nReply {"score": x}'
LABELS = ["correct", "partially correct", "wrong"]


def endpoint(base_url: str, **overrides: Any) -> LlmEndpoint:
    return LlmEndpoint(
        **{"base_url": base_url, "model": "judge-model", "api_key": None, "timeout_s": 10.0}
        | overrides
    )


# --- scoring --------------------------------------------------------------------------------


async def test_a_good_reply_gives_a_scored_verdict_keeping_prompt_and_reply() -> None:
    reply = '{"score": 0.9, "reason": "correct, spelled as a digit"}'
    with serve_one(ChatModel(reply)) as server:
        verdict = await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)
    assert verdict.score == 0.9 and verdict.reason == "correct, spelled as a digit"
    assert verdict.prompt == PROMPT and verdict.raw_reply == reply
    assert verdict.unscored_reason is None


async def test_the_request_is_one_deterministic_chat_completion() -> None:
    with serve_one(ChatModel('{"score": 1}')) as server:
        await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)
    [request] = server.calls
    assert request.body["model"] == "judge-model"
    assert request.body["temperature"] == 0
    assert "max_tokens" not in request.body
    assert request.body["messages"] == [
        {"role": "system", "content": SCORE_SYSTEM_PROMPT},
        {"role": "user", "content": PROMPT},
    ]
    assert request.headers["authorization"] == "Bearer unused"


async def test_the_tls_settings_are_built_once_for_every_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Building them loads the CA bundle (tens of ms of CPU): once per process, not per call."""
    package = importlib.import_module(openai.DefaultAsyncHttpxClient.__mro__[1].__module__)
    package = importlib.import_module(package.__name__.split(".")[0])
    real, built = package.create_ssl_context, []

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(package, "create_ssl_context", counted)
    destinations.tls_context.cache_clear()
    try:
        with serve_one(ChatModel('{"score": 1}')) as server:
            verdicts = [await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)]
            verdicts.append(await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE))
    finally:
        destinations.tls_context.cache_clear()
    assert [v.score for v in verdicts] == [1.0, 1.0] and server.call_count == 2
    assert len(built) == 1


async def test_the_api_key_and_max_tokens_are_sent_when_given() -> None:
    with serve_one(ChatModel('{"score": 1}')) as server:
        config = endpoint(server.base_url, api_key="sk-test", max_tokens=64)
        await judge_with_llm(config, "{output}", CASE)
    assert server.calls[0].headers["authorization"] == "Bearer sk-test"
    assert server.calls[0].body["max_tokens"] == 64


async def test_a_query_in_the_base_url_is_sent_with_every_call() -> None:
    """Azure OpenAI and some gateways take the API version as a query (`?api-version=...`):
    it stays a query on the completions path instead of being glued to the path."""
    with serve_one(ChatModel('{"score": 1}', path="/openai/v1/chat/completions")) as server:
        base = server.base_url + "?api-version=2024-10-21&a=1&a=2#not-sent"
        verdict = await judge_with_llm(endpoint(base), TEMPLATE, CASE)
    assert verdict.score == 1.0, verdict.unscored_reason
    [call] = server.calls
    assert call.path == "/openai/v1/chat/completions"
    assert call.query == {"api-version": ["2024-10-21"], "a": ["1", "2"]}


async def test_the_reply_may_depend_on_the_prompt() -> None:
    def grade(body: dict[str, Any]) -> str:
        right = "Answer: 4" in body["messages"][-1]["content"]
        return f"Score: {1 if right else 0}\nReason: checked the digit"

    with serve_one(ChatModel(grade)) as server:
        right = await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)
        wrong = await judge_with_llm(
            endpoint(server.base_url), TEMPLATE, JudgeCase("What is 2+2?", "5", "four")
        )
    assert (right.score, wrong.score) == (1.0, 0.0)


async def test_a_malformed_reply_is_unscored_not_zero() -> None:
    with serve_one(ChatModel("I think the answer is quite good!")) as server:
        verdict = await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)
    assert verdict.score is None and verdict.unscored_reason == "grade_parse_failure"
    assert verdict.raw_reply == "I think the answer is quite good!"
    assert verdict.prompt == PROMPT


async def test_an_out_of_range_score_is_unscored() -> None:
    with serve_one(ChatModel('{"score": 8, "reason": "out of 10"}')) as server:
        verdict = await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)
    assert verdict.unscored_reason == "grade_parse_failure"


# --- failed calls ---------------------------------------------------------------------------


async def test_a_server_error_is_retried_then_unscored_as_a_failed_call() -> None:
    with serve_one(ChatModel(Reply(status=500))) as server:
        verdict = await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)
    assert verdict.score is None and verdict.unscored_reason == "judge_call_failed"
    assert "500" in verdict.reason and verdict.prompt == PROMPT and verdict.raw_reply is None
    assert len(server.calls) == 3


async def test_a_client_error_is_not_retried() -> None:
    with serve_one(ChatModel(Reply(status=401))) as server:
        verdict = await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)
    assert verdict.unscored_reason == "judge_call_failed" and "401" in verdict.reason
    assert len(server.calls) == 1


async def test_a_recovering_server_is_retried_until_it_answers() -> None:
    replies = [Reply(503), '{"score": 0.5}']
    with serve_one(ChatModel(lambda _: replies.pop(0))) as server:
        verdict = await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)
    assert verdict.score == 0.5 and len(server.calls) == 2


async def test_a_hung_server_is_unscored_within_the_timeout() -> None:
    with serve_one(ChatModel('{"score": 1}', latency_s=30)) as server:
        started = time.monotonic()
        verdict = await judge_with_llm(endpoint(server.base_url, timeout_s=0.5), TEMPLATE, CASE)
        elapsed = time.monotonic() - started
    assert verdict.unscored_reason == "judge_call_failed"
    assert "0.5s" in verdict.reason
    assert 0.5 <= elapsed < 1.5


async def test_the_timeout_bounds_the_retries_too() -> None:
    slow_failure = Reply(status=500, delay_s=0.3)
    with serve_one(ChatModel(slow_failure)) as server:
        started = time.monotonic()
        verdict = await judge_with_llm(endpoint(server.base_url, timeout_s=0.5), TEMPLATE, CASE)
        elapsed = time.monotonic() - started
    assert verdict.unscored_reason == "judge_call_failed"
    assert elapsed < 1.5 and len(server.calls) == 2


async def test_an_unreachable_endpoint_is_unscored_as_a_failed_call() -> None:
    url = refused_url("/v1")
    verdict = await judge_with_llm(endpoint(url), TEMPLATE, CASE)
    assert verdict.unscored_reason == "judge_call_failed"
    assert "APIConnectionError" in verdict.reason


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (Reply(body=chat_completion("", model="m", choices=[])), "no choices"),
        (None, "no message text"),
        (Reply(body={"choices": [{"message": {"content": 5}}]}), "no message text"),
        (Reply(body="<html>gateway</html>"), "not a chat completion"),
        (Reply(body=[1, 2]), "not a chat completion"),
        (Reply(body="<html>gateway</html>", headers=JSON_LABEL), "not valid JSON"),
        (Reply(body=b"\x00\xff", headers=JSON_LABEL), "not valid JSON"),
    ],
)
async def test_a_response_without_reply_text_is_a_failed_call(
    reply: Reply | None, words: str
) -> None:
    with serve_one(ChatModel(reply)) as server:
        verdict = await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)
    assert verdict.unscored_reason == "judge_call_failed" and words in verdict.reason


async def test_an_empty_reply_text_is_a_parse_failure_not_a_failed_call() -> None:
    with serve_one(ChatModel("")) as server:
        verdict = await judge_with_llm(endpoint(server.base_url), TEMPLATE, CASE)
    assert verdict.unscored_reason == "grade_parse_failure" and verdict.raw_reply == ""


# --- cases that are not sent ----------------------------------------------------------------


async def test_a_case_without_output_is_unscored_without_calling_the_model() -> None:
    with serve_one(ChatModel('{"score": 0}')) as server:
        verdict = await judge_with_llm(
            endpoint(server.base_url), TEMPLATE, JudgeCase("q", None, "four")
        )
    assert verdict.unscored_reason == "no_output" and server.calls == []


async def test_a_template_needing_a_reference_is_not_sent_without_one() -> None:
    with serve_one(ChatModel('{"score": 0}')) as server:
        without_reference = JudgeCase("q", "4", None)
        verdict = await judge_with_llm(endpoint(server.base_url), TEMPLATE, without_reference)
        judged = await judge_with_llm(endpoint(server.base_url), "{output}", without_reference)
    assert verdict.unscored_reason == "no_expected_output"
    assert judged.score == 0.0 and len(server.calls) == 1


async def test_a_template_without_the_output_raises_before_any_call() -> None:
    with serve_one(ChatModel('{"score": 1}')) as server:
        with pytest.raises(Unprocessable) as caught:
            await judge_with_llm(endpoint(server.base_url), "Rate {input}", CASE)
    assert caught.value.field == "template" and server.calls == []


# --- classifying ----------------------------------------------------------------------------


async def test_a_classifier_gets_its_labels_and_returns_the_canonical_one() -> None:
    with serve_one(ChatModel('{"label": "Partially Correct", "reason": "close"}')) as server:
        verdict = await classify_with_llm(endpoint(server.base_url), TEMPLATE, LABELS, CASE)
    assert (verdict.label, verdict.score, verdict.reason) == ("partially correct", None, "close")
    assert verdict.prompt == PROMPT
    system = server.calls[0].body["messages"][0]["content"]
    assert system == classifier_system_prompt(LABELS)
    assert '"correct", "partially correct", "wrong"' in system


async def test_a_classifier_reply_outside_the_labels_is_unscored() -> None:
    with serve_one(ChatModel("maybe")) as server:
        verdict = await classify_with_llm(endpoint(server.base_url), TEMPLATE, LABELS, CASE)
    assert verdict.unscored_reason == "label_parse_failure" and verdict.raw_reply == "maybe"


async def test_a_classifier_call_failure_is_unscored() -> None:
    with serve_one(ChatModel(Reply(status=502))) as server:
        verdict = await classify_with_llm(endpoint(server.base_url), TEMPLATE, LABELS, CASE)
    assert verdict.unscored_reason == "judge_call_failed" and verdict.label is None


async def test_a_classifier_with_duplicate_labels_raises() -> None:
    with pytest.raises(Unprocessable) as caught:
        await classify_with_llm(endpoint("http://127.0.0.1:9/v1"), "{output}", ["a", "A"], CASE)
    assert caught.value.field == "labels[1]"


# --- endpoints ------------------------------------------------------------------------------


def test_an_endpoint_never_shows_its_key() -> None:
    assert "sk-secret" not in repr(endpoint("http://x/v1", api_key="sk-secret"))


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"base_url": "localhost:8000/v1"}, "base_url"),
        ({"model": " "}, "model"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": float("inf")}, "timeout_s"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
    ],
)
def test_an_endpoint_refuses_unusable_settings(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(Unprocessable) as caught:
        endpoint(**{"base_url": "http://127.0.0.1:1/v1"} | overrides)
    assert caught.value.field == field
