"""`neens exp replay` and `neens exp ab`: stored model calls sent again, A against B.

The traces are ingested for real (OTLP protobuf posted to the app's /v1/traces), and the calls
go to a stand-in provider: a real HTTP server on loopback speaking the OpenAI Chat Completions
and Anthropic Messages wire formats (tests/exp/replay_support.py), never to a real provider.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price
from scipy.stats import binomtest

from tests.exp.conftest import Project
from tests.exp.replay_support import (
    RECORDED_SYSTEM,
    TOOLS,
    Script,
    StandIn,
    agent_turn,
    ingest,
    serve,
)
from tests.exp.test_docs import DOCS, _exp_commands
from tests.support.sqlite_only import sqlite_only


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    script = Script(tool={"gpt-4o": "lookup_order"})
    for stand in serve(script):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{stand.url}/v1")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", stand.url)
        yield stand


@pytest.fixture
def turn(project: Project, database_url: str) -> str:
    """One agent turn ingested; its trace id."""
    ingest(database_url, [agent_turn(bytes(range(16)))[1]])
    return bytes(range(16)).hex()


def test_one_call_replayed_with_the_model_varied_keeps_arm_a_as_recorded(
    project: Project, turn: str, stand_in: StandIn
) -> None:
    result = project.exp("replay", "latest#0", "--vary", "model=claude-haiku-4-5", "--n", "5")
    assert result.code == 0, result.err

    a = stand_in.sent("gpt-4o")
    assert len(a) == 5
    assert a[0].path == "/v1/chat/completions"
    assert a[0].headers["authorization"] == "Bearer sk-test-openai"
    assert a[0].body == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": RECORDED_SYSTEM},
            {"role": "user", "content": "Where is order 17?"},
        ],
        "tools": TOOLS,
        "temperature": 0.2,
    }
    b = stand_in.sent("claude-haiku-4-5")
    assert len(b) == 5
    assert b[0].path == "/v1/messages"
    assert b[0].headers["x-api-key"] == "sk-test-anthropic"
    assert b[0].headers["anthropic-version"] == "2023-06-01"
    assert b[0].body["system"] == RECORDED_SYSTEM
    assert b[0].body["max_tokens"] == 1024
    assert b[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Where is order 17?"}]}
    ]
    assert b[0].body["tools"] == [
        {
            "name": "lookup_order",
            "description": "Find an order by its number",
            "input_schema": TOOLS[0]["function"]["parameters"],  # type: ignore[index]
        }
    ]

    out = result.out
    assert f"replay latest#0: 1 call of session {turn} × 5 repeats" in out
    assert "A recorded  gpt-4o (openai)" in out
    assert "B model=claude-haiku-4-5  claude-haiku-4-5 (anthropic)" in out
    # The recorded reply called lookup_order; gpt-4o does again, the stand-in Claude answers in
    # text: every repeat of B regressed.
    assert "B − A   -100.0pp [-100.0pp, -100.0pp] (5 paired cases" in out
    assert "mcnemar p=0.062  5 regressed, 0 improved" in out
    # Five repeats of one call all went the other way: the interval collapses to −100pp, but 5 of
    # 5 is p = 0.0625 for the exact test, so it is borderline, not worse (docs/exp.md says so).
    assert "verdict inconclusive (CI below 0 but exact sign test p=0.062 on 5 changed cases)" in out
    # Said before anything was sent, and again with the report.
    assert result.err.startswith(
        "warning: 1 call × --n 5 is 5 cases, and the exact sign test cannot reject at 5% with "
        "fewer than 6: this replay can only be inconclusive, however the replies turn out; give "
        "--n 6 or more\n"
    )
    assert "warning: only 5 paired cases: the exact sign test cannot reject" in result.err
    assert "borderline: the interval excludes 0 but the exact sign test does not reject" in out
    assert "cost A $" in out and "cost B $" in out

    listed = project.exp_json("list")["experiments"]
    assert sorted(e["kind"] for e in listed) == ["replay", "replay"]
    ids = {e["name"]: e["id"] for e in listed}
    compared = project.exp_json("compare", ids["recorded"], ids["model=claude-haiku-4-5"])
    assert compared["intervalVerdict"] == "worse" and compared["verdict"] == "inconclusive"
    assert compared["signTest"]["p"] == binomtest(0, 5, 0.5).pvalue and compared["borderline"]
    assert compared["a"]["passRate"] == 1.0 and compared["b"]["passRate"] == 0.0


def test_a_session_replayed_with_a_new_system_prompt_from_a_file(
    project: Project, turn: str, stand_in: StandIn
) -> None:
    Path("new-prompt.md").write_text("Answer in one short sentence.")
    result = project.exp_json(
        "replay",
        "--session",
        "latest",
        "--limit",
        "10",
        "--vary",
        "system=@new-prompt.md",
        "--n",
        "2",
    )
    sent = stand_in.sent("gpt-4o")
    assert len(sent) == 8  # 2 calls × 2 repeats × 2 arms
    systems = sorted({r.body["messages"][0]["content"] for r in sent})
    assert systems == ["Answer in one short sentence.", RECORDED_SYSTEM]
    follow_up = next(r.body for r in sent if len(r.body["messages"]) == 4)
    assert follow_up["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"number": 17}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_a1",
            "content": '{"status": "shipped", "on": "3 June"}',
        },
    ]
    assert follow_up["max_tokens"] == 300
    assert result["casesAre"] == "calls"
    assert [arm["name"] for arm in result["arms"]] == ["recorded", "system=@new-prompt.md"]
    comparison = result["comparison"]
    assert comparison["pairedCases"] == 2
    assert comparison["verdict"] == "inconclusive"
    assert comparison["verdictReason"] == "A and B agree on every case"


def test_ab_replays_every_call_of_the_turn_and_says_how_often_the_turn_went_as_recorded(
    project: Project, turn: str, stand_in: StandIn
) -> None:
    result = project.exp("ab", "--vary", "model=gpt-4o-mini", "--n", "2")
    assert result.code == 0, result.err
    assert len(stand_in.sent("gpt-4o")) == 4
    assert len(stand_in.sent("gpt-4o-mini")) == 4
    assert f"ab latest: 2 calls of session {turn} × 2 repeats" in result.out
    # gpt-4o-mini answers in text where the agent looked the order up: the turn never goes as
    # recorded; gpt-4o follows it in both repeats.
    assert "turn as recorded (every call's first action): A 2 of 2, B 0 of 2 repeats" in result.out
    assert "regressions 1" in result.out
    # docs/exp.md shows this very report; only the experiment ids differ from run to run.
    docs = DOCS.read_text()
    start = docs.index("$ neens exp ab --vary model=gpt-4o-mini --n 2")
    example = docs[start : docs.index("```", start)].splitlines()[1:]
    for line in example:
        if "exp_" not in line:
            assert line in result.out.splitlines(), line


@pytest.mark.parametrize("command", ["replay", "ab"])
def test_every_flag_is_documented(command: str) -> None:
    text = DOCS.read_text()
    parser = _exp_commands()[command]
    flags = [
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    assert [flag for flag in flags if f"`{flag}" not in text] == []
    section = text[text.index("### How replay decides") : text.index("## Exit codes")]
    for phrase in (
        "first action",
        "better (CI above 0, exact sign test p=…)",
        "worse (CI below 0, exact sign test p=…)",
        "borderline",
        "unpriced",
    ):
        assert phrase in section, phrase


def test_dry_run_counts_the_calls_and_prices_them_without_a_key(
    project: Project, turn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    body = project.exp_json(
        "replay", "latest#0", "--vary", "model=gpt-4o,no-such-model-xyz", "--n", "5", "--dry-run"
    )
    assert body["sends"] == 10
    assert body["warnings"] == [
        "1 call × --n 5 is 5 cases, and the exact sign test cannot reject at 5% with fewer than "
        "6: this replay can only be inconclusive, however the replies turn out; give --n 6 or "
        "more"
    ]
    [a, b] = body["arms"]
    expected = calc_price(
        Usage(input_tokens=1200, output_tokens=40), "gpt-4o", provider_id="openai"
    )
    assert a["estimateUsd"] == pytest.approx(float(5 * expected.total_price), rel=1e-9)
    assert b["estimateUsd"] is None and b["unpricedCalls"] == 5
    assert body["unpricedCalls"] == 5
    assert body["calls"][0]["recordedAction"] == "tool lookup_order"
    by_span = project.exp_json("replay", "846c7980db841642", "--vary", "model=x", "--dry-run")
    assert [c["case"] for c in by_span["calls"]] == ["call000-846c7980db841642"]
    last = project.exp_json("replay", "--vary", "model=x", "--dry-run", "--n", "1")
    assert [c["case"] for c in last["calls"]] == ["call001-9d8c7b6a59483726"]

    text = project.exp("replay", "latest#0", "--vary", "model=claude-haiku-4-5", "--dry-run")
    assert text.code == 0, text.err
    # The default --n is 10: one call's repeats are enough cases for a verdict, and no warning.
    assert "1 call of session" in text.out and "= 20 calls to send (dry run" in text.out
    assert "warning" not in text.err
    two = project.exp_json("replay", "--session", "latest", "--vary", "model=x", "--dry-run")
    assert two["warnings"] == [
        "2 calls are 2 cases, and the exact sign test cannot reject at 5% with fewer than 6: "
        "this replay can only be inconclusive, however the replies turn out; replay at least 6 "
        "calls"
    ]
    assert "at the recorded token counts, priced by genai-prices" in text.out
    assert project.exp_json("list")["experiments"] == []


@pytest.mark.parametrize(
    ("args", "unset", "message"),
    [
        (["nope123#0"], None, "REF nope123#0: no session or span with this id"),
        (["latest#7"], None, "has 2 replayable calls (#0 to #1, or #-1 for the last)"),
        (["latest#x"], None, "#x is not a call number"),
        (["--vary", "model"], None, "--vary model: write FIELD=VALUE"),
        (["--vary", "model=a,b,c"], None, "--vary model: 3 values; give one (arm B) or two"),
        (["--vary", "messages=[]"], None, "--vary messages: cannot be varied"),
        (["--vary", "system=@missing.md"], None, "--vary system: cannot read missing.md"),
        ([], "ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY is not set: arm B calls claude-haiku-4-5"),
        (["--limit", "2"], None, "--limit: only with --session"),
    ],
)
@sqlite_only("refused before anything is written")
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    project: Project,
    turn: str,
    stand_in: StandIn,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    unset: str | None,
    message: str,
) -> None:
    if unset is not None:
        monkeypatch.delenv(unset)
    if not any(arg.startswith("--vary") for arg in args):
        args = [*args, "--vary", "model=claude-haiku-4-5"]
    result = project.exp("replay", *args)
    assert result.code == 2
    assert result.err.count("\n") == 1 and message in result.err, result.err
    assert stand_in.received == []
    assert project.exp_json("list")["experiments"] == []


def test_a_store_without_replayable_calls_is_refused(project: Project, stand_in: StandIn) -> None:
    result = project.exp("replay", "--vary", "model=gpt-4o-mini")
    assert result.code == 2
    assert "REF latest: no session in this store has a model call with its request" in result.err


def test_a_provider_failure_fails_its_own_arm_and_is_counted(
    project: Project, turn: str, stand_in: StandIn
) -> None:
    stand_in.script.fail["claude-haiku-4-5"] = 503
    stand_in.script.fail["gpt-4o-mini"] = 400
    result = project.exp_json(
        "replay",
        "latest#0",
        "--vary",
        "model=claude-haiku-4-5,gpt-4o-mini",
        "--n",
        "2",
        "--retries",
        "1",
    )
    # 503 is retried once, 400 is not: 2 repeats × 2 attempts, 2 repeats × 1.
    assert len(stand_in.sent("claude-haiku-4-5")) == 4
    assert len(stand_in.sent("gpt-4o-mini")) == 2
    a, b = result["comparison"]["a"], result["comparison"]["b"]
    assert a["errors"] == {"infra": 2, "agent": 0}
    assert b["errors"] == {"infra": 0, "agent": 2}
    assert result["comparison"]["pairedCases"] == 0


def test_criterion_adds_an_llm_judge_that_sees_the_criterion(
    project: Project, turn: str, stand_in: StandIn
) -> None:
    stand_in.script.judge = 0.0
    result = project.exp_json(
        "replay",
        "latest#0",
        "--vary",
        "temperature=0",
        "--n",
        "2",
        "--criterion",
        "It looks the order up before answering",
        "--judge-model",
        "judge-model",
    )
    judged = stand_in.sent("judge-model")
    assert len(judged) == 4
    prompt = judged[0].body["messages"][1]["content"]
    assert "Criterion: It looks the order up before answering" in prompt
    assert "tool lookup_order(" in prompt
    replayed = [r.body for r in stand_in.sent("gpt-4o")]
    assert sorted(body["temperature"] for body in replayed) == [0, 0, 0.2, 0.2]
    # The first action matches everywhere, but the judge fails every reply: nothing passes.
    assert result["comparison"]["a"]["passRate"] == 0.0
    assert result["comparison"]["b"]["passRate"] == 0.0
    assert json.dumps(result["arms"][1]["vary"]) == '{"temperature": "0"}'
