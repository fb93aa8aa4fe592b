"""`neens sweep preview|start|get|cancel` against a live server, as a CI job runs them.

The arms are simulated agent endpoints (`neens.demo.endpoints`) behind agent connections an admin
key configured; the sweeps are previewed, started, read and cancelled by the real `neens` command
with an ingest key, as docs/cli.md says a CI job does. Each test reads as one sentence of the
exit-code contract (docs/cli.md#exit-codes): a sweep is informational (0), `--require-all-arms`
makes an arm that did not pass fail the command (1), a refused request is a usage error (2), and
evidence that cannot be trusted or does not exist exits 4 with its reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from neens.demo.endpoints import PRICED_MODEL, UNPRICED_MODEL, refused_url, serve, steady
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.support.live import LiveServer

pytestmark = pytest.mark.e2e

ITEMS = [{"input": f"question {n}", "expected_output": f"answer {n}"} for n in range(3)]
RIGHT = {item["input"]: item["expected_output"] for item in ITEMS}
KEYS_OF_A_SWEEP = {
    "id", "name", "versionLabel", "datasetId", "datasetVersionId", "passK", "budgetUsd",
    "spentUsd", "unpricedCalls", "judgeDeploymentIds", "gate", "fingerprint", "status",
    "voidReason", "divergedArms", "reason", "createdAt", "completedAt", "arms",
}  # fmt: skip
KEYS_OF_AN_ARM = {
    "id", "label", "agentConnectionId", "model", "status", "progress", "greenRuns", "passed",
    "error", "runIds",
}  # fmt: skip


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

    def arm(self, label: str) -> dict[str, Any]:
        found: dict[str, Any] = next(a for a in self.json["arms"] if a["label"] == label)
        return found


@dataclass
class Neens:
    """The server, an ingest key for the `neens` command, an admin key for configuration."""

    url: str
    key: str
    admin_key: str
    database_url: str

    def admin(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.admin_key}"}
        return httpx.Client(timeout=30, base_url=self.url, headers=headers)

    def golden(self) -> str:
        """A dataset whose one version, golden, holds `ITEMS`."""
        with self.admin() as api:
            r = api.post("/datasets", json={"name": f"golden-{uuid.uuid4().hex[:8]}"})
            assert r.status_code == 201, r.text
            dataset_id = str(r.json()["id"])
            r = api.post(f"/datasets/{dataset_id}/versions", json={"items": ITEMS, "golden": True})
            assert r.status_code == 201, r.text
        return dataset_id

    def connection(self, url: str, model: str | None = None) -> str:
        body: dict[str, Any] = {"name": f"arm-{uuid.uuid4().hex[:8]}", "url": url}
        body["requestFormat"] = "neens"
        if model is not None:
            body["model"] = model
        with self.admin() as api:
            r = api.post("/agent-connections", json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def sweeps(self) -> list[dict[str, Any]]:
        with self.admin() as api:
            r = api.get("/model-sweeps")
        assert r.status_code == 200, r.text
        listed: list[dict[str, Any]] = r.json()["sweeps"]
        return listed

    def neens(self, *args: str, env: dict[str, str] | None = None) -> Result:
        environment = {
            **os.environ,
            "NEENS_BASE_URL": self.url,
            "NEENS_API_KEY": self.key,
            **(env or {}),
        }
        done = subprocess.run(
            [sys.executable, "-m", "neens_eval", *args],
            capture_output=True,
            text=True,
            timeout=180,
            env=environment,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def start(self, dataset: str, *arms: str, flags: tuple[str, ...] = ()) -> Result:
        """`neens sweep start` as the spec's CI example writes it, with `--pass-k 2`."""
        arm_flags = [part for arm in arms for part in ("--arm", arm)]
        return self.neens(
            "sweep", "start", "--name", "monthly model sweep", "--dataset-id", dataset,
            "--version-label", "3f2c9e1", *arm_flags, "--pass-k", "2", *flags,
        )  # fmt: skip

    def alter_judges(self, run_id: str) -> None:
        """Change a finished child run's judge set behind the sweep's back."""

        async def alter() -> None:
            db = Database(self.database_url)
            try:
                async with db.write() as s:
                    await s.execute(
                        text("UPDATE preprod_runs SET judge_ids = :j WHERE id = :id"),
                        {"j": '["jdg_other"]', "id": run_id},
                    )
            finally:
                await db.dispose()

        asyncio.run(alter())


