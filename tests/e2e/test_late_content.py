"""Content that arrives after its spans, traced by the real instrumentation.

`opentelemetry-instrumentation-openai-v2` with EVENT_ONLY sends the messages as OTLP log records,
batched apart from the spans: the trace can link to a runner-mode item, and be scored, before its
text arrives. The agent (`tests/support/instrumented_agent.py genai-event-late`) exports its
spans, prints the trace id, and holds its log records until it reads a line from stdin, so each
test decides when the text lands.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

import httpx
import pytest

from neens.demo.endpoints import ChatModel, serve_one
from neens.store.keys import CreatedKey
from tests.e2e.test_instrumentations import (
    ANSWER,
    QUESTION,
    _agent,
    _finished,
    _provider,
    _runner_run,
)
from tests.ingest.test_otlp_logs import PROTO, content_events, log_record, logs_request
from tests.support.live import LiveServer
from tests.support.otlp import export_request, span

pytestmark = pytest.mark.e2e

OTHER = {"input": "Is it raining in Oslo?", "expected_output": "No, it is dry in Oslo."}


class HeldAgent:
    """The agent run up to its spans; `release()` lets it send its content and exit."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.trace_id = self.process.stdout.readline().strip()
        assert self.trace_id, self.process.communicate(timeout=60)[1]

    def release(self) -> None:
        _, stderr = self.process.communicate("\n", timeout=60)
        assert self.process.returncode == 0, stderr

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


def _start(
    live_server: LiveServer, key: CreatedKey, run_id: str, item_id: str
) -> tuple[HeldAgent, int]:
    tags = {
        "neens.eval_run_id": run_id,
        "neens.dataset_item_id": item_id,
        "neens.version_label": "local-test",
    }
    with serve_one(ChatModel(_provider)) as provider:
        agent = HeldAgent(*_agent("genai-event-late", live_server, key, provider.base_url, tags))
        return agent, len(provider.calls)


