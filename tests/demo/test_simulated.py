"""The demo's simulated endpoints over real HTTP: the agent on each model, the support agent's
versions and the LLM judge, as Neens' own agent call and judge client see them."""

from __future__ import annotations

import httpx

from neens.demo import catalog
from neens.demo.endpoints import DEFAULT_ANSWER, serve
from neens.demo.simulated import AgentEndpoint, ModelEndpoint, endpoints, judge_endpoint
from neens.domain.judges import JudgeCase
from neens.engine.agent_call import AgentEndpoint as Connection
from neens.engine.agent_call import call_agent
from neens.engine.agent_client import AgentClient
from neens.engine.llm_judge import LlmEndpoint, judge_with_llm

ITEM = catalog.BY_KEY["policy-3"]
PREV = catalog.BY_LABEL["previous-gen"]


def ask(url: str, prompt: str, run_id: str = "ppr_1", **extra: str) -> httpx.Response:
    body = {"input": prompt, "eval_run_id": run_id, "dataset_item_id": "dsi_1", **extra}
    return httpx.post(url, json=body, timeout=5)


def test_a_model_endpoint_numbers_runs_as_they_come_and_answers_by_its_profile() -> None:
    model = ModelEndpoint(PREV)
    with serve(model):
        # previous-gen slips on policy-3 on its second run (run number 1) only.
        answers = [ask(model.url, ITEM.prompt, run_id).json() for run_id in ("a", "b", "a", "c")]
        stranger = ask(model.url, "What is the weather?", "a").json()
        refused = httpx.post(model.url, json={"prompt": "x"}, timeout=5)
    outputs = [a["output"] for a in answers]
    assert outputs == [ITEM.expected, ITEM.mistake, ITEM.expected, ITEM.expected]
    assert model.url.endswith("/models/sim-previous-gen")
    first = answers[0]
    assert first["agent_name"] == "refund-agent" and first["model"] == "sim-previous-gen"
    tokens = catalog.usage("sim-previous-gen", ITEM, 0)
    assert first["usage"] == {"input_tokens": tokens[0], "output_tokens": tokens[1]}
    assert answers[2] == first, "the same run asked again answers the same"
    assert stranger == {"output": DEFAULT_ANSWER, "model": "sim-previous-gen"}
    assert refused.status_code == 400


async def test_neens_agent_call_reads_the_answer_agent_name_and_usage() -> None:
    escalation = catalog.BY_KEY["chargeback-1"]
    mini = ModelEndpoint(catalog.BY_LABEL["sim-frontier-mini"])
    with serve(mini):
        connection = Connection(mini.url, "neens", None, {}, mini.model.model)
        async with AgentClient(allow_private=True) as client:
            reply = await call_agent(
                client,
                connection,
                escalation.prompt,
                run_id="ppr_1",
                item_id="dsi_1",
                version_label="v41",
            )
    assert reply.answer == escalation.mistake, "mini settles this chargeback on every run"
    assert reply.agent_name == "escalation-agent"
    assert reply.model == "sim-frontier-mini"
    assert (reply.input_tokens, reply.output_tokens) == catalog.usage(
        "sim-frontier-mini", escalation, 0
    )


def test_the_support_agent_answers_as_the_version_it_is_asked_for() -> None:
    agent = AgentEndpoint()
    lookup = catalog.BY_KEY["lookup-2"]
    with serve(agent):
        v41 = ask(agent.url, lookup.prompt, version_label="v41").json()
        v42 = ask(agent.url, lookup.prompt, version_label="v42").json()
        unknown = ask(agent.url, lookup.prompt, version_label="v99")
    assert v41["output"] == lookup.expected and v42["output"] == lookup.mistake
    assert v41["agent_name"] == "refund-agent" and v41["model"] == "sim-frontier-large"
    assert unknown.status_code == 400 and "v41, v42" in unknown.json()["error"]


async def test_the_judge_grades_through_the_llm_judge_client() -> None:
    judge = judge_endpoint()
    item = catalog.BY_KEY["over-limit-1"]
    with serve(judge):
        endpoint = LlmEndpoint(judge.base_url, catalog.JUDGE_MODEL, None, timeout_s=5)
        right = await judge_with_llm(
            endpoint,
            catalog.RESOLUTION.template,
            JudgeCase(input=item.prompt, output=item.expected, expected_output=item.expected),
        )
        settled = await judge_with_llm(
            endpoint,
            catalog.ESCALATION_POLICY.template,
            JudgeCase(input=item.prompt, output=item.mistake, expected_output=None),
        )
        stranger = await judge_with_llm(
            endpoint,
            catalog.ESCALATION_POLICY.template,
            JudgeCase(input="Hello?", output="Hi.", expected_output=None),
        )
    assert (right.score, right.reason) == (1.0, "The reply reaches the reference's resolution.")
    assert settled.score == 0.0
    assert settled.reason == "This over-limit case must be escalated; the reply settles it."
    assert stranger.score is None and stranger.unscored_reason == "grade_parse_failure"
    assert judge.call_count == 3
    assert judge.calls[0].body["model"] == catalog.JUDGE_MODEL


def test_every_endpoint_has_its_own_path() -> None:
    models, agent, judge = endpoints()
    paths = [e.path for e in models] + [agent.path, judge.path]
    assert len(set(paths)) == len(paths) == len(catalog.MODELS) + 2
    assert [e.model for e in models] == list(catalog.MODELS)