@pytest.fixture
def neens(
    live_server: LiveServer, key: CreatedKey, admin_key: CreatedKey, database_url: str
) -> Neens:
    return Neens(live_server.url, key.key, admin_key.key, database_url)


# --- preview ------------------------------------------------------------------------------------


def test_preview_json_prints_per_arm_calls_and_cost_and_creates_nothing(neens: Neens) -> None:
    dataset = neens.golden()
    with serve(steady(RIGHT, path="/a"), steady(RIGHT, path="/b")) as agents:
        priced = neens.connection(agents.url("/a"), model=PRICED_MODEL)
        unpriced = neens.connection(agents.url("/b"), model=UNPRICED_MODEL)

        result = neens.neens(
            "sweep", "preview", "--dataset-id", dataset, "--arm", f"mini={priced}",
            "--arm", f"self-host={unpriced}", "--pass-k", "3", "--json",
        )  # fmt: skip
        budgeted = neens.neens(
            "sweep", "preview", "--dataset-id", dataset, "--arm", f"mini={priced}",
            "--arm", f"self-host={unpriced}", "--budget-usd", "0.000001",
        )  # fmt: skip

    assert result.code == 0, result.stderr
    preview = result.json
    assert preview["datasetId"] == dataset
    assert preview["datasetVersionId"].startswith("dsv_")
    assert preview["itemCount"] == len(ITEMS)
    assert preview["passK"] == 3
    assert [(a["label"], a["agentConnectionId"], a["calls"]) for a in preview["arms"]] == [
        ("mini", priced, 3 * len(ITEMS)),
        ("self-host", unpriced, 3 * len(ITEMS)),
    ]
    mini, self_host = preview["arms"]
    assert mini["model"] == PRICED_MODEL and mini["estimatedUsd"] > 0
    assert self_host["estimatedUsd"] is None and self_host["basis"] == "unpriced"
    assert preview["totalCalls"] == 2 * 3 * len(ITEMS)
    assert preview["estimatedUsd"] == pytest.approx(mini["estimatedUsd"])
    assert preview["partial"] is True
    assert preview["budgetUsd"] is None and preview["wouldRefuse"] is None
    # The table for a person goes to stderr under --json; an unpriced arm is never $0.
    assert "unpriced" in result.stderr
    assert "partial: 1 of 2 arms unpriced" in result.stderr
    # Over the budget: reported, exit 0, and still nothing created.
    assert budgeted.code == 0, budgeted.stderr
    assert "starting it would be REFUSED" in budgeted.stdout
    assert neens.sweeps() == []
    assert agents.calls == []


# --- start --wait -------------------------------------------------------------------------------


