"""`neens eval push` while the Neens server process is killed and started again, as a deploy or a
crash does: the CI gate rides out a restart within its retry window, and a server gone for
longer than the window exits 3 with the last counts it read.

The server is a real `neens serve` process; the job workers run in their own `neens worker`
process (`NEENS_WORKERS_IN_PROCESS=false`), so the agent calls go on while the API is down and
what is tested is the command line, not how quickly a worker resumes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from neens.store.db import Database
from neens.store.keys import CreatedKey, create_key
from tests.support.agent_cmd import ANSWERS
from tests.support.live import LiveServer, free_port, serve_in_thread
from tests.support.server_process import NEENS, ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.alone]


@contextmanager
def neens_worker(database_url: str, log: Path) -> Iterator[None]:
    with log.open("ab") as out:
        worker = subprocess.Popen(
            [*NEENS, "worker", "--database-url", database_url, "--log-level", "warning"],
            stdout=out,
            stderr=out,
        )
    try:
        yield
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


@contextmanager
def slow_agent(seconds: float) -> Iterator[LiveServer]:
    """An agent endpoint (Neens request format) that knows the golden answers but takes its
    time, so the run is still going when the server is killed."""

    async def answer(request: Request) -> Response:
        body = await request.json()
        await asyncio.sleep(seconds)
        return JSONResponse({"output": ANSWERS.get(body["input"], "I do not know.")})

    app = Starlette(routes=[Route("/neens", answer, methods=["POST"])])
    with serve_in_thread(app) as server:
        yield server


def _keys(database_url: str) -> tuple[CreatedKey, CreatedKey]:
    async def make() -> tuple[CreatedKey, CreatedKey]:
        db = Database(database_url)
        try:
            ingest = await create_key(db, company="Acme", project="Support agent", role="ingest")
            admin = await create_key(db, company="Acme", project="Support agent", role="admin")
            return ingest, admin
        finally:
            await db.dispose()

    return asyncio.run(make())


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(database_url, free_port(), tmp_path / "serve.log")
    process.start()
    with neens_worker(database_url, tmp_path / "worker.log"):
        try:
            yield process
        finally:
            process.stop()


def _setup(server: ServerProcess, agent: LiveServer) -> tuple[str, str, str]:
    """A golden dataset of the three prompts the agent knows, and a connection to the agent.
    Returns (ingest key, dataset name, connection id)."""
    ingest, admin = _keys(server.database_url)
    auth = {"Authorization": f"Bearer {admin.key}"}
    with httpx.Client(timeout=30, base_url=server.url, headers=auth) as api:
        dataset = api.post("/datasets", json={"name": "support-golden"}).json()
        items = [{"input": prompt, "expected_output": answer} for prompt, answer in ANSWERS.items()]
        r = api.post(f"/datasets/{dataset['id']}/versions", json={"items": items, "golden": True})
        assert r.status_code == 201, r.text
        r = api.post(
            "/agent-connections",
            json={"name": "support", "url": f"{agent.url}/neens", "requestFormat": "neens"},
        )
        assert r.status_code == 201, r.text
    return ingest.key, "support-golden", str(r.json()["id"])


def _push(server: ServerProcess, key: str, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*NEENS, "eval", "push", *args, "--json"],
        env={**os.environ, "NEENS_BASE_URL": server.url, "NEENS_API_KEY": key, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read_until(stream: IO[str], text: str, seen: list[str]) -> None:
    for line in stream:
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"{text!r} never printed: {''.join(seen)}")


def _finish(process: subprocess.Popen[str], seen: list[str]) -> tuple[dict[str, Any], str]:
    stdout, rest = process.communicate(timeout=180)
    stderr = "".join(seen) + rest
    assert stdout.count("\n") == 1, stderr
    return json.loads(stdout), stderr


def test_eval_push_rides_out_a_server_killed_and_restarted_mid_run_and_exits_by_the_gate(
    server: ServerProcess,
) -> None:
    with slow_agent(1.0) as agent:
        key, dataset, connection = _setup(server, agent)
        process = _push(
            server, key, "--dataset", dataset, "--version-label", "v1",
            "--agent-connection", connection, "--min-pass-rate", "0.9", "--timeout", "120",
        )  # fmt: skip
        assert process.stderr is not None
        seen: list[str] = []
        _read_until(process.stderr, "created push run", seen)
        server.kill()
        time.sleep(4)
        server.start()
        out, stderr = _finish(process, seen)

    assert process.returncode == 0, stderr
    assert (out["verdict"], out["status"]) == ("passed", "completed")
    assert out["counts"]["passed"] == 3
    assert "Neens does not answer GET /preprod-evals/" in stderr
    assert "retrying for up to" in stderr, stderr


def test_a_server_gone_for_longer_than_the_retry_window_exits_3_with_the_last_counts(
    server: ServerProcess,
) -> None:
    # The agent stays up throughout: the run's calls that were in flight when the server was
    # killed are made again once it is back, and they must reach the agent.
    with slow_agent(1.0) as agent:
        key, dataset, connection = _setup(server, agent)
        started = time.monotonic()
        process = _push(
            server, key, "--dataset", dataset, "--version-label", "v1",
            "--agent-connection", connection, "--retry-window", "3",
        )  # fmt: skip
        assert process.stderr is not None
        seen: list[str] = []
        _read_until(process.stderr, "created push run", seen)
        server.kill()
        out, stderr = _finish(process, seen)

        assert process.returncode == 3, stderr
        assert time.monotonic() - started < 60
        assert out["verdict"] == "no_verdict"
        assert "could not reach Neens" in out["error"]
        assert "(retries last 3 s, --retry-window changes it)" in out["error"]
        seen_last = out["lastSeen"]
        assert set(seen_last) == {"at", "status", "itemCount", "counts"}
        assert seen_last["itemCount"] == 3
        assert set(seen_last["counts"]) == {"pending", "captured", "scored", "error"}
        assert f"neens: last seen at {seen_last['at']}:" in stderr
        assert f"neens eval push --run-id {out['runId']}" in stderr

        # Once the server is back, the same run is followed by its id to the gate.
        server.start()
        again = subprocess.run(
            [*NEENS, "eval", "push", "--run-id", out["runId"], "--min-avg-score", "0.5", "--json"],
            env={**os.environ, "NEENS_BASE_URL": server.url, "NEENS_API_KEY": key},
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["verdict"] == "passed"
