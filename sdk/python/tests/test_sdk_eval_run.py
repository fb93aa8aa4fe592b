"""`neens eval run` / `neens eval push` against the loopback stand-in for the server: the requests
they make, how the agent command is run, the result they print and the exit code.

The server side is `fake_neens` (conftest.py), scripted with the documented answers;
tests/e2e/test_cli_eval.py runs the same commands against the real server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from neens.demo.endpoints import Reply, Scripted

import neens_eval
from neens_eval import cli, waiting

SDK_SRC = Path(neens_eval.__file__).resolve().parent.parent

AGENT_SOURCE = """
import json, os, sys
prompt = sys.stdin.read()
seen = {k: v for k, v in os.environ.items() if k.startswith(("OTEL_", "NEENS_"))}
with open(os.environ["AGENT_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps({"prompt": prompt, "env": seen}) + "\\n")
if prompt in os.environ.get("AGENT_CRASH", "").splitlines():
    sys.stderr.write("Traceback ...\\nRuntimeError: the model is down\\n")
    sys.exit(4)
print("an answer on stdout, which must not reach the CLI's stdout")
"""

PROMPTS = ["Where is order 17?", "Can I return shoes?"]


class Agent:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        script = tmp_path / "agent.py"
        script.write_text(AGENT_SOURCE, encoding="utf-8")
        self.command = [sys.executable, str(script)]
        self.log = tmp_path / "agent.log"
        monkeypatch.setenv("AGENT_LOG", str(self.log))

    def seen(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Agent:
    for name in list(os.environ):
        if name.startswith("OTEL_") or name == "NEENS_GATE_POLICY":
            monkeypatch.delenv(name)
    return Agent(tmp_path, monkeypatch)


def item(index: int, status: str = "pending", **fields: Any) -> dict[str, Any]:
    return {
        "item_id": f"dsi_{index}",
        "position": index,
        "input": PROMPTS[index],
        "expected_output": "…",
        "status": status,
        "session_id": None,
        "score": None,
        "passed": None,
        "baseline_passed": None,
        "error": None,
        **fields,
    }


SCORED = [item(0, "scored", score=1.0, passed=True), item(1, "scored", score=0.9, passed=True)]


def run(status: str = "awaiting_traces", mode: str = "runner", **counts: int) -> dict[str, Any]:
    return {
        "id": "ppr_1",
        "name": "v1",
        "datasetId": "ds_1",
        "versionLabel": "v1",
        "runnerMode": mode,
        "gate": {"min_pass_rate": 0.9},
        "status": status,
        "itemCount": 2,
        "counts": {"pending": 0, "captured": 0, "scored": 0, "error": 0, **counts},
    }


def gate(passed: bool = True) -> dict[str, Any]:
    reasons = [] if passed else ["pass rate 0.5 is below the minimum 0.9"]
    return {
        "passed": passed,
        "reasons": reasons,
        "regressions": 0,
        "passRate": 1.0 if passed else 0.5,
        "gate": {"min_pass_rate": 0.9},
    }


COMPARISON = {
    "rows": [],
    "regressions": [],
    "newPasses": [],
    "costUsdDelta": None,
    "latencyMsDelta": None,
    "stepCountDelta": None,
    "candidate": {
        "avgCostUsd": 0.002,
        "pricedSessions": 2,
        "sessions": 2,
        "avgLatencyMs": 900.0,
        "avgStepCount": 2.0,
    },
    "baseline": None,
}


def script(
    fake: Scripted,
    *,
    items: list[dict[str, Any]] | None = None,
    passed: bool = True,
    final: str = "completed",
    mode: str = "runner",
) -> None:
    """A run that is created, has `items` to run, then finishes with the given gate."""
    fake.reply("GET", "/preprod-evals", Reply(200, {"runs": []}))
    fake.reply("POST", "/preprod-evals", Reply(201, run(mode=mode, pending=2)))
    fake.reply(
        "GET", "/preprod-evals/ppr_1/items", Reply(200, {"items": items or [item(0), item(1)]}),
        Reply(200, {"items": SCORED}),
    )  # fmt: skip
    fake.reply(
        "GET", "/preprod-evals/ppr_1",
        Reply(200, run("running", mode, captured=1, pending=1)),
        Reply(200, run(final, mode, scored=2)),
    )  # fmt: skip
    fake.reply("GET", "/preprod-evals/ppr_1/gate", Reply(200, gate(passed)))
    fake.reply("GET", "/preprod-evals/ppr_1/comparison", Reply(200, COMPARISON))
    fake.reply("GET", "/preprod-evals/ppr_1/metrics", Reply(200, {"metrics": []}))


def create(agent: Agent, *flags: str) -> int:
    return cli.main(
        ["eval", "run", "--create", "--dataset", "ds_1", "--version-label", "v1", *flags,
         "--", *agent.command]
    )  # fmt: skip


def body_of(fake: Scripted, method: str, path: str) -> Any:
    return next(r.body for r in fake.calls if r.method == method and r.path == path)


# --- the happy path -----------------------------------------------------------------------------


def test_run_create_sends_one_snake_case_request_and_exits_0_when_the_gate_passes(
    env: Scripted, agent: Agent, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env)
    policy = tmp_path / "gate.json"
    policy.write_text(json.dumps({"gate": {"max_regressions": 1, "min_pass_rate": 0.5}}))

    code = create(
        agent, "--name", "release", "--dataset-version", "dsv_2", "--baseline", "prod:7d",
        "--judge", "jdg_a", "jdg_b", "--judge", "jdg_c", "--gate-policy", str(policy),
        "--min-pass-rate", "0.9", "--json",
    )  # fmt: skip

    assert code == 0
    assert body_of(env, "POST", "/preprod-evals") == {
        "dataset_id": "ds_1",
        "version_label": "v1",
        "name": "release",
        "dataset_version_id": "dsv_2",
        "judge_deployment_ids": ["jdg_a", "jdg_b", "jdg_c"],
        "baseline": {"kind": "prod_window", "range": "7d"},
        "gate": {"max_regressions": 1, "min_pass_rate": 0.9},  # the flag wins over the file
    }
    out = capsys.readouterr()
    result = json.loads(out.out)  # stdout is exactly the JSON result: the agent's output is not
    assert result["verdict"] == "passed"
    assert result["exitCode"] == 0
    assert result["runId"] == "ppr_1"
    assert result["url"] == f"{env.url}/preprod-evals/ppr_1"
    assert result["counts"] == {
        "total": 2, "passed": 2, "failed": 0, "scored": 2, "error": 0, "pending": 0, "captured": 0
    }  # fmt: skip
    assert "Gate passed." in out.err
    assert "neens: created run ppr_1 (2 items)" in out.err


def test_each_command_gets_its_prompt_on_stdin_and_the_correlation_attributes(
    env: Scripted, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(env)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,neens.eval_run_id=x")

    assert create(agent) == 0

    seen = agent.seen()
    assert [entry["prompt"] for entry in seen] == PROMPTS  # in frozen order, one at a time
    for index, entry in enumerate(seen):
        variables = entry["env"]
        assert variables["NEENS_ITEM_INPUT"] == PROMPTS[index]
        assert variables["OTEL_RESOURCE_ATTRIBUTES"] == (
            "deployment.environment=ci,neens.eval_run_id=ppr_1,"
            f"neens.dataset_item_id=dsi_{index},neens.version_label=v1"
        )
        assert variables["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == f"{env.url}/v1/traces"
        assert variables["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
        assert variables["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] == (
            "Authorization=Bearer%20nk_live_test"
        )


def test_resuming_a_run_invokes_only_the_items_still_pending(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env, items=[item(0, "captured"), item(1)])
    env.reply("GET", "/preprod-evals/ppr_1", Reply(200, run("running", captured=1, pending=1)),
              Reply(200, run("running", captured=1, pending=1)), Reply(200, run(scored=2,
              status="completed")))  # fmt: skip

    code = cli.main(["eval", "run", "--run-id", "ppr_1", "--", *agent.command])

    assert code == 0
    assert [entry["prompt"] for entry in agent.seen()] == [PROMPTS[1]]
    assert "POST /preprod-evals" not in env.paths()
    assert "already captured: 1 of 2 items; running the 1 still pending" in capsys.readouterr().err


def test_a_finished_run_is_gated_again_without_invoking_anything(
    env: Scripted, agent: Agent
) -> None:
    script(env, items=SCORED)
    env.reply("GET", "/preprod-evals/ppr_1", Reply(200, run("completed", scored=2)))

    assert cli.main(["eval", "run", "--run-id", "ppr_1", "--", *agent.command]) == 0
    assert agent.seen() == []


# --- exit 1 -------------------------------------------------------------------------------------


def test_a_failed_server_gate_exits_1_and_no_gate_reports_it_and_exits_0(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env, passed=False)
    assert create(agent) == 1
    blocked = capsys.readouterr().out
    script(env, passed=False)
    assert create(agent, "--no-gate") == 0
    reported = capsys.readouterr().out

    for summary in (blocked, reported):
        assert "Server gate: failed, pass rate 50%" in summary
        assert "  - pass rate 0.5 is below the minimum 0.9" in summary
        assert "Gate FAILED:" in summary
    assert "--no-gate: reported only, exiting 0." in reported


def test_a_breached_block_rule_fails_the_gate_even_when_the_server_gate_passes(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env)

    code = create(agent, "--max-abs-failures", "0", "--min-avg-score", "0.99", "--json")

    assert code == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "failed"
    assert result["reasons"] == [
        "rule min_avg_score: avg item score 0.95 is below the minimum 0.99"
    ]
    assert [(r["rule"], r["status"]) for r in result["rules"]] == [
        ("min_avg_score", "fail"),
        ("max_abs_failures", "pass"),
    ]


def test_an_item_the_server_cannot_record_as_an_error_is_reported_and_the_cli_does_not_hang(
    env: Scripted, agent: Agent, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setattr(waiting, "STALL_GRACE_S", 0.0)
    monkeypatch.setenv("AGENT_CRASH", PROMPTS[0])
    script(env)
    still = [item(0), item(1, "captured")]
    env.reply("GET", "/preprod-evals/ppr_1/items", Reply(200, {"items": [item(0), item(1)]}),
              Reply(200, {"items": still}))  # fmt: skip
    env.reply("GET", "/preprod-evals/ppr_1", Reply(200, run("running", captured=1, pending=1)))

    code = create(agent, "--json")

    assert code == 1
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert result["verdict"] == "failed"
    assert result["notRun"] == [
        {
            "itemId": "dsi_0",
            "input": PROMPTS[0],
            "reason": "the command exited with code 4: RuntimeError: the model is down",
            "recorded": False,
        }
    ]
    # This server could not record the item as an error (it answers 404), so the run never
    # finished: there is no server verdict, and the run is left open for a re-run.
    assert "POST /preprod-evals/ppr_1/items/dsi_0/error" in env.paths()
    assert result["gate"] is None
    assert "neens: item dsi_0: the command exited with code 4" in out.err
    assert f"neens eval run --run-id ppr_1 -- {sys.executable}" in out.err
    assert "POST /preprod-evals/ppr_1/cancel" not in env.paths()  # left open for a re-run


def test_a_command_that_fails_after_its_trace_was_captured_leaves_the_verdict_to_the_server(
    env: Scripted, agent: Agent, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("AGENT_CRASH", PROMPTS[0])
    script(env)
    env.reply(
        "GET", "/preprod-evals/ppr_1",
        Reply(200, run("running", captured=2)), Reply(200, run("completed", scored=2)),
    )  # fmt: skip

    code = create(agent, "--json")

    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "passed"
    assert result["notRun"] == []
    assert result["warnings"] == [
        "item dsi_0: the command exited with code 4: RuntimeError: the model is down, but its "
        "trace was captured, so the server's verdict on it stands"
    ]


# --- exit 3 -------------------------------------------------------------------------------------


def test_a_server_gone_while_waiting_exits_3_and_still_writes_the_json_result(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env)
    error = Reply(503, {"error": {"code": "x", "message": "y"}})
    env.reply(
        "GET", "/preprod-evals/ppr_1", Reply(200, run("running", captured=1, pending=1)), error
    )

    code = create(agent, "--json")

    assert code == 3
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert result["verdict"] == "no_verdict"
    assert result["exitCode"] == 3
    assert "could not reach Neens" in result["error"]
    seen = result["lastSeen"]
    assert seen["status"] == "running"
    assert seen["counts"] == {"pending": 1, "captured": 1, "scored": 0, "error": 0}
    assert seen["at"].endswith("Z")
    assert f"neens: last seen at {seen['at']}: running, 1/2 captured, 0/2 scored" in out.err
    assert "follow it again with `neens eval run --run-id ppr_1 -- " in out.err
    assert out.err.splitlines()[-1].startswith("neens: error: could not reach Neens")


def test_a_create_that_got_no_answer_is_not_sent_twice_and_the_run_it_made_is_followed(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env)
    older = {**run("completed"), "id": "ppr_0"}
    env.reply("POST", "/preprod-evals", Reply(504))
    env.reply(
        "GET", "/preprod-evals",
        Reply(200, {"runs": [older]}),
        Reply(200, {"runs": [{**run(pending=2)}, older]}),
    )  # fmt: skip

    code = create(agent, "--json")

    out = capsys.readouterr()
    assert code == 0, out.err
    assert [r.path for r in env.calls if r.method == "POST"] == ["/preprod-evals"]
    assert json.loads(out.out)["runId"] == "ppr_1"
    assert "neens: the server did create run ppr_1; following it" in out.err
    assert len(agent.seen()) == 2


def test_a_create_that_got_no_answer_and_made_nothing_exits_3_without_sending_it_again(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env)
    env.reply("POST", "/preprod-evals", Reply(502))

    assert create(agent) == 3
    assert [r.path for r in env.calls if r.method == "POST"] == ["/preprod-evals"]
    assert "so nothing was created; run the command again" in capsys.readouterr().err
    assert agent.seen() == []


def test_a_create_that_got_no_answer_from_a_server_that_stays_away_says_how_to_check(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env)
    env.reply("POST", "/preprod-evals", Reply(504))
    env.reply("GET", "/preprod-evals", Reply(200, {"runs": []}), Reply(503))

    assert create(agent) == 3
    err = capsys.readouterr().err
    assert "looking for the run it may have created failed too" in err
    assert "GET /preprod-evals?dataset_id=ds_1" in err
    assert [r.path for r in env.calls if r.method == "POST"] == ["/preprod-evals"]


def test_dataset_takes_a_name_and_a_name_nobody_pushed_is_a_usage_error(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env)
    env.reply("GET", "/datasets", Reply(200, {"datasets": [{"id": "ds_1", "name": "support"}]}))
    by_name = ["eval", "run", "--create", "--dataset", "support", "--version-label", "v1"]

    assert cli.main([*by_name, "--", *agent.command]) == 0
    assert body_of(env, "POST", "/preprod-evals")["dataset_id"] == "ds_1"
    assert next(r for r in env.calls if r.path == "/datasets").query == {"name": ["support"]}

    env.reply("GET", "/datasets", Reply(200, {"datasets": []}))
    capsys.readouterr()
    assert cli.main([*by_name, "--", *agent.command]) == 2
    assert "--dataset: no dataset named 'support' in this project" in capsys.readouterr().err


def test_a_server_gone_while_waiting_with_no_gate_is_reported_and_exits_0(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env)
    env.reply("GET", "/preprod-evals/ppr_1", Reply(503, {"error": {"code": "x", "message": "y"}}))

    code = create(agent, "--json", "--no-gate")

    assert code == 0
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert result["verdict"] == "no_verdict"
    assert result["exitCode"] == 0
    assert "neens: --no-gate: no verdict, reported only, exiting 0" in out.err


def test_no_verdict_before_the_timeout_exits_3_and_no_gate_reports_it_and_exits_0(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env)
    env.reply("GET", "/preprod-evals/ppr_1", Reply(200, run("awaiting_traces", pending=2)))
    assert create(agent, "--timeout", "0.3") == 3
    capsys.readouterr()

    code = create(agent, "--timeout", "0.3", "--no-gate")

    assert code == 0
    summary = capsys.readouterr().out
    assert "--no-gate: reported only, exiting 0." in summary
    assert "No verdict:" in summary
    assert "no verdict after 0.3 s (--timeout): the run is still awaiting_traces" in summary
    assert "No trace reached the run" in summary


# --- push ---------------------------------------------------------------------------------------


def test_push_creates_a_push_mode_run_and_gates_it(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    script(env, items=SCORED, mode="push")

    code = cli.main(
        ["eval", "push", "--dataset", "ds_1", "--version-label", "v1",
         "--agent-connection", "conn_1", "--max-regressions", "0", "--json"]
    )  # fmt: skip

    assert code == 0
    assert body_of(env, "POST", "/preprod-evals") == {
        "dataset_id": "ds_1",
        "version_label": "v1",
        "runner_mode": "push",
        "agent_connection_id": "conn_1",
        "gate": {"max_regressions": 0},
    }
    assert json.loads(capsys.readouterr().out)["mode"] == "push"


# --- exit 2 -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "ds_1", "--version-label", "v1"], "give either --create"),
        (["--create", "--run-id", "ppr_1"], "give either --create"),
        (["--create", "--dataset", "ds_1"], "--version-label is required"),
        (["--create", "--version-label", "v1"], "--dataset is required"),
        (["--run-id", "ppr_1", "--baseline", "prod:7d"], "--baseline is only for creating a run"),
        (["--run-id", "ppr_1", "--min-pass-rate", "0.9"], "--min-pass-rate is only for creating"),
        (["--create", "--dataset", "d", "--version-label", "v", "--project-id", "p"],
         "--project-id is not supported: the API key decides the project"),
        (["--create", "--dataset", "d", "--version-label", "v", "--baseline", "prod:7y"],
         "is not a baseline; use prod:WINDOW"),
        (["--create", "--dataset", "d", "--version-label", "v", "--baseline", "prod:367d"],
         "at most 366 days"),
        (["--create", "--dataset", "d", "--version-label", "v", "--baseline", "run:"],
         "is not a baseline"),
        (["--create", "--dataset", "d", "--version-label", "v", "--min-pass-rate", "90"],
         "is not between 0 and 1"),
        (["--create", "--dataset", "d", "--version-label", "v", "--max-regressions", "-1"],
         "is negative"),
        (["--create", "--dataset", "d", "--version-label", "v", "--concurrency", "0"],
         "must be at least 1"),
        (["--create", "--dataset", "d", "--version-label", "v", "--timeout", "0"],
         "is not a positive number of seconds"),
        (["--create", "--dataset", "d", "--version-label", "v", "--max-cost-delta-pct", "-101"],
         "is below -100"),
    ],
)  # fmt: skip
def test_usage_errors_exit_2_before_anything_is_sent(
    env: Scripted, agent: Agent, args: list[str], message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    code = cli.main(["eval", "run", *args, "--", *agent.command])

    assert code == 2
    err = capsys.readouterr().err
    assert message in err
    assert env.calls == []
    assert agent.seen() == []


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([], "no agent command: put it after --"),
        (["no-such-agent-7f3a"], "'no-such-agent-7f3a' was not found on PATH"),
        (["./missing/agent.sh"], "is not an executable file"),
    ],
)
def test_an_agent_command_that_cannot_run_is_a_usage_error(
    env: Scripted, command: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(
        ["eval", "run", "--create", "--dataset", "d", "--version-label", "v", "--", *command]
    )

    assert code == 2
    assert message in capsys.readouterr().err
    assert env.calls == []


def test_a_bad_policy_from_neens_gate_policy_exits_2_naming_the_rule(
    env: Scripted, agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    policy = tmp_path / "gate.json"
    policy.write_text(json.dumps({"rules": [{"min_avg_score": 0.8, "max_abs_failures": 2}]}))
    monkeypatch.setenv("NEENS_GATE_POLICY", str(policy))

    assert create(agent) == 2
    err = capsys.readouterr().err
    assert f"gate policy {policy}: rules[0]: a rule has exactly one dimension key" in err
    assert env.calls == []


def test_a_dataset_without_a_golden_version_exits_2_and_says_how_to_fix_it(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    message = "dataset ds_1 has no golden version: mark one golden or pin dataset_version_id"
    env.reply("GET", "/preprod-evals", Reply(200, {"runs": []}))
    env.reply("POST", "/preprod-evals", Reply(
        422, {"error": {"code": "unprocessable", "message": message, "field": "dataset_id"}}
    ))  # fmt: skip

    assert create(agent) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "has no golden version" in err
    assert "neens datasets push FILE.jsonl --name NAME --golden" in err
    assert agent.seen() == []


def test_a_refused_key_exits_2(env: Scripted, agent: Agent) -> None:
    env.reply("GET", "/preprod-evals", Reply(200, {"runs": []}))
    env.reply("POST", "/preprod-evals", Reply(
        401, {"error": {"code": "not_authenticated", "message": "unknown or revoked API key"}}
    ))  # fmt: skip

    assert create(agent) == 2


@pytest.mark.parametrize("command", ["run", "push"])
@pytest.mark.parametrize("mode", ["push", "runner"])
def test_either_command_follows_any_run_by_id_to_its_gate_without_running_anything(
    env: Scripted, agent: Agent, capsys: pytest.CaptureFixture[str], command: str, mode: str
) -> None:
    script(env, items=SCORED, mode=mode, passed=False)
    env.reply(
        "GET", "/preprod-evals/ppr_1",
        Reply(200, run("running", mode, captured=1, pending=1)), Reply(200, run("completed", mode)),
    )  # fmt: skip
    extra = ["--", *agent.command] if command == "run" and mode == "push" else []

    code = cli.main(["eval", command, "--run-id", "ppr_1", "--json", *extra])

    out = capsys.readouterr()
    assert code == 1, out.err
    assert json.loads(out.out)["reasons"] == ["server gate: pass rate 0.5 is below the minimum 0.9"]
    assert agent.seen() == []
    assert not any(r.method == "POST" for r in env.calls)


def test_push_with_run_id_refuses_the_flags_that_create_a_run(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["eval", "push", "--run-id", "ppr_1", "--agent-connection", "conn_1"])

    assert code == 2
    assert "--agent-connection is only for creating a run" in capsys.readouterr().err
    assert env.calls == []


def test_a_yaml_policy_needs_pyyaml_and_says_so_when_it_is_missing(tmp_path: Path) -> None:
    """Run with `python -S`: no site-packages, so PyYAML cannot be imported, as on a bare CI."""
    policy = tmp_path / "gate.yaml"
    policy.write_text("rules:\n  - min_avg_score: 0.8\n", encoding="utf-8")
    environ = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(SDK_SRC),
        "NEENS_BASE_URL": "http://127.0.0.1:9",
        "NEENS_API_KEY": "nk_live_test",
    }

    done = subprocess.run(
        [sys.executable, "-S", "-m", "neens_eval", "eval", "run", "--create", "--dataset", "d",
         "--version-label", "v", "--gate-policy", str(policy), "--", sys.executable],
        env=environ, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"neens: error: gate policy {policy} is YAML, but PyYAML is not installed: pip install "
        f"pyyaml, or write the policy as JSON\n"
    )


def test_the_help_of_eval_run_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["eval", "run", "--help"]) == 0
    text = capsys.readouterr().out
    for line in ("0  the gate passed", "1  the gate failed", "2  usage or configuration error",
                 "3  no verdict"):  # fmt: skip
        assert line in text


def test_a_push_run_whose_every_item_failed_shows_the_servers_counts_and_the_errors(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    error = "every item failed: the agent endpoint produced no answer (see items)"
    failed = {**run("failed", "push", error=7), "itemCount": 7, "error": error}
    errored = [
        item(0, "error", item_id=f"dsi_{i}", error=f"agent call {i} failed: connection refused")
        for i in range(7)
    ]
    env.reply("GET", "/preprod-evals", Reply(200, {"runs": []}))
    env.reply("POST", "/preprod-evals", Reply(201, {**run(mode="push", pending=7), "itemCount": 7}))
    env.reply("GET", "/preprod-evals/ppr_1", Reply(200, failed))
    env.reply("GET", "/preprod-evals/ppr_1/items", Reply(200, {"items": errored}))
    env.reply("GET", "/preprod-evals/ppr_1/gate", Reply(200, gate(False)))
    env.reply("GET", "/preprod-evals/ppr_1/comparison", Reply(200, COMPARISON))
    env.reply("GET", "/preprod-evals/ppr_1/metrics", Reply(200, {"metrics": []}))

    code = cli.main(
        ["eval", "push", "--dataset", "ds_1", "--version-label", "v1",
         "--agent-connection", "conn_1"]
    )  # fmt: skip

    assert code == 1
    out = capsys.readouterr()
    # What the server counts: nothing captured or scored, every item in error.
    assert "neens: ppr_1 failed: 0/7 captured, 0/7 scored, 7 errors" in out.err
    err = out.out  # the summary
    assert f"  run error: {error}\n" in err
    assert "  item errors (7):\n" in err
    assert '    - dsi_0 "Where is order 17?": agent call 0 failed: connection refused\n' in err
    assert "agent call 4 failed" in err and "agent call 5 failed" not in err  # bounded
    assert "    … and 2 more (see the run's items)\n" in err
    assert f"  - the run failed: {error}\n" in err


def test_the_retry_message_names_retry_window_when_the_flag_set_it(
    monkeypatch: pytest.MonkeyPatch, closed_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NEENS_BASE_URL", f"http://127.0.0.1:{closed_port}")
    monkeypatch.setenv("NEENS_API_KEY", "nk_live_test")
    monkeypatch.setenv("NEENS_RETRY_WINDOW", "30")

    assert cli.main(["eval", "push", "--run-id", "ppr_1", "--retry-window", "0"]) == 3

    err = capsys.readouterr().err
    assert "(retries last 0 s, --retry-window changes it)" in err
    assert "NEENS_RETRY_WINDOW" not in err
