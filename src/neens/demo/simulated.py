"""The demo's simulated endpoints: one per model, the support agent, and the LLM judge.

They are `neens.demo.endpoints` endpoints (real HTTP on loopback), answering from the catalog:

- `ModelEndpoint` is the agent running on one simulated model, in the `neens` request format:
  it reads the golden prompt, the run id and the item id Neens sends, and answers with the
  catalog's right or wrong answer for (model, item, run), the item's `agent_name`, the model's
  name and token usage, after a latency drawn from the same three.
- `AgentEndpoint` is the support agent itself, on `sim-frontier-large`, answering as the version
  named by the request's `version_label`.
- `judge_endpoint` is an OpenAI-compatible chat endpoint grading the demo's rubrics
  (`catalog.grade`).

An endpoint numbers the runs it sees (0, 1, 2, ...) in the order their first call arrives: a
sweep runs each arm's k runs one after the other, so that is the run's number within its arm.
"""

from __future__ import annotations

import json
from typing import Any

from neens.demo import catalog
from neens.demo.endpoints import DEFAULT_ANSWER, Call, ChatModel, Endpoint, Reply


class ModelEndpoint(Endpoint):
    """The agent on one simulated model (see the module docstring)."""

    def __init__(self, model: catalog.Model, *, path: str | None = None) -> None:
        super().__init__(path=path or f"/models/{model.model}")
        self.model = model
        self._runs: dict[str, int] = {}

    def run_number(self, run_id: str) -> int:
        return self._runs.setdefault(run_id, len(self._runs))

    def respond(self, call: Call) -> Reply:
        request = _request(call)
        if request is None:
            return Reply(400, {"error": "bad request: no string 'input'"})
        prompt, run_id = request
        item = catalog.BY_PROMPT.get(prompt)
        model = self.model
        if item is None:
            return Reply(200, {"output": DEFAULT_ANSWER, "model": model.model})
        run = self.run_number(run_id)
        tokens_in, tokens_out = catalog.usage(model.model, item, run)
        body = {
            "output": catalog.answer(model, item, run),
            "agent_name": item.agent,
            "model": model.model,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
        }
        delay = catalog.latency_s(*model.latency_ms, model.model, item.key, run % catalog.PASS_K)
        return Reply(200, body, delay_s=delay)


class AgentEndpoint(Endpoint):
    """The support agent on `catalog.AGENT_MODEL`, answering as the requested version."""

    def __init__(self, *, path: str = "/agents/support-agent") -> None:
        super().__init__(path=path)
        self.versions = {v.label: v for v in (catalog.CANDIDATE, catalog.REGRESSED)}

    def respond(self, call: Call) -> Reply:
        request = _request(call)
        label = call.body.get("version_label") if isinstance(call.body, dict) else None
        version = self.versions.get(label) if isinstance(label, str) else None
        if request is None or version is None:
            known = ", ".join(self.versions)
            return Reply(400, {"error": f"bad request: an 'input' and a version_label of {known}"})
        item = catalog.BY_PROMPT.get(request[0])
        model = catalog.AGENT_MODEL
        if item is None:
            return Reply(200, {"output": DEFAULT_ANSWER, "model": model.model})
        tokens_in, tokens_out = catalog.usage(model.model, item, 0)
        body = {
            "output": item.expected if version.correct(item) else item.mistake,
            "agent_name": item.agent,
            "model": model.model,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
        }
        delay = catalog.latency_s(*model.latency_ms, version.label, item.key)
        return Reply(200, body, delay_s=delay)


def _request(call: Call) -> tuple[str, str] | None:
    """(prompt, run id) of a `neens`-format request; the run id is "" when none was sent."""
    body = call.body
    if not isinstance(body, dict) or not isinstance(body.get("input"), str):
        return None
    run_id = body.get("eval_run_id")
    return body["input"], run_id if isinstance(run_id, str) else ""


def _grade(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    content = last.get("content") if isinstance(last, dict) else None
    verdict = catalog.grade(content) if isinstance(content, str) else None
    if verdict is None:
        return "I can only grade the demo's rubrics on the demo's golden questions."
    score, reason = verdict
    return json.dumps({"score": score, "reason": reason})


def judge_endpoint(*, path: str = "/judge/v1/chat/completions") -> ChatModel:
    """The simulated judge model: its `base_url` is what an LLM judge's endpoint takes."""
    return ChatModel(_grade, path=path, latency_s=0.003, model=catalog.JUDGE_MODEL)


def endpoints() -> tuple[list[ModelEndpoint], AgentEndpoint, ChatModel]:
    """Every endpoint the demo serves: one per model (in arm order), the agent, the judge."""
    return [ModelEndpoint(m) for m in catalog.MODELS], AgentEndpoint(), judge_endpoint()
