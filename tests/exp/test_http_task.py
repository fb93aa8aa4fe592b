"""The http task against real endpoints on loopback: both request formats, cost from reported
usage, and every failure of the right kind, retried only when it is infra."""

from __future__ import annotations

from typing import Any

import pytest

import neens.exp.runner
from neens.demo.endpoints import (
    Agent,
    Fixed,
    Reply,
    flaky,
    priced,
    refused_url,
    serve,
    server_error,
    slow,
    steady,
)
from tests.exp.conftest import Project, saved_trials

ANSWERS = {"alpha": "ALPHA", "beta": "BETA", "gamma": "GAMMA", "delta": "nope"}


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(neens.exp.runner, "RETRY_BASE_S", 0.01)


def _http(project: Project, url: str, **task: Any) -> None:
    project.write_spec(task={"kind": "http", "url": url, **task})


def test_the_neens_format_sends_the_input_and_reads_the_output(project: Project) -> None:
    with serve(steady(ANSWERS)) as server:
        _http(project, server.url("/agent"))
        body = project.exp_json("run", "spec.json")
    assert (body["graded"], body["passed"]) == (4, 3)
    calls = sorted((c.body["input"], c.body["dataset_item_id"]) for c in _calls(server))
    assert calls == [("alpha", "alpha"), ("beta", "beta"), ("delta", "delta"), ("gamma", "gamma")]
    assert {c.body["eval_run_id"] for c in _calls(server)} == {body["id"]}


def _calls(server: Any) -> list[Any]:
    return list(server.calls)


def test_the_chat_format_is_priced_from_the_usage_it_reports(
    project: Project, database_url: str
) -> None:
    with serve(priced(ANSWERS)) as server:
        _http(project, server.url("/priced"), format="chat", model="gpt-4o-mini")
        body = project.exp_json("run", "spec.json")
    assert body["passed"] == 3
    assert body["costUsd"] is not None and body["costUsd"] > 0
    assert body["pricedTrials"] == 4
    call = _calls(server)[0]
    assert call.body["model"] == "gpt-4o-mini"
    assert call.body["messages"][-1]["role"] == "user"
    trials = _trials(database_url, body["id"])
    assert sum(t.cost_usd for t in trials.values()) == pytest.approx(body["costUsd"])


def test_infra_errors_are_retried_and_agent_errors_are_not(
    project: Project, database_url: str
) -> None:
    endpoints = [
        flaky(ANSWERS, first=2, fraction=0.0, path="/flaky"),
        Fixed(Reply(404, {"error": "no such route"}), path="/404"),
        Fixed(Reply(429, {"error": "slow down"}), path="/429"),
        server_error(path="/500"),
    ]
    with serve(*endpoints) as server:
        _http(project, server.url("/flaky"))
        recovered = project.exp_json("run", "spec.json", "--case", "alpha", "--retries", "3")
        _http(project, server.url("/404"))
        not_found = project.exp_json("run", "spec.json", "--case", "alpha", "--retries", "3")
        _http(project, server.url("/429"))
        limited = project.exp_json("run", "spec.json", "--case", "alpha", "--retries", "2")
        _http(project, server.url("/500"))
        broken = project.exp_json("run", "spec.json", "--case", "alpha", "--retries", "1")
    assert recovered["passed"] == 1
    assert _trials(database_url, recovered["id"])["alpha"].attempts == 3
    assert not_found["errors"] == {"infra": 0, "agent": 1}
    assert _trials(database_url, not_found["id"])["alpha"].attempts == 1
    assert endpoints[1].call_count == 1
    assert limited["errors"] == {"infra": 1, "agent": 0}
    assert endpoints[2].call_count == 3
    trial = _trials(database_url, broken["id"])["alpha"]
    assert (trial.error_kind, trial.attempts) == ("infra", 2)
    assert trial.error == "endpoint answered HTTP 500: internal error"


def test_an_endpoint_that_cannot_be_reached_is_an_infra_error(
    project: Project, database_url: str
) -> None:
    _http(project, refused_url())
    body = project.exp_json("run", "spec.json", "--case", "beta", "--retries", "1")
    trial = _trials(database_url, body["id"])["beta"]
    assert (trial.error_kind, trial.attempts) == ("infra", 2)
    assert trial.error.startswith("could not reach ")


def test_an_endpoint_too_slow_for_the_task_timeout_is_an_agent_error(
    project: Project, database_url: str
) -> None:
    with serve(slow(5.0)) as server:
        _http(project, server.url("/slow"), timeout=0.3)
        body = project.exp_json("run", "spec.json", "--case", "beta")
    trial = _trials(database_url, body["id"])["beta"]
    assert (trial.error_kind, trial.attempts) == ("agent", 1)
    assert trial.error == "no complete answer within 0.3 s (timeout)"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        # JSON escapes, as an endpoint sends them: a NUL, and a lone surrogate (no UTF-8 can hold)
        (b'{"output": "a\\u0000b"}', "the answer contains a NUL character (\\x00) at offset 1"),
        (
            b'{"output": "a\\ud800b"}',
            "the answer contains a lone surrogate (\\ud800) at offset 1",
        ),
    ],
    ids=["nul", "lone-surrogate"],
)
def test_an_answer_no_store_can_hold_is_an_agent_error_and_the_run_goes_on(
    project: Project, database_url: str, body: bytes, reason: str
) -> None:
    reply = Reply(200, body, headers={"content-type": "application/json"})
    with serve(Fixed(reply, path="/bad")) as server:
        _http(project, server.url("/bad"))
        run = project.exp_json("run", "spec.json", "--retries", "3")
    assert (run["graded"], run["errors"]) == (0, {"infra": 0, "agent": 4})
    trials = _trials(database_url, run["id"])
    assert {(t.error_kind, t.error, t.attempts, t.output) for t in trials.values()} == {
        ("agent", reason, 1, None)
    }


def test_the_trial_timeout_caps_the_retries(project: Project, database_url: str) -> None:
    with serve(server_error(path="/500")) as server:
        _http(project, server.url("/500"))
        body = project.exp_json(
            "run", "spec.json", "--case", "beta", "--retries", "1000", "--trial-timeout", "0.5"
        )
    trial = _trials(database_url, body["id"])["beta"]
    assert trial.error_kind == "infra"
    assert trial.error.startswith("the case-trial took longer than --trial-timeout 0.5 s (")
    assert 2 < trial.attempts < 1000


def test_header_values_are_read_from_the_environment(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Agent(ANSWERS)
    with serve(agent) as server:
        _http(project, server.url("/agent"), headers={"Authorization": "Bearer ${AGENT_TOKEN}"})
        monkeypatch.delenv("AGENT_TOKEN", raising=False)
        missing = project.exp("run", "spec.json")
        assert missing.code == 2
        assert missing.err.strip() == "neens: error: task.headers: ${AGENT_TOKEN} is not set"
        monkeypatch.setenv("AGENT_TOKEN", "secret")
        project.exp_json("run", "spec.json", "--case", "alpha")
    assert agent.calls[0].headers["authorization"] == "Bearer secret"


def _trials(database_url: str, experiment_id: str) -> dict[str, Any]:
    return {t.case_id: t for t in saved_trials(database_url, experiment_id)}
