"""`npx neens-eval push` from the packed npm tarball against a live server, beside the Python
`neens eval push`: the same dataset, connection and flags give the same exit code and the same
`--json` document (but for the run's own id, address and label). And the TypeScript jobs of
docs/ci.md, run as written.

The tarball is what `npm install --save-dev @neens/eval` installs: `npm pack` in sdk/typescript,
installed into an empty folder (sdk/python/tests/typescript_package.py). Skipped without Node 20
and npm, unless NEENS_REQUIRE_NODE=1 (as CI sets).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from neens.demo.endpoints import agent_suite, serve
from neens.store.keys import CreatedKey
from tests.support.agent_cmd import ANSWERS
from tests.support.ci_jobs import golden_dataset, support_connection
from tests.support.live import LiveServer
from tests.support.sqlite_only import sqlite_only
from tests.support.stand_in import Answer, StandInRequest, stand_in_server

pytestmark = [
    pytest.mark.e2e,
    sqlite_only(
        "the subject is the TypeScript CLI; test_cli_eval.py pushes the same runs on both databases"
    ),
]

SDK_TESTS = Path(__file__).resolve().parents[2] / "sdk" / "python" / "tests"


def _installed_bin(tmp_path: Path) -> Path:
    sys.path.insert(0, str(SDK_TESTS))
    try:
        from typescript_package import installed_bin
    finally:
        sys.path.remove(str(SDK_TESTS))
    project = tmp_path / "ci-job"
    project.mkdir()
    return installed_bin(project)


def _run(command: list[str], url: str, key: str) -> tuple[int, dict[str, Any], str]:
    env = {**os.environ, "NEENS_BASE_URL": url, "NEENS_API_KEY": key}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    lines = done.stdout.splitlines()
    assert len(lines) == 1, f"stdout is not one JSON line: {done.stdout!r}\n{done.stderr}"
    document: dict[str, Any] = json.loads(lines[0])
    return done.returncode, document, done.stderr


def _comparable(document: dict[str, Any]) -> dict[str, Any]:
    """The document without what differs between two runs by construction."""
    out = {k: v for k, v in document.items() if k not in ("runId", "url", "versionLabel")}
    out["lastSeen"] = {k: v for k, v in document["lastSeen"].items() if k != "at"}
    out["regressions"] = [{**row, "itemId": "-"} for row in document["regressions"]]
    return out


def test_the_packed_typescript_cli_pushes_a_run_and_gates_exactly_as_the_python_cli(
    live_server: LiveServer, key: CreatedKey, admin_key: CreatedKey, tmp_path: Path
) -> None:
    binary = _installed_bin(tmp_path)
    headers = {"Authorization": f"Bearer {key.key}"}
    with httpx.Client(timeout=30, base_url=live_server.url, headers=headers) as api:
        dataset = api.post("/datasets", json={"name": f"golden-{time.time_ns()}"}).json()["id"]
        items = [{"input": prompt, "expected_output": answer} for prompt, answer in ANSWERS.items()]
        created = api.post(f"/datasets/{dataset}/versions", json={"items": items, "golden": True})
        assert created.status_code == 201, created.text
    answers = dict(ANSWERS)
    admin = {"Authorization": f"Bearer {admin_key.key}"}
    with (
        serve(*agent_suite(answers)) as agents,
        httpx.Client(timeout=30, base_url=live_server.url, headers=admin) as api,
    ):
        connection = support_connection(api, agents.url("/neens"))
        flags = ["--dataset", dataset, "--agent-connection", connection,
                 "--min-pass-rate", "0.9", "--max-regressions", "0", "--json"]  # fmt: skip
        python = [sys.executable, "-m", "neens_eval", "eval", "push"]
        typescript = [str(binary), "push"]
        results = {}
        for label in ("good", "bad"):
            if label == "bad":  # the agent now answers the first prompt wrong
                answers[next(iter(ANSWERS))] = "No idea, sorry."
            for name, cli in (("python", python), ("typescript", typescript)):
                command = [*cli, *flags, "--version-label", label]
                results[(name, label)] = _run(command, live_server.url, key.key)

    for label, expected_code in (("good", 0), ("bad", 1)):
        py_code, py_doc, py_err = results[("python", label)]
        ts_code, ts_doc, ts_err = results[("typescript", label)]
        assert (py_code, ts_code) == (expected_code, expected_code), py_err + ts_err
        assert ts_doc["mode"] == "push"
        assert ts_doc["versionLabel"] == label
        assert ts_doc["url"] == f"{live_server.url}/preprod-evals/{ts_doc['runId']}"
        assert _comparable(ts_doc) == _comparable(py_doc)
    assert results[("typescript", "good")][1]["verdict"] == "passed"
    assert results[("typescript", "bad")][1]["verdict"] == "failed"


# --- docs/ci.md, as written, with the TypeScript SDK ---------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
AGENT = f"{sys.executable} {ROOT / 'tests' / 'support' / 'agent_cmd.py'}"


def _ci_blocks() -> list[Any]:
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def test_the_typescript_github_step_of_docs_ci_works_as_written(
    live_server: LiveServer, key: CreatedKey, tmp_path: Path
) -> None:
    binary = _installed_bin(tmp_path)
    project = binary.parents[2]  # node_modules/.bin/neens-eval: npx finds it from the project
    dataset = golden_dataset(live_server.url, key.key)
    job = next(block for block in _ci_blocks() if "setup-node" in json.dumps(block))
    steps = job["jobs"]["preprod-eval"]["steps"]
    assert any(step.get("run") == "npm ci" for step in steps)
    step = next(s for s in steps if s.get("name") == "Pre-prod eval gate")
    secrets = {"NEENS_BASE_URL": live_server.url, "NEENS_API_KEY": key.key}
    env = {
        name: re.sub(r"\$\{\{ secrets\.(\w+) \}\}", lambda m: secrets[m[1]], value)
        for name, value in step["env"].items()
    }
    script = (
        step["run"]
        .replace("support-golden", dataset)
        .replace("node dist/myagent.js", AGENT)
        .replace("${{ github.sha }}", "0123abc")
    )

    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=project,
        env={**os.environ, **env, "AGENT_LOG": str(tmp_path / "agent.log")},
        capture_output=True,
        text=True,
        timeout=180,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Gate passed" in done.stdout
    with httpx.Client(
        timeout=30, base_url=live_server.url, headers={"Authorization": f"Bearer {key.key}"}
    ) as api:
        run = api.get("/preprod-evals").json()["runs"][0]
    assert run["versionLabel"] == "0123abc"
    assert run["gate"] == {"max_regressions": 0, "min_pass_rate": 0.9}
    assert run["baseline"] == {"kind": "prod_window", "range": "7d"}
    assert len((tmp_path / "agent.log").read_text(encoding="utf-8").splitlines()) == len(ANSWERS)


@dataclass
class FakeGitLab:
    """The merge-request notes call of the GitLab REST API, on loopback."""

    url: str = ""
    notes: list[tuple[str, str, str]] = field(default_factory=list)


@contextmanager
def fake_gitlab() -> Iterator[FakeGitLab]:
    gitlab = FakeGitLab()

    def answer(request: StandInRequest) -> Answer:
        form = urllib.parse.parse_qs(request.body.decode())
        body = form.get("body", [""])[0]
        gitlab.notes.append((request.path, request.headers.get("PRIVATE-TOKEN") or "", body))
        return 201, {"id": len(gitlab.notes)}

    with stand_in_server(answer) as url:
        gitlab.url = f"{url}/api/v4"
        yield gitlab


def test_the_gitlab_merge_request_job_of_docs_ci_posts_the_summary_and_keeps_the_exit_code(
    live_server: LiveServer, key: CreatedKey, admin_key: CreatedKey, tmp_path: Path
) -> None:
    """The note goes to a loopback stand-in for GitLab's API (a real HTTP server)."""
    binary = _installed_bin(tmp_path)
    project = binary.parents[2]
    dataset = golden_dataset(live_server.url, key.key)
    job = next(block for block in _ci_blocks() if "preprod-eval-mr" in block)["preprod-eval-mr"]
    assert job["script"][0] == "npm ci"
    script = "\n".join(job["script"][1:]).replace("support-golden", dataset)
    answers = dict(ANSWERS)
    answers[next(iter(ANSWERS))] = "No idea, sorry."  # the gate fails: the job must too
    admin = {"Authorization": f"Bearer {admin_key.key}"}
    with (
        serve(*agent_suite(answers)) as agents,
        httpx.Client(timeout=30, base_url=live_server.url, headers=admin) as api,
        fake_gitlab() as gitlab,
    ):
        connection = support_connection(api, agents.url("/neens"))
        variables = {
            "NEENS_BASE_URL": live_server.url,
            "NEENS_API_KEY": key.key,
            "AGENT_CONNECTION_ID": connection,
            "CI_COMMIT_SHA": "c0ffee",
            "CI_API_V4_URL": gitlab.url,
            "CI_PROJECT_ID": "42",
            "CI_MERGE_REQUEST_IID": "5",
            "NEENS_GITLAB_TOKEN": "glpat-test",
        }
        done = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=project,
            env={**os.environ, **variables},
            capture_output=True,
            text=True,
            timeout=180,
        )

    assert done.returncode == 1, done.stdout + done.stderr
    summary = (project / "neens-summary.md").read_text(encoding="utf-8")
    assert summary.startswith("## Neens pre-prod gate: FAILED\n")
    assert "version `c0ffee`" in summary
    assert gitlab.notes == [("/api/v4/projects/42/merge_requests/5/notes", "glpat-test", summary)]
