"""`neens eval run` and `neens eval push` against a live server, as a CI job runs them.

The agent is a real command (tests/support/agent_cmd.py) that exports its trace with the
OpenTelemetry SDK, configured only by the environment `neens eval run` gives it. Each test reads
as one sentence of the exit-code contract or of gate-as-code (docs/cli.md, docs/ci.md).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from neens.api.app import create_app
from neens.demo.endpoints import agent_suite, serve
from neens.settings import Settings
from neens.store.keys import CreatedKey
from tests.support.agent_cmd import ANSWERS
from tests.support.live import LiveServer, free_port, serve_in_thread
from tests.support.sqlite_only import sqlite_only

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
AGENT = [sys.executable, str(ROOT / "tests" / "support" / "agent_cmd.py")]
ORDER, SHOES, CANADA = list(ANSWERS)


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict[str, Any]:
        assert self.stdout.count("\n") == 1, f"stdout is not one JSON line: {self.stdout!r}"
        document: dict[str, Any] = json.loads(self.stdout)
        return document

    def rules(self) -> dict[str, dict[str, Any]]:
        return {rule["rule"]: rule for rule in self.json["rules"]}


@dataclass
class Neens:
    """The server, a key, and the `neens` command pointed at them."""

    url: str
    key: str
    tmp: Path
    admin_key: str = ""
    """An admin key of the same project, for configuration (judges, agent connections)."""
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.tmp / "agent.log"

    def api(self) -> httpx.Client:
        return httpx.Client(
            timeout=30, base_url=self.url, headers={"Authorization": f"Bearer {self.key}"}
        )

    def admin_api(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.admin_key}"}
        return httpx.Client(timeout=30, base_url=self.url, headers=headers)

    def golden(self, golden: bool = True) -> str:
        """A dataset of the three prompts the agent knows, its one version golden."""
        with self.api() as api:
            dataset = api.post("/datasets", json={"name": f"golden-{time.time_ns()}"}).json()
            items = [
                {"input": prompt, "expected_output": answer} for prompt, answer in ANSWERS.items()
            ]
            r = api.post(
                f"/datasets/{dataset['id']}/versions", json={"items": items, "golden": golden}
            )
            assert r.status_code == 201, r.text
        return str(dataset["id"])

    def env(self, agent: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "NEENS_BASE_URL": self.url,
            "NEENS_API_KEY": self.key,
            "AGENT_LOG": str(self.log),
            **(agent or {}),
            **extra,
        }

    def neens(
        self, *args: str, agent: dict[str, str] | None = None, env: dict[str, str] | None = None
    ) -> Result:
        done = subprocess.run(
            [sys.executable, "-m", "neens_eval", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env if env is not None else self.env(agent),
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def create(
        self, dataset: str, label: str, *flags: str, agent: dict[str, str] | None = None
    ) -> Result:
        """`neens eval run --create ... --json -- <agent>`."""
        return self.neens(
            "eval", "run", "--create", "--dataset", dataset, "--version-label", label,
            *flags, "--json", "--", *AGENT, agent=agent,
        )  # fmt: skip

    def again(self, run_id: str, *flags: str, agent: dict[str, str] | None = None) -> Result:
        """`neens eval run --run-id ... --json -- <agent>`: resume, or re-gate a finished run."""
        return self.neens(
            "eval", "run", "--run-id", run_id, *flags, "--json", "--", *AGENT, agent=agent
        )

    def invocations(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def run(self, run_id: str) -> dict[str, Any]:
        with self.api() as api:
            document: dict[str, Any] = api.get(f"/preprod-evals/{run_id}").json()
        return document

    def items(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The run's items by prompt."""
        with self.api() as api:
            listed = api.get(f"/preprod-evals/{run_id}/items").json()["items"]
        return {item["input"]: item for item in listed}

    def runs(self) -> list[dict[str, Any]]:
        with self.api() as api:
            listed: list[dict[str, Any]] = api.get("/preprod-evals").json()["runs"]
        return listed

    def policy(self, document: object, name: str = "gate.json") -> str:
        path = self.tmp / name
        if isinstance(document, str):
            path.write_text(document, encoding="utf-8")
        else:
            path.write_text(json.dumps(document), encoding="utf-8")
        return str(path)


@pytest.fixture
def neens(live_server: LiveServer, key: CreatedKey, admin_key: CreatedKey, tmp_path: Path) -> Neens:
    return Neens(live_server.url, key.key, tmp_path, admin_key.key)


def lines(*prompts: str) -> str:
    return "\n".join(prompts)


# --- passing, failing, and how each item is run -------------------------------------------------


