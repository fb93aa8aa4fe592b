"""Compatibility with the instrumentations teams already use, tested with the real packages.

Each test runs `tests/support/instrumented_agent.py` as its own process (instrumentations patch
`openai` process-wide), with one real instrumentation package (or `tests/e2e/js/agent.js` with
the OpenTelemetry JS SDK and its OTLP/HTTP protobuf or JSON exporter, installed by `npm ci` from
the committed lockfile), against a stand-in for an
OpenAI-compatible provider (a real HTTP server on loopback, speaking the chat completions wire
format: the first call asks for the `get_weather` tool, the second answers), exporting with the
real OpenTelemetry SDK to a live Neens server. Every instrumentation must give the same session.
docs/traces.md's compatibility matrix lists the versions pinned in pyproject's dev extras.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from neens.demo.endpoints import ChatModel, Reply, serve_one
from neens.store.keys import CreatedKey
from tests.support.live import LiveServer
from tests.support.sqlite_only import sqlite_only

pytestmark = [
    pytest.mark.e2e,
    sqlite_only(
        "the subject is the span mapping; tests/api/test_traces.py stores spans on both databases"
    ),
]

AGENT = Path(__file__).resolve().parents[1] / "support" / "instrumented_agent.py"
JS = Path(__file__).resolve().parent / "js"
"""The JS agent and its npm dependencies (package.json, package-lock.json)."""
QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris."
SERVED_MODEL = "gpt-4o-mini-2024-07-18"
USAGE = [(150, 20), (193, 12)]  # 343 input and 32 output tokens in all
CACHED = 128
"""Of the second call's input tokens, those the provider served from its prompt cache."""
SENDS_CACHED = {"openinference", "openllmetry", "traceloop", "logfire"}
"""The instrumentations that report the cached count; the others (the GenAI openai-v2 package
and the JS one, as tested) report only the total, which Neens prices at the full input rate."""