def test_start_wait_follows_two_steady_arms_to_completed_and_exits_0(neens: Neens) -> None:
    dataset = neens.golden()
    with serve(steady(RIGHT, path="/a"), steady(RIGHT, path="/b")) as agents:
        sonnet = neens.connection(agents.url("/a"), model="claude-sonnet-4-5")
        mini = neens.connection(agents.url("/b"), model=PRICED_MODEL)

        result = neens.start(
            dataset, f"sonnet={sonnet}", f"mini={mini}",
            flags=("--min-pass-rate", "0.9", "--wait", "--json", "--require-all-arms"),
        )  # fmt: skip

    assert result.code == 0, result.stderr
    sweep = result.json
    assert set(sweep) >= KEYS_OF_A_SWEEP
    assert sweep["id"].startswith("msw-")
    assert sweep["status"] == "completed"
    assert sweep["name"] == "monthly model sweep" and sweep["versionLabel"] == "3f2c9e1"
    assert sweep["passK"] == 2 and sweep["gate"] == {"min_pass_rate": 0.9}
    for label, connection in (("sonnet", sonnet), ("mini", mini)):
        arm = result.arm(label)
        assert set(arm) >= KEYS_OF_AN_ARM
        assert arm["agentConnectionId"] == connection
        assert (arm["status"], arm["passed"], arm["greenRuns"]) == ("completed", True, 2)
        assert arm["progress"] == {
            "runsFinished": 2, "runs": 2, "itemsDone": 2 * len(ITEMS),
            "itemsTotal": 2 * len(ITEMS),
        }  # fmt: skip
    assert len(agents.calls) == 2 * 2 * len(ITEMS)
    # Each arm's own state was shown on stderr (a CI log: appended lines), then the table.
    err = result.stderr
    assert f"neens: started sweep {sweep['id']}" in err
    assert "neens:   sonnet: " in err and "neens:   mini: " in err
    assert "neens:   sonnet: completed, runs 2/2, items 6/6, 2 green" in err
    assert "every arm passed pass^k (--require-all-arms)" in err
    assert f"Model sweep {sweep['id']}" in err
    assert "PASSED" in err
    # `get` reads the same sweep back.
    again = neens.neens("sweep", "get", sweep["id"], "--json")
    assert again.code == 0, again.stderr
    assert again.json["id"] == sweep["id"] and again.json["status"] == "completed"


def test_a_dead_arm_gives_completed_with_failures_which_exits_0_unless_all_arms_are_required(
    neens: Neens,
) -> None:
    dataset = neens.golden()
    with serve(steady(RIGHT, path="/a")) as agents:
        alive = neens.connection(agents.url("/a"), model="claude-sonnet-4-5")
        dead = neens.connection(refused_url("/dead"), model=PRICED_MODEL)

        required = neens.start(
            dataset, f"sonnet={alive}", f"mini={dead}",
            flags=("--wait", "--json", "--require-all-arms"),
        )  # fmt: skip

    assert required.code == 1, required.stderr
    sweep = required.json
    assert sweep["status"] == "completed_with_failures"
    assert required.arm("sonnet")["passed"] is True
    dead_arm = required.arm("mini")
    assert dead_arm["status"] == "failed" and dead_arm["error"]
    assert "--require-all-arms: 1 of 2 arms did not pass pass^k" in required.stderr
    assert "mini: failed: " in required.stderr
    # Without --require-all-arms the same sweep is informational: exit 0, the failure shown.
    informational = neens.neens("sweep", "get", sweep["id"])
    assert informational.code == 0, informational.stderr
    assert "completed_with_failures" in informational.stdout
    assert "Arm errors:" in informational.stdout
    assert "mini: " in informational.stdout


# --- cancel -------------------------------------------------------------------------------------


def test_cancel_stops_a_running_sweep_exits_0_and_reading_it_afterwards_exits_4(
    neens: Neens,
) -> None:
    dataset = neens.golden()
    slow = 20.0  # far longer than starting `neens sweep cancel` on a loaded machine takes
    arms = (steady(RIGHT, path="/a", latency_s=slow), steady(RIGHT, path="/b", latency_s=slow))
    with serve(*arms) as agents:
        first = neens.connection(agents.url("/a"))
        second = neens.connection(agents.url("/b"))

        started = neens.start(dataset, f"a={first}", f"b={second}", flags=("--json",))
        assert started.code == 0, started.stderr
        sweep_id = started.json["id"]
        assert started.json["status"] in ("pending", "running")
        assert f"neens sweep get {sweep_id} --wait" in started.stderr

        cancelled = neens.neens("sweep", "cancel", sweep_id, "--json")
        read = neens.neens("sweep", "get", sweep_id)

    assert cancelled.code == 0, cancelled.stderr
    assert cancelled.json["status"] == "cancelled"
    assert all(arm["passed"] is None for arm in cancelled.json["arms"])
    assert f"neens: sweep {sweep_id} is cancelled: cancelled by request" in cancelled.stderr
    # A cancelled sweep's evidence does not exist: reading it exits 4 with the reason.
    assert read.code == 4, read.stderr
    assert "was cancelled: cancelled by request" in read.stderr
    assert "no verdict" in read.stdout  # no arm borrows a verdict it never reached