def test_a_candidate_that_answers_every_prompt_right_passes_the_gate_and_exits_0(
    neens: Neens,
) -> None:
    dataset = neens.golden()

    result = neens.create(dataset, "pr-482", "--min-pass-rate", "0.9", "--max-regressions", "0")

    assert result.code == 0, result.stderr
    out = result.json
    assert out["verdict"] == "passed"
    assert out["exitCode"] == 0
    assert out["status"] == "completed"
    assert out["counts"]["total"] == 3
    assert out["counts"]["passed"] == 3
    assert out["gate"]["passed"] is True
    assert out["passRate"] == 1.0
    assert out["url"] == f"{neens.url}/preprod-evals/{out['runId']}"
    run = neens.run(out["runId"])
    assert run["gate"] == {"max_regressions": 0, "min_pass_rate": 0.9}
    assert run["versionLabel"] == "pr-482"
    assert run["runnerMode"] == "runner"
    # The summary went to stderr, the prompt to each command on stdin and in $NEENS_ITEM_INPUT.
    # Without a baseline, max_regressions cannot be checked: a warning, said to be one.
    assert (
        "Gate passed, with 1 warning (a rule of severity warn that fails or is missing is "
        "reported and does not block):\n  - rule gate.max_regressions: no baseline cohort"
    ) in result.stderr
    seen = neens.invocations()
    assert sorted(entry["prompt"] for entry in seen) == sorted(ANSWERS)
    assert all(entry["env_input"] == entry["prompt"] for entry in seen)


def test_concurrent_items_each_carry_their_own_item_id_merged_into_the_users_attributes(
    neens: Neens,
) -> None:
    dataset = neens.golden()
    label = "rc 1, 100%=ok"  # a comma, a space, '%' and '=' must survive percent-encoding
    env = neens.env(
        {"AGENT_SLEEP_S": "1"},
        OTEL_RESOURCE_ATTRIBUTES="team=search%20ranking,neens.version_label=stale",
    )

    result = neens.neens(
        "eval", "run", "--create", "--dataset", dataset, "--version-label", label,
        "--concurrency", "3", "--json", "--", *AGENT, env=env,
    )  # fmt: skip

    assert result.code == 0, result.stderr
    run_id = result.json["runId"]
    items = neens.items(run_id)
    seen = neens.invocations()
    assert len(seen) == 3
    for entry in seen:
        resource = entry["resource"]
        assert resource["neens.eval_run_id"] == run_id
        assert resource["neens.dataset_item_id"] == items[entry["prompt"]]["item_id"]
        assert resource["neens.version_label"] == label
        assert resource["team"] == "search ranking"  # the user's own attribute is kept
    # The three commands ran at the same time ...
    assert max(entry["start"] for entry in seen) < min(entry["end"] for entry in seen)
    # ... and each item captured the answer to its own prompt.
    with neens.api() as api:
        rows = api.get(f"/preprod-evals/{run_id}/comparison").json()["rows"]
    assert {row["input"]: row["output"] for row in rows} == ANSWERS


@sqlite_only(
    "the subject is the SDK's settings; tests/api/test_traces.py ingests on both databases"
)
def test_with_only_the_two_variables_set_the_agent_exports_to_neens_with_the_key(
    neens: Neens,
) -> None:
    dataset = neens.golden()

    result = neens.create(dataset, "v1")

    assert result.code == 0, result.stderr
    seen = neens.invocations()
    assert {entry["endpoint"] for entry in seen} == {f"{neens.url}/v1/traces"}
    assert all(entry["has_auth_header"] for entry in seen)


def test_a_candidate_below_the_min_pass_rate_fails_the_server_gate_and_exits_1(
    neens: Neens,
) -> None:
    dataset = neens.golden()

    result = neens.neens(
        "eval", "run", "--create", "--dataset", dataset, "--version-label", "v2",
        "--min-pass-rate", "0.9", "--", *AGENT, agent={"AGENT_WRONG": ORDER},
    )  # fmt: skip

    assert result.code == 1, result.stderr
    # Without --json the summary is the command's output.
    assert "Server gate: failed" in result.stdout
    assert re.search(r"pass rate 0\.6+7 is below the minimum 0\.9", result.stdout)
    assert "Gate FAILED:" in result.stdout
    assert "/preprod-evals/ppr_" in result.stdout


@sqlite_only(
    "the subject is the exit code; tests/api/test_preprod_compare.py gates on both databases"
)
def test_no_gate_prints_the_failed_gate_but_exits_0(neens: Neens) -> None:
    dataset = neens.golden()
    failed = neens.create(dataset, "v2", "--min-pass-rate", "0.9", agent={"AGENT_WRONG": ORDER})
    assert failed.code == 1

    reported = neens.again(failed.json["runId"], "--no-gate")

    assert reported.code == 0, reported.stderr
    out = reported.json
    assert out["verdict"] == "failed"
    assert out["enforced"] is False
    assert out["exitCode"] == 0
    assert any("below the minimum 0.9" in reason for reason in out["reasons"])
    assert "--no-gate: reported only" in reported.stderr
    assert len(neens.invocations()) == 3  # a finished run invokes nothing


