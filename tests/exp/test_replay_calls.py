"""Reading a stored LLM span back into a call to send again, whichever convention recorded it,
and writing it in the Anthropic wire format (pure: no store, no network)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from neens.domain.conventions import span_view
from neens.domain.spans import SpanRecord
from neens.exp.providers import Request, anthropic_body, openai_body
from neens.exp.replay_calls import Action, recorded_call


def _record(attributes: dict[str, object], **fields: object) -> SpanRecord:
    at = datetime(2025, 11, 30, tzinfo=UTC)
    base: dict[str, object] = {
        "trace_id": "t1",
        "span_id": "s1",
        "parent_span_id": None,
        "name": "chat",
        "kind": None,
        "start_time": at,
        "end_time": at,
        "status_code": None,
        "status_message": None,
    }
    base.update(fields)
    return SpanRecord(**base, attributes=attributes)  # type: ignore[arg-type]


def test_an_openllmetry_span_is_read_with_its_functions_and_its_tool_call() -> None:
    record = _record(
        {
            "llm.request.type": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Be helpful.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "Refund order 9",
            "llm.request.functions.0.name": "refund",
            "llm.request.functions.0.parameters": json.dumps({"type": "object"}),
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.name": "refund",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"order": 9}',
        }
    )
    call = recorded_call(record, span_view(record), 0)
    assert call is not None
    assert call.system == "Be helpful."
    assert [(m.role, m.text) for m in call.messages] == [("user", "Refund order 9")]
    assert [t.name for t in call.tools] == ["refund"]
    assert call.action == Action("tool", "refund")


def test_a_native_span_without_messages_is_one_user_text_and_a_text_reply() -> None:
    record = _record(
        {"gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 3},
        kind="llm",
        input="What is 2 + 2?",
        output="4",
    )
    call = recorded_call(record, span_view(record), 3)
    assert call is not None and call.case_id == "call003-s1"
    assert call.prompt_text() == "What is 2 + 2?"
    assert call.action == Action("text")
    assert openai_body(Request.of(call, "gpt-4o", {"temperature": 0})) == {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "What is 2 + 2?"}],
        "temperature": 0,
    }


def test_an_llm_span_without_request_messages_is_not_replayable() -> None:
    record = _record({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"})
    assert recorded_call(record, span_view(record), 0) is None


def test_anthropic_body_pairs_tool_results_with_their_calls_in_one_user_turn() -> None:
    messages = [
        {"role": "user", "content": "Check orders 1 and 2"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"function": {"name": "lookup", "arguments": '{"n": 1}'}},
                {"function": {"name": "lookup", "arguments": '{"n": 2}'}},
            ],
        },
        {"role": "tool", "content": "shipped"},
        {"role": "tool", "content": "pending"},
    ]
    record = _record(
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(messages)}
    )
    call = recorded_call(record, span_view(record), 0)
    assert call is not None
    body = anthropic_body(Request.of(call, "claude-haiku-4-5", {"max_tokens": 50}))
    assert body["max_tokens"] == 50
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    uses = [b["id"] for b in body["messages"][1]["content"]]
    results = [(b["tool_use_id"], b["content"]) for b in body["messages"][2]["content"]]
    assert uses == ["call_1", "call_2"]
    assert results == [("call_1", "shipped"), ("call_2", "pending")]
    assert body["messages"][1]["content"][0]["input"] == {"n": 1}
