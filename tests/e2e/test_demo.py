"""`neens demo` as a user runs it: the real command seeds the worked example and exits, then a
real `neens serve` on the data directory it left answers the story from the API.

The story (docs/demo.md): for the refund agent a cheap model clears the 90% bar at a fraction of
the cost, for the escalation agent it does not; the winner clears on the point estimate and not
on the lower bound; previous-gen carries 2 flaky items; the self-hosted arm is unpriced; the
second pre-prod run regressed; production traffic is there, with agent names.
"""

from __future__ import annotations

import html
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live import free_port

# One test process takes the whole module, so the demo (the `running` fixture) is run once, not
# once in every process that reaches one of its tests (`make test` runs --dist loadgroup).
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-demo")]

NEENS = [sys.executable, "-m", "neens_eval"]
MINI, MEDIUM, LARGE = "sim-frontier-mini", "sim-frontier-medium", "sim-frontier-large"


def demo(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEENS, "demo", *args], capture_output=True, text=True, timeout=timeout)


@dataclass
class Demo:
    """A `neens demo --json` process serving the example it seeded."""

    process: subprocess.Popen[str]
    manifest: dict[str, Any]
    log: Path
    took_s: float

    @property
    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """`neens demo --json` as a user starts it, once for the module: it prints its JSON line
    when ready and keeps serving; the tests read the story from its server."""
    root = tmp_path_factory.mktemp("demo")
    log = root / "demo.log"
    started = time.monotonic()
    with log.open("w") as err:
        process = subprocess.Popen(
            [*NEENS, "demo", "--json", "--port", str(free_port()), "--data-dir",
             str(root / "data")],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    stdout = process.stdout
    assert stdout is not None

    def read() -> None:
        for line in stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            raise AssertionError(f"no JSON line within 120 s: {log.read_text()}") from None
        yield Demo(process, json.loads(line), log, time.monotonic() - started)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        reader.join(10)
        stdout.close()


@pytest.fixture(scope="module")
def api(running: Demo) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {running.manifest['adminKey']}"}
    with httpx.Client(base_url=running.manifest["url"], headers=headers, timeout=30) as client:
        yield client


def get(api: httpx.Client, path: str, **params: Any) -> Any:
    r = api.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def by_label(group: dict[str, Any], label: str) -> dict[str, Any]:
    found: dict[str, Any] = next(a for a in group["arms"] if a["label"] == label)
    return found


def agent(comparison: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(a for a in comparison["agents"] if a["agentName"] == name)
    return found


def test_the_command_prints_the_url_an_admin_key_and_the_ids(running: Demo) -> None:
    manifest, stderr = running.manifest, running.stderr
    assert running.took_s < 120, f"seeding took {running.took_s:.0f} s"
    assert manifest["adminKey"].startswith("nk_live_")
    assert manifest["sweepId"].startswith("msw-")
    assert manifest["comparisonUrl"] == f"{manifest['sweepUrl']}/comparison"
    assert manifest["sweepUrl"] == f"{manifest['url']}/model-sweeps/{manifest['sweepId']}"
    assert manifest["comparePageUrl"] == (
        f"{manifest['url']}/ui/sweeps/{manifest['sweepId']}/compare"
    )
    assert manifest["signInUrl"] == f"{manifest['url']}/ui/sign-in"
    assert f"Open        {manifest['comparePageUrl']}" in stderr
    assert set(manifest["preprodRuns"]) == {"v41", "v42"}
    assert manifest["productionSessions"] == 35
    data_dir = Path(manifest["dataDir"])
    assert json.loads((data_dir / "demo.json").read_text()) == manifest
    assert (data_dir / "demo.json").stat().st_mode & 0o777 == 0o600
    # Progress and the summary go to stderr under --json, the verdicts among them.
    assert "• Running the sweep (6 arms × 3 runs × 30 items)" in stderr
    assert "sweep: 540/540 answers scored (arms: 6 completed)" in stderr
    assert "every model in it is simulated" in stderr
    assert manifest["adminKey"] in stderr
    assert "refund-agent: sim-frontier-mini clears the 90% bar" in stderr
    # The JSON line on standard output comes first; the closing line on standard error follows.
    serving = f"Serving on {manifest['url']} until Ctrl-C."
    deadline = time.monotonic() + 10
    while serving not in running.stderr and time.monotonic() < deadline:
        time.sleep(0.05)
    assert serving in running.stderr
    assert running.process.poll() is None, "it keeps serving"


def test_the_sweep_ran_for_real_and_the_story_holds(running: Demo, api: httpx.Client) -> None:
    manifest = running.manifest
    sweep = get(api, f"/model-sweeps/{manifest['sweepId']}")
    assert sweep["name"] == "Support agent — model selection"
    assert (sweep["status"], sweep["passK"], sweep["gate"]) == (
        "completed", 3, {"min_pass_rate": 0.9},
    )  # fmt: skip
    assert [a["label"] for a in sweep["arms"]][0] == LARGE, "the incumbent is the baseline arm"
    assert all(a["progress"]["itemsDone"] == 90 for a in sweep["arms"])
    assert sweep["unpricedCalls"] == 90 and sweep["spentUsd"] > 0

    c = get(api, f"/model-sweeps/{manifest['sweepId']}/comparison")
    assert c["comparable"] is True and c["bar"] == {"value": 0.9, "source": "gate"}
    assert c["baselineArmId"] == by_label(c, LARGE)["armId"]
    # The verdict: the cheap model, at a fraction of the cost, on the point estimate only.
    verdict = c["verdict"]
    assert (verdict["outcome"], verdict["recommendedLabel"]) == ("recommended", MINI)
    assert verdict["clearsOn"] == "point" and verdict["savingsPct"] > 90
    assert "but not on the lower bound" in verdict["sentence"]
    winner = next(a for a in c["arms"] if a["armId"] == c["winnerArmId"])
    assert winner["label"] == LARGE and winner["clearsBar"] == "point"
    assert winner["rate"] >= 0.9 > winner["wilsonLow"]
    # Per agent: the refund agent can move to the cheap model, the escalation agent cannot.
    refund, escalation = agent(c, "refund-agent"), agent(c, "escalation-agent")
    assert (refund["items"], escalation["items"]) == (22, 8)
    assert refund["verdict"]["recommendedLabel"] == MINI
    assert by_label(refund, MINI)["clearsBar"] == "point"
    assert refund["verdict"]["savingsPct"] > 90
    assert by_label(escalation, MINI)["clearsBar"] == "no"
    assert by_label(escalation, MINI)["rate"] < 0.9
    assert escalation["verdict"]["recommendedLabel"] == MEDIUM
    assert not any(a["label"] == "Unattributed" for a in c["agents"])
    # previous-gen carries 2 flaky items and has not passed pass^k.
    prev = by_label(c, "previous-gen")
    assert (prev["flakyItems"], prev["passed"], prev["excluded"]) == (2, False, "not_pass_k")
    assert [a["label"] for a in c["arms"] if a["flakyItems"]] == ["previous-gen"]
    # The self-hosted arm is unpriced: its cost is unknown, never $0.
    unpriced = by_label(c, "sim-open-weights-70b")
    assert unpriced["costPerCaseUsd"] is None and unpriced["costDeltaPct"] is None
    assert (unpriced["cases"], unpriced["pricedCases"]) == (90, 0)
    # Where the cheap model breaks: the two escalations it settled alone.
    mini = by_label(c, MINI)
    drill = get(api, f"/model-sweeps/{manifest['sweepId']}/arms/{mini['armId']}/regressions")
    assert drill["totalRegressions"] == 2
    for item in drill["items"]:
        assert item["expectedOutput"].startswith("Escalated to")
        assert not item["candidate"]["answer"].startswith("Escalated")


def test_every_model_is_labelled_simulated(running: Demo, api: httpx.Client) -> None:
    connections = get(api, "/agent-connections")["agentConnections"]
    assert len(connections) == 7
    for connection in connections:
        assert connection["provider"] == "simulated"
        assert connection["model"].startswith("sim-")
        assert "(simulated)" in connection["name"]
    sweep = get(api, f"/model-sweeps/{running.manifest['sweepId']}")
    assert all(a["model"].startswith("sim-") for a in sweep["arms"])
    prices = {p["model"] for p in get(api, "/model-pricing")["prices"]}
    assert prices == {
        "sim-frontier-large", "sim-frontier-medium", "sim-frontier-mini", "sim-previous-gen",
        "sim-budget-nano",
    }  # fmt: skip


def test_the_printed_page_opens_on_the_sweep_after_signing_in_with_the_printed_key(
    running: Demo, api: httpx.Client
) -> None:
    manifest = running.manifest
    with httpx.Client(base_url=manifest["url"], timeout=30) as browser:
        r = browser.get(manifest["comparePageUrl"])
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/sign-in?next=")
        form = browser.get(r.headers["location"])
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token is not None
        target = f"/ui/sweeps/{manifest['sweepId']}/compare"
        r = browser.post(
            "/ui/sign-in",
            data={"csrf_token": token.group(1), "key": manifest["adminKey"], "next": target},
        )
        assert (r.status_code, r.headers["location"]) == (303, target)
        page = browser.get(target)
        assert page.status_code == 200
    comparison = get(api, f"/model-sweeps/{manifest['sweepId']}/comparison")
    assert html.escape(comparison["verdict"]["sentence"], quote=False) in page.text
    assert page.text.count('data-simulated="true"') == 6, "every arm is labelled simulated"


def test_two_preprod_runs_of_the_agent_the_second_regressed(
    running: Demo, api: httpx.Client
) -> None:
    runs = running.manifest["preprodRuns"]
    first, second = (
        get(api, f"/preprod-evals/{runs['v41']}"),
        get(api, f"/preprod-evals/{runs['v42']}"),
    )
    assert first["status"] == "completed"
    assert first["baseline"] == {"kind": "prod_window", "range": "7d"}
    assert get(api, f"/preprod-evals/{runs['v41']}/gate")["passed"] is True
    fixed = get(api, f"/preprod-evals/{runs['v41']}/comparison")
    assert len(fixed["newPasses"]) == 2, "v41 escalates what production (v40) settled"
    assert second["status"] == "completed_with_regressions"
    assert second["baseline"] == {"kind": "preprod_run", "value": runs["v41"]}
    gate = get(api, f"/preprod-evals/{runs['v42']}/gate")
    assert (gate["passed"], gate["regressions"]) == (False, 3)
    assert first["model"] == second["model"] == LARGE
    insights = get(api, "/insights")["insights"]
    assert [i["runId"] for i in insights if i["kind"] == "preprod_regression"] == [runs["v42"]]


def test_production_sessions_are_there_named_priced_and_scored(
    running: Demo, api: httpx.Client
) -> None:
    production = []
    for name in ("refund-agent", "escalation-agent"):
        sessions = get(api, "/sessions", agent_name=name, limit=500)["sessions"]
        production += [s for s in sessions if s["evalRunId"] is None]
    assert len(production) == 35
    assert all(s["costStatus"] == "priced" and s["models"] == [LARGE] for s in production)
    scores = get(api, "/scores", source="production", limit=1000)["scores"]
    assert len(scores) == 35
    assert sum(1 for s in scores if s["score"] == 0.0) == 2, "v40 settled two escalations"


def test_a_data_dir_that_is_not_empty_is_refused_unless_reset(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "neens.db").write_text("an earlier demo")
    refused = demo("--data-dir", str(data_dir), "--port", str(free_port()), timeout=60)
    assert refused.returncode == 2
    assert f"the data directory {data_dir} is not empty" in refused.stderr
    assert "--reset" in refused.stderr and f"NEENS_HOME={data_dir} neens serve" in refused.stderr
    # --reset deletes only what the demo writes: anything else stops it, and nothing is lost.
    (data_dir / "notes.txt").write_text("mine")
    kept = demo("--data-dir", str(data_dir), "--reset", "--port", str(free_port()), timeout=60)
    assert kept.returncode == 2
    assert "holds files the demo did not write (notes.txt)" in kept.stderr
    assert sorted(p.name for p in data_dir.iterdir()) == ["neens.db", "notes.txt"]
    assert refused.stdout == kept.stdout == ""


def test_a_port_in_use_is_refused_naming_it_and_the_flag(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = demo("--data-dir", str(tmp_path / "data"), "--port", str(port), timeout=60)
    assert done.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in done.stderr
    assert "--port" in done.stderr
    bad = demo("--port", "70000", timeout=60)
    assert bad.returncode == 2 and "70000 is not a port number" in bad.stderr


def test_ctrl_c_stops_the_demo_and_neens_serve_shows_the_same_data_again(
    running: Demo, api: httpx.Client, tmp_path: Path
) -> None:
    """Last in the module: it stops the demo the other tests read."""
    manifest = running.manifest
    comparison = get(api, f"/model-sweeps/{manifest['sweepId']}/comparison")
    running.process.send_signal(signal.SIGINT)
    assert running.process.wait(timeout=30) == 0, running.stderr
    assert "neens: stopped" in running.stderr
    with pytest.raises(httpx.TransportError):
        api.get("/healthz")

    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "NEENS_HOME": manifest["dataDir"]}
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*NEENS, "serve", "--port", str(port), "--log-level", "warning"],
            env=env, stdout=out, stderr=out,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
        headers = {"Authorization": f"Bearer {manifest['adminKey']}"}
        again = httpx.get(
            f"{url}/model-sweeps/{manifest['sweepId']}/comparison", headers=headers, timeout=30
        )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert again.status_code == 200, again.text
    assert again.json() == comparison