def test_an_item_the_baseline_passed_and_the_candidate_fails_is_a_regression(
    neens: Neens,
) -> None:
    dataset = neens.golden()
    baseline = neens.create(dataset, "v1")
    assert baseline.code == 0, baseline.stderr
    baseline_id = baseline.json["runId"]

    candidate = neens.create(
        dataset, "v2", "--baseline", f"run:{baseline_id}", "--max-regressions", "0",
        agent={"AGENT_WRONG": SHOES},
    )  # fmt: skip

    assert candidate.code == 1, candidate.stderr
    out = candidate.json
    assert out["status"] == "completed_with_regressions"
    item = neens.items(out["runId"])[SHOES]
    assert [r["itemId"] for r in out["regressions"]] == [item["item_id"]]
    assert out["regressions"][0]["input"] == SHOES
    assert "server gate: 1 regression exceeds the maximum of 0" in out["reasons"]
    assert "Regressions (1)" in candidate.stderr
    assert neens.run(out["runId"])["baseline"] == {"kind": "preprod_run", "value": baseline_id}


# --- items that cannot be run ----------------------------------------------------------------


@sqlite_only(
    "the subject is the CLI's commands; tests/api/test_preprod_runner.py records errors on both"
)
def test_items_whose_command_fails_or_times_out_are_recorded_as_errors_and_the_run_finishes(
    neens: Neens,
) -> None:
    dataset = neens.golden()

    # The timeout leaves room for an agent that answers to start under a loaded test machine
    # (it imports the OpenTelemetry SDK, over a second there); the hanging one sleeps a minute.
    broken = neens.create(
        dataset, "v1", "--concurrency", "3", "--item-timeout", "6",
        agent={"AGENT_CRASH": ORDER, "AGENT_HANG": SHOES},
    )  # fmt: skip

    assert broken.code == 1, broken.stderr
    out = broken.json
    assert out["verdict"] == "failed"
    assert (
        out["reasons"][0]
        == "2 items were not run: the agent command failed, they count as errors in the run"
    )
    reasons = {row["input"]: row["reason"] for row in out["notRun"]}
    assert reasons[ORDER] == (
        "the command exited with code 3: agent: the model provider refused the request"
    )
    assert reasons[SHOES].startswith("the command timed out after 6 s (--item-timeout)")
    assert all(row["recorded"] for row in out["notRun"])
    # The others went on; the failures are errors on the server, and the run finished.
    items = neens.items(out["runId"])
    assert items[CANADA]["status"] == "scored"
    assert items[ORDER]["status"] == "error"
    assert items[ORDER]["error"].startswith("not run: the command exited with code 3")
    run = neens.run(out["runId"])
    assert run["status"] == "completed"
    assert run["counts"]["error"] == 2
    assert "start a new run" in broken.stderr

    before = len(neens.invocations())
    # Re-driving the finished run runs nothing and reads the server's verdict, which (with no
    # threshold in this gate) the two errors do not fail.
    again = neens.again(out["runId"])
    assert again.code == 0, again.stderr
    assert len(neens.invocations()) == before
    assert "nothing to run" in again.stderr


# --- interrupted ------------------------------------------------------------------------------

# Takes a second to stop on SIGTERM, so while one is being stopped the other's worker is free:
# it must find nothing to start.
SLOW_AGENT = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1), sys.exit(143)))
with open(os.environ["STARTED_LOG"], "a", encoding="utf-8") as log:
    log.write(os.environ["NEENS_ITEM_INPUT"] + "\\n")