def _completion(
    message: dict[str, Any], usage: tuple[int, int], finish: str, cached: int = 0
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{finish}",
        "object": "chat.completion",
        "created": 1_764_489_600,
        "model": SERVED_MODEL,
        "choices": [{"index": 0, "finish_reason": finish, "message": message, "logprobs": None}],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def _provider(body: dict[str, Any]) -> Reply:
    """Ask for the tool first; answer once the tool's result is in the conversation."""
    if any(message.get("role") == "tool" for message in body["messages"]):
        answer = {"role": "assistant", "content": ANSWER}
        return Reply(body=_completion(answer, USAGE[1], "stop", cached=CACHED))
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return Reply(body=_completion(message, USAGE[0], "tool_calls"))


def _agent(
    mode: str, server: LiveServer, key: CreatedKey, base_url: str, tags: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The agent's command line and environment."""
    env = {
        **os.environ,
        # How `neens eval run` tags a runner-mode run's traces.
        "OTEL_RESOURCE_ATTRIBUTES": ",".join(f"{k}={v}" for k, v in tags.items()),
        "NEENS_URL": server.url,
        "NEENS_KEY": key.key,
        "OPENAI_BASE_URL": base_url,
        "LOGFIRE_SEND_TO_LOGFIRE": "false",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": (
            "EVENT_ONLY" if mode.startswith("genai-event") else "SPAN_ONLY"
        ),
        "TRACELOOP_TRACE_CONTENT": "true",
        "TRACELOOP_METRICS_ENABLED": "false",  # Neens receives traces and logs, not metrics
    }
    command = (
        ["node", str(JS / "agent.js"), mode.removeprefix("js-")]
        if mode.startswith("js-")
        else [sys.executable, str(AGENT), mode]
    )
    return command, env


def _run_agent(
    mode: str, server: LiveServer, key: CreatedKey, base_url: str, tags: dict[str, str]
) -> str:
    command, env = _agent(mode, server, key, base_url, tags)
    done = subprocess.run(
        command,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _session(server: LiveServer, key: CreatedKey, trace_id: str, *, steps: int) -> dict[str, Any]:
    """The session once all its spans (and content events) are in: exporters send each span
    as it ends, so the last one may land just after the agent process exits."""
    deadline = time.monotonic() + 10
    while True:
        r = httpx.get(
            f"{server.url}/sessions/{trace_id}", headers={"Authorization": f"Bearer {key.key}"}
        )
        body: dict[str, Any] = r.json()
        if r.status_code == 200 and body["stepCount"] == steps and body["output"] is not None:
            return body
        assert time.monotonic() < deadline, r.text
        time.sleep(0.05)


def _spans(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    result = []
    for span in tree:
        result.append(span)
        result.extend(_spans(span["children"]))
    return result


@pytest.fixture(scope="session")
def js_dependencies() -> None:
    """`npm ci` from the committed lockfile, once, when node_modules is missing or older.

    Test processes take turns (a file lock): two `npm ci` in one folder at once remove each
    other's files; the one that waited then finds node_modules installed and leaves it."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js (node and npm) is not installed")
    installed = JS / "node_modules" / ".package-lock.json"
    lock = JS / "package-lock.json"
    turn = Path(tempfile.gettempdir()) / "neens-e2e-js-npm-ci.lock"
    with turn.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
            return
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"],
            cwd=JS,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr


def _runner_run(api: httpx.Client) -> tuple[str, str]:
    """A runner-mode run over one golden item: the question and its correct answer."""
    dataset = api.post("/datasets", json={"name": "weather"}).json()
    items = [{"input": QUESTION, "expected_output": ANSWER}]
    r = api.post(f"/datasets/{dataset['id']}/versions", json={"items": items, "golden": True})
    assert r.status_code == 201, r.text
    run = api.post(
        "/preprod-evals", json={"dataset_id": dataset["id"], "version_label": "local-test"}
    ).json()
    [item] = api.get(f"/preprod-evals/{run['id']}/items").json()["items"]
    return run["id"], item["item_id"]


def _finished(api: httpx.Client, run_id: str) -> str:
    deadline = time.monotonic() + 30
    while (status := api.get(f"/preprod-evals/{run_id}").json()["status"]) in (
        "awaiting_traces",
        "running",
    ):
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    return str(status)


@pytest.mark.parametrize(
    "mode",
    ["openinference", "genai-span", "genai-event", "openllmetry", "traceloop", "logfire"]
    + ["js-proto", "js-json"],
)
def test_each_instrumentation_gives_the_same_session_and_passes_its_run(
    live_server: LiveServer, key: CreatedKey, mode: str, request: pytest.FixtureRequest
) -> None:
    if mode.startswith("js-"):
        request.getfixturevalue("js_dependencies")
    with httpx.Client(
        timeout=30, base_url=live_server.url, headers={"Authorization": f"Bearer {key.key}"}
    ) as api:
        run_id, item_id = _runner_run(api)
        tags = {
            "neens.eval_run_id": run_id,
            "neens.dataset_item_id": item_id,
            "neens.version_label": "local-test",
        }
        with serve_one(ChatModel(_provider)) as provider:
            trace_id = _run_agent(mode, live_server, key, provider.base_url, tags)
            assert len(provider.calls) == 2

        session = _session(live_server, key, trace_id, steps=3)

        assert session["agentName"] == "weather-agent"
        assert (session["input"], session["output"]) == (QUESTION, ANSWER)
        assert session["models"] == [SERVED_MODEL]
        assert (session["inputTokens"], session["outputTokens"]) == (343, 32)
        # gpt-4o-mini at $0.15 / $0.60 per million tokens, $0.075 a cached one (genai-prices).
        cached = CACHED if mode in SENDS_CACHED else 0
        assert session["costUsd"] == pytest.approx(
            ((343 - cached) * 0.15 + cached * 0.075 + 32 * 0.60) / 1e6, rel=1e-9
        )
        assert session["costStatus"] == "priced"
        assert session["stepCount"] == 3
        assert session["warnings"] == []
        assert (session["evalRunId"], session["datasetItemId"]) == (run_id, item_id)
        spans = _spans(session["spans"])
        [tool] = [span for span in spans if span["kind"] == "tool"]
        assert json.loads(tool["input"]) == {"city": "Paris"}
        assert tool["output"] == "sunny, 21°C in Paris"
        calls = [span for span in spans if span["kind"] == "llm"]
        assert [call["input"] for call in calls] == [QUESTION, QUESTION]
        assert calls[1]["output"] == ANSWER
        # The correct answer, traced by this instrumentation, passes its pre-prod run.
        assert _finished(api, run_id) == "completed"
        gate = api.get(f"/preprod-evals/{run_id}/gate").json()
        assert gate["passed"] is True, gate
        assert gate["passRate"] == 1.0