# --- void ---------------------------------------------------------------------------------------


def test_a_void_sweep_exits_4_with_its_reason_even_with_json(neens: Neens) -> None:
    dataset = neens.golden()
    with serve(steady(RIGHT, path="/a"), steady(RIGHT, path="/b")) as agents:
        sonnet = neens.connection(agents.url("/a"))
        mini = neens.connection(agents.url("/b"))
        done = neens.start(dataset, f"sonnet={sonnet}", f"mini={mini}", flags=("--wait", "--json"))
    assert done.code == 0, done.stderr
    assert done.json["status"] == "completed"
    altered = done.arm("mini")["runIds"][1]

    neens.alter_judges(altered)
    result = neens.neens("sweep", "get", done.json["id"], "--json")
    table = neens.neens("sweep", "get", done.json["id"], "--wait")

    assert result.code == 4, result.stderr
    assert result.json["status"] == "void"
    assert result.json["divergedArms"] == ["mini"]
    reason = result.json["voidReason"]
    assert altered in reason
    assert f"neens: sweep {done.json['id']} is VOID: {reason}" in result.stderr
    assert "diverged arms: mini" in result.stderr
    # A void sweep always exits 4, with --wait too, and its table draws no comparison.
    assert table.code == 4, table.stderr
    assert f"VOID: {reason}" in table.stdout
    assert "pass^k" not in table.stdout and "PASSED" not in table.stdout


# --- refused ------------------------------------------------------------------------------------


def test_refused_sweeps_exit_2_naming_the_flag_and_create_nothing(neens: Neens) -> None:
    dataset = neens.golden()
    with serve(steady(RIGHT, path="/a"), steady(RIGHT, path="/b")) as agents:
        first = neens.connection(agents.url("/a"))
        second = neens.connection(agents.url("/b"))

        malformed = neens.start(dataset, f"sonnet={first}", "mini", flags=("--wait",))
        same_label = neens.start(dataset, f"a={first}", f"a={second}", flags=("--wait",))
        one_arm = neens.start(dataset, f"a={first}", flags=("--wait",))
        no_label = neens.neens("sweep", "start", "--dataset-id", dataset, "--arm", f"a={first}",
                               "--arm", f"b={second}")  # fmt: skip
        started = time.monotonic()
        unknown = neens.neens("sweep", "get", "msw-does-not-exist")

    assert malformed.code == 2
    assert "argument --arm: 'mini' is not LABEL=CONNECTION_ID" in malformed.stderr
    assert same_label.code == 2, same_label.stderr
    assert f"neens: error: --arm 'a={second}' (arm 2): " in same_label.stderr
    assert "[HTTP 422" in same_label.stderr
    assert one_arm.code == 2, one_arm.stderr
    assert "neens: error: --arm: " in one_arm.stderr
    assert no_label.code == 2
    assert "--version-label is required" in no_label.stderr
    assert unknown.code == 2, unknown.stderr
    assert "[HTTP 404" in unknown.stderr
    assert time.monotonic() - started < 30  # a 404 is not retried
    assert neens.sweeps() == []
    assert agents.calls == []


def test_a_server_that_cannot_be_reached_exits_3(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "NEENS_BASE_URL": refused_url("").rstrip("/"),
        "NEENS_API_KEY": "nk_live_x",
        "NEENS_RETRY_WINDOW": "0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "neens_eval", "sweep", "get", "msw-1", "--json"],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "could not reach Neens" in done.stderr
    assert done.stdout == ""