time.sleep(20)
"""


@sqlite_only("the subject is the CLI's signal handling")
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_an_interrupt_stops_the_running_command_and_starts_no_other(
    neens: Neens, tmp_path: Path, signal_name: str
) -> None:
    dataset = neens.golden()
    agent = tmp_path / "slow_agent.py"
    agent.write_text(SLOW_AGENT, encoding="utf-8")
    started = tmp_path / "started.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "neens_eval", "eval", "run", "--create", "--dataset", dataset,
         "--version-label", "v1", "--concurrency", "2", "--", sys.executable, str(agent)],
        env=neens.env(STARTED_LOG=str(started)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip

    def started_items() -> list[str]:
        return started.read_text(encoding="utf-8").splitlines() if started.exists() else []

    deadline = time.monotonic() + 60
    while len(started_items()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(started_items()) == 2, "the first two items' commands never started"

    interrupted = time.monotonic()
    process.send_signal(getattr(signal, signal_name))
    try:
        _, stderr = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        pytest.fail(f"still running 10 s after {signal_name}: {stderr}")

    assert process.returncode == 130, stderr
    assert time.monotonic() - interrupted < 8
    assert "neens: interrupted" in stderr
    time.sleep(0.5)
    assert len(started_items()) == 2  # the third item's command never started


# --- exit codes 2 and 3 -----------------------------------------------------------------------


@sqlite_only("refused before anything is written")
def test_usage_and_configuration_errors_exit_2_with_one_line_and_create_nothing(
    neens: Neens, tmp_path: Path
) -> None:
    dataset = neens.golden()
    not_golden = neens.golden(golden=False)
    create = ["eval", "run", "--create", "--dataset", dataset, "--version-label", "v1"]
    cases: list[tuple[list[str], dict[str, str], str]] = [
        ([*create, "--", *AGENT], {"NEENS_API_KEY": ""}, "NEENS_API_KEY is not set"),
        ([*create, "--", *AGENT], {"NEENS_API_KEY": "nk_live_wrong"}, "check NEENS_API_KEY"),
        (
            ["eval", "run", "--create", "--dataset", not_golden, "--version-label", "v1",
             "--", *AGENT],
            {},
            "has no golden version",
        ),
        (
            ["eval", "run", "--create", "--dataset", "ds_nope", "--version-label", "v1",
             "--", *AGENT],
            {},
            "404",
        ),
        ([*create, "--min-pass-rate", "1.5", "--", *AGENT], {}, "is not between 0 and 1"),
        ([*create, "--baseline", "yesterday", "--", *AGENT], {}, "is not a baseline"),
        ([*create, "--project-id", "prj_1", "--", *AGENT], {}, "--project-id is not supported"),
        ([*create], {}, "no agent command"),
        ([*create, "--", "no-such-agent-cmd"], {}, "was not found on PATH"),
        (["eval", "run", "--run-id", "ppr_1", "--dataset", dataset, "--", *AGENT], {},
         "--dataset is only for creating a run: with --run-id"),
        (["eval", "push", "--dataset", dataset, "--version-label", "v1"], {},
         "--agent-connection"),
        ([*create, "--gate-policy", str(tmp_path / "missing.json"), "--", *AGENT], {},
         "no such file"),
    ]  # fmt: skip
    for args, env, message in cases:
        result = neens.neens(*args, env=neens.env(**env))
        assert result.code == 2, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert result.stdout == ""
    refused = neens.neens(*create, "--", *AGENT, env=neens.env(NEENS_API_KEY="nk_live_wrong"))
    assert refused.stderr.count("\n") == 1  # one line
    assert neens.runs() == []
    assert neens.invocations() == []


def test_a_server_that_cannot_be_reached_exits_3(tmp_path: Path) -> None:
    neens = Neens(f"http://127.0.0.1:{free_port()}", "nk_live_anything", tmp_path)
    env = neens.env(NEENS_RETRY_WINDOW="1")

    result = neens.neens(
        "eval", "run", "--create", "--dataset", "ds_1", "--version-label", "v1", "--", *AGENT,
        env=env,
    )  # fmt: skip

    assert result.code == 3
    assert "could not reach Neens" in result.stderr


@sqlite_only("the subject is the CLI's wait")
def test_a_timeout_while_waiting_exits_3_and_says_no_trace_arrived(neens: Neens) -> None:
    dataset = neens.golden()

    result = neens.create(
        dataset, "v1", "--timeout", "1", agent={"AGENT_SILENT": lines(ORDER, SHOES, CANADA)}
    )

    assert result.code == 3, result.stderr
    out = result.json
    assert out["verdict"] == "no_verdict"
    assert out["exitCode"] == 3
    assert out["reasons"] == [
        "no verdict after 1 s (--timeout): the run is still awaiting_traces with 3 items pending"
    ]
    assert "No trace reached the run" in result.stderr


@sqlite_only("the subject is the CLI's wait")
def test_a_server_that_goes_away_while_waiting_exits_3(
    database_url: str, key: CreatedKey, tmp_path: Path
) -> None:
    with ExitStack() as server_running:
        server = server_running.enter_context(
            serve_in_thread(create_app(Settings(database_url=database_url, migrate_on_start=False)))
        )
        neens = Neens(server.url, key.key, tmp_path)
        dataset = neens.golden()
        command = [
            sys.executable, "-m", "neens_eval", "eval", "run", "--create", "--dataset", dataset,
            "--version-label", "v1", "--json", "--", *AGENT,
        ]  # fmt: skip
        process = subprocess.Popen(
            command,
            env=neens.env({"AGENT_SILENT": lines(ORDER, SHOES, CANADA)}, NEENS_RETRY_WINDOW="2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stderr is not None
        stderr = []
        for line in process.stderr:
            stderr.append(line)
            if "waiting for" in line:
                break
        # The server stops while the command waits for the verdict.
    stdout, rest = process.communicate(timeout=60)

    assert process.returncode == 3, "".join(stderr) + rest
    out = json.loads(stdout)
    assert out["verdict"] == "no_verdict"
    assert "could not reach Neens" in out["error"]
    assert "neens: error: could not reach Neens" in rest


# --- gate-as-code ----------------------------------------------------------------------------

EVERY_RULE = {
    "gate": {"max_regressions": 0},
    "rules": [
        {"cost": {"max_avg_usd": 0.05, "max_delta_pct": 20}, "severity": "warn"},
        {"latency": {"max_avg_ms": 3000, "max_delta_pct": 25}, "severity": "warn"},
        {"steps": {"max_avg": 8, "max_delta_pct": 150}, "severity": "block"},
        {"max_abs_failures": 0, "severity": "block"},
        {"min_avg_score": 0.8},
        {"metric": "Expected-output similarity", "min_avg": 0.8, "severity": "block"},
        {"metric": "toxicity_safety", "min_avg": 0.9, "severity": "warn"},
    ],
    "on_missing_baseline": "block",
}

# Twice the tokens, twice the latency and two more tool calls than the baseline's agent.
HEAVIER = {"AGENT_INPUT_TOKENS": "1000", "AGENT_LATENCY_MS": "1800", "AGENT_TOOLS": "3"}


@sqlite_only(
    "the CLI checks the policy; tests/api/test_preprod_compare.py compares on both databases"
)
def test_every_rule_type_is_checked_over_the_comparison_metrics_and_items(neens: Neens) -> None:
    dataset = neens.golden()
    baseline = neens.create(dataset, "v1")
    assert baseline.code == 0, baseline.stderr
    policy = neens.policy(EVERY_RULE)

    candidate = neens.create(
        dataset, "v2", "--baseline", f"run:{baseline.json['runId']}", "--gate-policy", policy,
        agent=HEAVIER,
    )  # fmt: skip

    # Only warn rules are breached: reported, and the gate passes.
    assert candidate.code == 0, candidate.stderr
    rules = candidate.rules()
    # gpt-4o: 500 x $2.50/M + 50 x $10/M = 0.00175 for the baseline; 0.003 for the candidate.
    assert rules["cost.max_avg_usd"]["status"] == "pass"
    assert rules["cost.max_avg_usd"]["observed"] == pytest.approx(0.003)
    assert rules["cost.max_delta_pct"] | {"observed": None} == rules["cost.max_delta_pct"] | {
        "status": "fail", "severity": "warn", "blocking": False, "threshold": 20, "observed": None
    }  # fmt: skip
    assert rules["cost.max_delta_pct"]["observed"] == pytest.approx(
        (0.003 - 0.00175) / 0.00175 * 100
    )
    assert rules["latency.max_avg_ms"]["status"] == "pass"
    assert rules["latency.max_avg_ms"]["observed"] == 1800
    assert rules["latency.max_delta_pct"]["status"] == "fail"
    assert rules["latency.max_delta_pct"]["observed"] == pytest.approx(100)
    assert rules["steps.max_avg"]["observed"] == 4
    assert rules["steps.max_delta_pct"]["status"] == "pass"
    assert rules["steps.max_delta_pct"]["observed"] == pytest.approx(100)
    assert rules["max_abs_failures"]["status"] == "pass"
    assert (
        rules["min_avg_score"] | {"status": "pass", "observed": 1.0, "severity": "block"}
        == (rules["min_avg_score"])
    )
    assert rules["metric:Expected-output similarity"]["status"] == "pass"
    toxicity = rules["metric:toxicity_safety"]
    assert (toxicity["status"], toxicity["blocking"]) == ("missing", False)
    assert toxicity["reason"].startswith(
        'no judge of this run produces metric "toxicity_safety" (the run\'s metrics: '
        '"Expected-output similarity", "Primary Score")'
    )
    # Warn rules that failed are explained, not left next to a bare "Gate passed."
    assert (
        "Gate passed, with 3 warnings (a rule of severity warn that fails or is missing is "
        "reported and does not block):" in candidate.stderr
    )
    assert "Gate passed.\n" not in candidate.stderr
    # The gate block went to the server at create.
    assert neens.run(candidate.json["runId"])["gate"] == {"max_regressions": 0}
    # The summary names each rule with its observed value, threshold, status and severity.
    row = next(line for line in candidate.stderr.splitlines() if "cost.max_delta_pct" in line)
    assert row.split()[:5] == ["FAIL", "warn", "cost.max_delta_pct", "+71.4%", "+20.0%"]


@sqlite_only(
    "the CLI checks the policy; tests/api/test_preprod_compare.py compares on both databases"
)
def test_a_convenience_flag_injects_a_block_rule_that_replaces_the_files_rule(
    neens: Neens,
) -> None:
    dataset = neens.golden()
    baseline = neens.create(dataset, "v1")
    policy = neens.policy(EVERY_RULE)
    candidate = neens.create(
        dataset, "v2", "--baseline", f"run:{baseline.json['runId']}", "--gate-policy", policy,
        agent=HEAVIER,
    )  # fmt: skip
    run_id = candidate.json["runId"]

    cost = neens.again(run_id, "--gate-policy", policy, "--max-cost-delta-pct", "50")
    latency = neens.again(run_id, "--max-latency-delta-pct", "150")

    assert cost.code == 1, cost.stderr
    rules = cost.rules()
    assert rules["cost.max_delta_pct"]["severity"] == "block"
    assert rules["cost.max_delta_pct"]["threshold"] == 50
    assert rules["cost.max_delta_pct"]["origin"] == "--max-cost-delta-pct"
    assert "cost.max_avg_usd" not in rules  # the flag replaced the file's whole cost rule
    assert "--max-cost-delta-pct replaces rules[0] (cost)" in cost.stderr
    assert (
        "rule cost.max_delta_pct: cost change vs baseline +71.4% is above the maximum +50.0%"
        in (cost.json["reasons"])
    )
    assert latency.code == 0, latency.stderr
    assert latency.rules()["latency.max_delta_pct"]["status"] == "pass"


@sqlite_only(
    "the CLI checks the policy; tests/api/test_preprod_compare.py compares on both databases"
)
def test_failures_and_scores_rules_block_or_warn_as_their_severity_says(neens: Neens) -> None:
    dataset = neens.golden()
    run = neens.create(dataset, "v1", agent={"AGENT_WRONG": CANADA})
    assert run.code == 0, run.stderr  # no server threshold: the server gate passes
    run_id = run.json["runId"]

    too_many = neens.again(run_id, "--max-abs-failures", "0")
    one_allowed = neens.again(run_id, "--max-abs-failures", "1")
    low_score = neens.again(run_id, "--min-avg-score", "0.95")
    metric_block = neens.again(run_id, "--gate-policy", neens.policy(
        {"rules": [{"metric": "Expected-output similarity", "min_avg": 0.95}]}
    ))  # fmt: skip
    metric_warn = neens.again(run_id, "--gate-policy", neens.policy(
        {"rules": [{"metric": "Expected-output similarity", "min_avg": 0.95, "severity": "warn"}]}
    ))  # fmt: skip

    assert too_many.code == 1
    assert too_many.rules()["max_abs_failures"]["observed"] == 1
    assert one_allowed.code == 0
    assert low_score.code == 1
    score = low_score.rules()["min_avg_score"]
    assert score["status"] == "fail"
    assert 0 < score["observed"] < 0.95
    assert metric_block.code == 1
    assert metric_block.rules()["metric:Expected-output similarity"]["blocking"] is True
    assert metric_warn.code == 0
    warned = metric_warn.rules()["metric:Expected-output similarity"]
    assert (warned["status"], warned["severity"], warned["blocking"]) == ("fail", "warn", False)


@sqlite_only(
    "the CLI checks the policy; tests/api/test_preprod_compare.py compares on both databases"
)
def test_a_metric_rule_reads_the_judges_given_with_judge(neens: Neens) -> None:
    dataset = neens.golden()
    with neens.admin_api() as api:
        judge = api.post(
            "/judges",
            json={"name": "mentions-days", "type": "managed", "check": "regex",
                  "config": {"pattern": "days"}},
        ).json()  # fmt: skip
    policy = neens.policy({"rules": [{"metric": "mentions-days", "min_avg": 0.5}]})

    result = neens.create(dataset, "v1", "--judge", judge["id"], "--gate-policy", policy)

    assert neens.run(result.json["runId"])["judgeDeploymentIds"] == [judge["id"]]
    rule = result.rules()["metric:mentions-days"]
    assert rule["observed"] == pytest.approx(2 / 3)  # two of the three answers mention days
    assert rule["status"] == "pass"


@sqlite_only(
    "the CLI checks the policy; tests/api/test_preprod_compare.py compares on both databases"
)
def test_a_block_metric_rule_no_judge_of_the_run_produces_fails_the_gate(neens: Neens) -> None:
    dataset = neens.golden()
    policy = neens.policy({"rules": [{"metric": "faithfulness", "min_avg": 0.8}]})

    result = neens.create(dataset, "v1", "--gate-policy", policy)

    assert result.code == 1, result.stderr
    rule = result.rules()["metric:faithfulness"]
    assert (rule["status"], rule["severity"], rule["blocking"]) == ("missing", "block", True)
    assert result.json["reasons"] == [
        'rule metric:faithfulness: no judge of this run produces metric "faithfulness" (the '
        'run\'s metrics: "Expected-output similarity", "Primary Score"); fix the name in the '
        "policy, or create the run with that judge (--judge)"
    ]


@sqlite_only(
    "the CLI checks the policy; tests/api/test_preprod_compare.py compares on both databases"
)
def test_a_cost_rule_without_priced_sessions_is_skipped_never_passed(neens: Neens) -> None:
    dataset = neens.golden()
    policy = neens.policy(
        {"gate": {"cost": {"max_avg_usd": 0.01}}, "rules": [{"cost": {"max_avg_usd": 0.01}}]}
    )

    result = neens.create(
        dataset, "v1", "--gate-policy", policy, agent={"AGENT_MODEL": "in-house-llm-7b"}
    )

    assert result.code == 0, result.stderr
    rule = result.rules()["cost.max_avg_usd"]
    assert (rule["status"], rule["observed"], rule["blocking"]) == ("skipped", None, False)
    assert rule["reason"] == "candidate cost unknown: no priced session (0 of 3 priced)"
    assert result.json["gate"]["costRules"][0]["status"] == "skipped"


@sqlite_only(
    "the CLI checks the policy; tests/api/test_preprod_compare.py compares on both databases"
)
def test_on_missing_baseline_warns_by_default_and_blocks_or_passes_as_declared(
    neens: Neens,
) -> None:
    dataset = neens.golden()

    def policy(mode: str | None) -> str:
        document: dict[str, Any] = {
            "gate": {"max_regressions": 0},
            "rules": [{"latency": {"max_delta_pct": 25}}, {"cost": {"max_avg_usd": 1}}],
        }
        if mode is not None:
            document["on_missing_baseline"] = mode
        return neens.policy(document, f"gate-{mode}.json")

    # No production traffic in the window: the run has no baseline cohort.
    default = neens.create(dataset, "v1", "--baseline", "prod:7d", "--gate-policy", policy(None))
    run_id = default.json["runId"]
    warn = neens.again(run_id, "--gate-policy", policy("warn"))
    block = neens.again(run_id, "--gate-policy", policy("block"))
    passed = neens.again(run_id, "--gate-policy", policy("pass"))

    assert default.code == 0, default.stderr
    assert warn.code == 0
    for result in (default, warn):
        rules = result.rules()
        for name in ("latency.max_delta_pct", "gate.max_regressions"):
            assert (rules[name]["status"], rules[name]["severity"]) == ("fail", "warn")
            assert "no baseline cohort" in rules[name]["reason"]
        assert rules["cost.max_avg_usd"]["status"] == "pass"  # absolute rules always evaluate
    assert block.code == 1
    rules = block.rules()
    assert rules["latency.max_delta_pct"]["blocking"] is True
    assert rules["gate.max_regressions"]["blocking"] is True
    assert passed.code == 0
    rules = passed.rules()
    assert rules["latency.max_delta_pct"]["status"] == "skipped"
    assert rules["gate.max_regressions"]["status"] == "skipped"
    assert rules["cost.max_avg_usd"]["status"] == "pass"


YAML_POLICY = """\
# The same policy as its JSON twin, with comments.
gate:
  max_regressions: 0