def _session(api: httpx.Client, trace_id: str) -> dict[str, Any]:
    r = api.get(f"/sessions/{trace_id}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _item(api: httpx.Client, run_id: str, item_id: str) -> dict[str, Any]:
    items = api.get(f"/preprod-evals/{run_id}/items").json()["items"]
    [item] = [item for item in items if item["item_id"] == item_id]
    return dict(item)


def test_content_after_the_run_finished_keeps_the_verdict_and_flags_the_session(
    live_server: LiveServer, key: CreatedKey
) -> None:
    with httpx.Client(
        timeout=30, base_url=live_server.url, headers={"Authorization": f"Bearer {key.key}"}
    ) as api:
        run_id, item_id = _runner_run(api)
        agent, calls = _start(live_server, key, run_id, item_id)
        try:
            assert calls == 2
            # Spans in, text held: the run scores the item on a session with no output.
            assert _finished(api, run_id) == "failed"
            before = _item(api, run_id, item_id)
            assert before["status"] == "error"
            assert _session(api, agent.trace_id)["output"] is None
            agent.release()
        finally:
            agent.stop()

        session = _session(api, agent.trace_id)
        assert (session["input"], session["output"]) == (QUESTION, ANSWER)
        [warning] = session["warnings"]
        assert warning["code"] == "content_after_run"
        assert run_id in warning["message"]
        # The finished run's verdict is not changed behind its reader's back.
        assert api.get(f"/preprod-evals/{run_id}").json()["status"] == "failed"
        assert _item(api, run_id, item_id) == before


def test_content_while_the_run_is_scoring_is_scored_again_and_passes(
    live_server: LiveServer, key: CreatedKey, admin_key: CreatedKey
) -> None:
    """Two items: the traced one and another answered by a native session. The judge's call for
    the other item is where the held text is released: the traced item has just been judged
    without it (its verdict stored or about to be), and must be judged again on the text."""
    admin = {"Authorization": f"Bearer {admin_key.key}"}
    released: list[str] = []
    agent: HeldAgent | None = None

    def judge(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if OTHER["expected_output"] in prompt and not released:
            assert agent is not None
            agent.release()
            released.append(prompt)
        answer = prompt.split("\nRef:")[0]
        right = ANSWER in answer or OTHER["expected_output"] in answer
        return json.dumps({"score": 1.0 if right else 0.0, "reason": "compared"})

    with (
        httpx.Client(timeout=30, base_url=live_server.url, headers=admin) as api,
        serve_one(ChatModel(judge)) as llm,
    ):
        run_id, (traced_id, other_id) = _run(
            api, [{"input": QUESTION, "expected_output": ANSWER}, OTHER], llm
        )
        agent, _ = _start(live_server, key, run_id, traced_id)
        try:
            _wait(lambda: _item(api, run_id, traced_id)["status"] == "captured")
            # The other item's answer completes the run's traces and starts its scoring.
            r = api.post(
                "/sessions",
                json={
                    "session": {"id": "oslo-answer", "agent_name": "weather-agent"},
                    "spans": [
                        {
                            "id": "root",
                            "name": "weather-agent",
                            "kind": "agent",
                            "input": OTHER["input"],
                            "output": OTHER["expected_output"],
                            "attributes": {
                                "neens.eval_run_id": run_id,
                                "neens.dataset_item_id": other_id,
                                "neens.version_label": "local-test",
                            },
                        }
                    ],
                },
            )
            assert r.status_code == 200, r.text
            assert _finished(api, run_id) == "completed"
        finally:
            agent.stop()
        assert released, "the run was scored without the judge being asked about the other item"

        item = _item(api, run_id, traced_id)
        assert (item["status"], item["score"], item["passed"]) == ("scored", 1.0, True)
        judged = [request.body["messages"][-1]["content"] for request in llm.calls]
        assert f"Q: {QUESTION}\nA: {ANSWER}\nRef: {ANSWER}" in judged
        gate = api.get(f"/preprod-evals/{run_id}/gate").json()
        assert gate["passed"] is True, gate
        assert _session(api, agent.trace_id)["warnings"] == []


def _wait(condition: Any, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_content_arriving_while_its_item_is_judged_is_judged_again(
    live_server: LiveServer, key: CreatedKey, admin_key: CreatedKey
) -> None:
    """The judge is asked about the output the session has (a first, partial answer); while it
    thinks, the final answer lands. The verdict on the old output is not stored: the item is
    judged again, on the final answer, before the run finishes."""
    tid, root, first, final = os.urandom(16), os.urandom(8), os.urandom(8), os.urandom(8)
    held = [logs(content_events(tid, final))]
    asked: list[str] = []

    def judge(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        asked.append(prompt)
        if held:
            r = httpx.post(
                f"{live_server.url}/v1/logs",
                content=held.pop(),
                headers={"Authorization": f"Bearer {key.key}", **PROTO},
            )
            assert r.status_code == 200, r.text
        right = f"A: {ANSWER}\n" in prompt
        return json.dumps({"score": 1.0 if right else 0.0, "reason": "compared"})

    with (
        httpx.Client(
            timeout=30,
            base_url=live_server.url,
            headers={"Authorization": f"Bearer {admin_key.key}"},
        ) as api,
        serve_one(ChatModel(judge)) as llm,
    ):
        run_id, [item_id] = _run(api, [{"input": QUESTION, "expected_output": ANSWER}], llm)
        tags = {
            "neens.eval_run_id": run_id,
            "neens.dataset_item_id": item_id,
            "neens.version_label": "local-test",
        }
        partial = log_record(
            tid, first, "gen_ai.choice", {"index": 0, "message": {"content": "Let me check."}}
        )
        r = api.post("/v1/logs", content=logs([partial]), headers=PROTO)
        assert r.status_code == 200, r.text
        spans = [
            span(tid, root, "invoke_agent weather-agent", end_ms=100, **tags),
            _model_call(tid, first, root, start_ms=10),
            _model_call(tid, final, root, start_ms=60),
        ]
        r = api.post("/v1/traces", content=export_request(spans).SerializeToString(), headers=PROTO)
        assert r.status_code == 200, r.text

        # At once: the scoring job judges the item again itself, rather than leaving the run
        # for the sweep that finds runs without a job (every 30 s).
        _wait(lambda: api.get(f"/preprod-evals/{run_id}").json()["status"] == "completed", 10)
        item = _item(api, run_id, item_id)

    assert [prompt.split("\n")[1] for prompt in asked] == ["A: Let me check.", f"A: {ANSWER}"]
    assert (item["status"], item["score"], item["passed"]) == ("scored", 1.0, True)


def _model_call(tid: bytes, span_id: bytes, root: bytes, *, start_ms: int) -> Any:
    return span(
        tid,
        span_id,
        "chat gpt-4o",
        parent=root,
        start_ms=start_ms,
        end_ms=start_ms + 30,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 10,
        },
    )


def logs(records: list[Any]) -> bytes:
    return logs_request(records).SerializeToString()


def _run(api: httpx.Client, items: list[dict[str, str]], llm: Any) -> tuple[str, list[str]]:
    """A runner-mode run over golden `items`, judged by an LLM judge that `llm` (a fake
    OpenAI-compatible server) serves; returns the run id and its item ids."""
    r = api.post(
        "/judges",
        json={
            "name": "matches",
            "type": "llm_prompt",
            "template": "Q: {input}\nA: {output}\nRef: {expected_output}",
            "endpoint": {"baseUrl": llm.base_url, "model": "judge-1"},
        },
    )
    assert r.status_code == 201, r.text
    judge_id = r.json()["id"]
    dataset = api.post("/datasets", json={"name": "weather"}).json()
    r = api.post(f"/datasets/{dataset['id']}/versions", json={"items": items, "golden": True})
    assert r.status_code == 201, r.text
    body = {
        "dataset_id": dataset["id"],
        "version_label": "local-test",
        "judge_deployment_ids": [judge_id],
    }
    run = api.post("/preprod-evals", json=body).json()
    run_items = api.get(f"/preprod-evals/{run['id']}/items").json()["items"]
    return run["id"], [item["item_id"] for item in run_items]
