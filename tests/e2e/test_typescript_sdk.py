"""`npx neens-eval push` from the packed npm tarball against a live server, beside the Python
`neens eval push`: the same dataset, connection and flags give the same exit code and the same
`--json` document (but for the run's own id, address and label).

The tarball is what `npm install --save-dev @neens/eval` installs: `npm pack` in sdk/typescript,
installed into an empty folder (sdk/python/tests/typescript_package.py). Skipped without Node 20
and npm, unless NEENS_REQUIRE_NODE=1 (as CI sets).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from neens.demo.endpoints import agent_suite, serve
from neens.store.keys import CreatedKey
from tests.support.agent_cmd import ANSWERS
from tests.support.live import LiveServer

pytestmark = pytest.mark.e2e

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
    with httpx.Client(base_url=live_server.url, headers=headers) as api:
        dataset = api.post("/datasets", json={"name": f"golden-{time.time_ns()}"}).json()["id"]
        items = [{"input": prompt, "expected_output": answer} for prompt, answer in ANSWERS.items()]
        created = api.post(f"/datasets/{dataset}/versions", json={"items": items, "golden": True})
        assert created.status_code == 201, created.text
    answers = dict(ANSWERS)
    admin = {"Authorization": f"Bearer {admin_key.key}"}
    with (
        serve(*agent_suite(answers)) as agents,
        httpx.Client(base_url=live_server.url, headers=admin) as api,
    ):
        connection = api.post(
            "/agent-connections",
            json={"name": "support", "url": agents.url("/neens"), "requestFormat": "neens"},
        ).json()["id"]
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