rules:
  - cost: {max_avg_usd: 0.05, max_delta_pct: 20}
    severity: warn
  - steps:
      max_avg: 1          # the agent takes two steps: breached
  - metric: Expected-output similarity
    min_avg: 0.8
on_missing_baseline: pass
"""


@sqlite_only("the subject is reading the policy file")
def test_a_yaml_policy_from_neens_gate_policy_means_the_same_as_its_json_twin(
    neens: Neens,
) -> None:
    dataset = neens.golden()
    as_json = neens.policy(yaml.safe_load(YAML_POLICY), "gate.json")
    as_yaml = neens.policy(YAML_POLICY, "gate.yaml")
    from_json = neens.create(dataset, "v1", "--gate-policy", as_json)

    from_yaml = neens.neens(
        "eval", "run", "--run-id", from_json.json["runId"], "--json", "--", *AGENT,
        env=neens.env(NEENS_GATE_POLICY=as_yaml),
    )  # fmt: skip

    assert from_json.code == from_yaml.code == 1
    assert from_yaml.json["rules"] == from_json.json["rules"]
    assert from_yaml.json["policy"] == as_yaml
    assert from_yaml.rules()["steps.max_avg"]["blocking"] is True


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (
            {"rules": [{"min_avg_score": 0.8}, {"cost": {"max_avg_usd": 1}, "latency": {}}]},
            "rules[1]: a rule has exactly one dimension key",
        ),
        ({"rules": [{"max_cost": 1}]}, 'rules[0]: unknown key "max_cost"'),
        ({"rules": [{"min_avg_score": 0.8, "severity": "fatal"}]}, 'rules[0]: "severity"'),
        ({"on_missing_baseline": "ignore"}, '"on_missing_baseline" must be'),
        ('{"rules": [', "not valid JSON"),
    ],
)
@sqlite_only("refused before anything is written")
def test_a_bad_policy_is_a_usage_error_naming_the_rule_and_creates_no_run(
    neens: Neens, policy: object, message: str
) -> None:
    dataset = neens.golden()

    result = neens.create(dataset, "v1", "--gate-policy", neens.policy(policy))

    assert result.code == 2
    assert message in result.stderr
    assert result.stdout == ""
    assert neens.runs() == []


# --- push mode ---------------------------------------------------------------------------------


def test_push_creates_a_run_neens_drives_and_exits_with_its_gate(neens: Neens) -> None:
    dataset = neens.golden()
    answers = dict(ANSWERS)
    with serve(*agent_suite(answers)) as agents, neens.admin_api() as api:
        connection = api.post(
            "/agent-connections",
            json={"name": "support", "url": agents.url("/neens"), "requestFormat": "neens"},
        ).json()["id"]
        push = ["eval", "push", "--dataset", dataset, "--agent-connection", connection,
                "--min-pass-rate", "0.9", "--max-regressions", "0", "--json"]  # fmt: skip

        good = neens.neens(*push, "--version-label", "v1")
        answers[ORDER] = "No idea, sorry."
        bad = neens.neens(*push, "--version-label", "v2", "--min-avg-score", "0.95")

    assert good.code == 0, good.stderr
    assert good.json["mode"] == "push"
    assert good.json["verdict"] == "passed"
    assert len(agents.calls) == 6
    assert bad.code == 1, bad.stderr
    reasons = bad.json["reasons"]
    assert any(reason.startswith("server gate: pass rate") for reason in reasons)
    assert any(reason.startswith("rule min_avg_score:") for reason in reasons)
    assert neens.run(bad.json["runId"])["agentConnectionId"] == connection


# --- docs/ci.md, as written -------------------------------------------------------------------


def _ci_blocks() -> list[Any]:
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def _as_in_ci(script: str, dataset: str) -> str:
    return script.replace("support-golden", dataset).replace("python -m myagent", " ".join(AGENT))


@sqlite_only("the subject is the docs' CI step; the push it makes runs on both databases above")
def test_the_github_actions_step_of_docs_ci_works_as_written(neens: Neens) -> None:
    dataset = neens.golden()
    steps = _ci_blocks()[0]["jobs"]["preprod-eval"]["steps"]
    step = next(s for s in steps if s.get("name") == "Pre-prod eval gate")
    secrets = {"NEENS_BASE_URL": neens.url, "NEENS_API_KEY": neens.key}
    env = {
        name: re.sub(r"\$\{\{ secrets\.(\w+) \}\}", lambda m: secrets[m[1]], value)
        for name, value in step["env"].items()
    }
    script = _as_in_ci(step["run"], dataset).replace("${{ github.sha }}", "0123abc")
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"

    done = subprocess.run(
        ["bash", "-e", "-c", script],
        env={**os.environ, **env, "PATH": path, "AGENT_LOG": str(neens.log)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Gate passed" in done.stdout
    run = neens.runs()[0]
    assert run["versionLabel"] == "0123abc"
    assert run["gate"] == {"max_regressions": 0, "min_pass_rate": 0.9}
    assert run["baseline"] == {"kind": "prod_window", "range": "7d"}


@sqlite_only("the subject is the docs' CI job; the push it makes runs on both databases above")
def test_the_gitlab_job_of_docs_ci_works_as_written(neens: Neens) -> None:
    dataset = neens.golden()
    job = _ci_blocks()[1]["preprod-eval"]
    variables = {"NEENS_BASE_URL": neens.url, "NEENS_API_KEY": neens.key, "CI_COMMIT_SHA": "c0ffee"}
    for name, value in job["variables"].items():  # GitLab expands variables in variables
        variables[name] = value.replace("$NEENS_BASE_URL", neens.url)
    script = [line for line in job["script"] if not line.startswith("pip install")]
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"

    done = subprocess.run(
        ["bash", "-e", "-c", _as_in_ci("\n".join(script), dataset)],
        env={**os.environ, **variables, "PATH": path, "AGENT_LOG": str(neens.log)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    assert neens.runs()[0]["versionLabel"] == "c0ffee"
