"""`neens sweep decide` against a live server, as a CI job runs it.

Real sweeps over simulated agent endpoints (`neens.demo.endpoints`), started and decided by the
real `neens` command with an ingest key. Each test reads as one sentence of docs/cli.md's
`neens sweep decide` section: the verdict is informational (0), `--require-winner` fails the
build when no arm clears the bar (1), a refused flag is a usage error naming it (2), and a void
sweep exits 4 with its reason, also with `--json`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from neens.demo.endpoints import serve, steady
from neens.store.keys import CreatedKey
from tests.e2e.test_cli_sweep import ITEMS, RIGHT, Neens
from tests.support.live import LiveServer

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ONE_WRONG = {**RIGHT, ITEMS[2]["input"]: "a wrong answer"}
"""Answers 2 of the 3 items right: a rate of 67%, under any bar above it."""


def comparison_fields() -> set[str]:
    schemas = json.loads((ROOT / "schemas" / "openapi.json").read_text(encoding="utf-8"))
    return set(schemas["components"]["schemas"]["SweepComparisonOut"]["properties"])


@pytest.fixture
def neens(
    live_server: LiveServer, key: CreatedKey, admin_key: CreatedKey, database_url: str
) -> Neens:
    return Neens(live_server.url, key.key, admin_key.key, database_url)


def finished_sweep(neens: Neens, first: Any, second: Any, *flags: str) -> dict[str, Any]:
    """A two-arm sweep (pass^2 over `ITEMS`) started and followed to its end by the CLI."""
    dataset = neens.golden()
    with serve(first, second) as agents:
        a = neens.connection(agents.url(first.path))
        b = neens.connection(agents.url(second.path))
        done = neens.start(dataset, f"incumbent={a}", f"mini={b}", flags=("--wait", "--json",
                           *flags))  # fmt: skip
    assert done.code == 0, done.stderr
    sweep: dict[str, Any] = done.json
    return sweep


def test_a_finished_two_arm_sweep_is_decided_as_the_servers_json_and_exits_0(
    neens: Neens,
) -> None:
    sweep = finished_sweep(
        neens, steady(RIGHT, path="/a"), steady(ONE_WRONG, path="/b"), "--min-pass-rate", "0.5"
    )
    incumbent, mini = (arm["id"] for arm in sweep["arms"])

    result = neens.neens("sweep", "decide", "--sweep-id", sweep["id"], "--json")
    positional = neens.neens("sweep", "decide", sweep["id"])
    flipped = neens.neens(
        "sweep", "decide", sweep["id"], "--baseline-arm", mini, "--bar", "0.6", "--json"
    )

    assert result.code == 0, result.stderr
    decision = result.json
    assert set(decision) == comparison_fields()
    assert decision["sweepId"] == sweep["id"] and decision["status"] == "completed"
    assert decision["comparable"] is True
    assert decision["bar"] == {"value": 0.5, "source": "gate"}
    assert decision["baselineArmId"] == incumbent
    assert decision["leaderboard"] == [incumbent, mini]
    arms = {arm["label"]: arm for arm in decision["arms"]}
    assert (arms["incumbent"]["rate"], arms["incumbent"]["n"]) == (1.0, 3)
    assert arms["mini"]["passedItems"] == 2 and arms["mini"]["regressions"] == 1
    assert all(arm["costPerCaseUsd"] is None for arm in arms.values())  # no usage reported
    assert decision["verdict"]["outcome"] == "recommended"
    # The report for a person goes to stderr under --json: the server's sentence, the bar's
    # source, the leaderboard in the server's order, unpriced never $0, the paired test.
    err = result.stderr
    assert f"Verdict: {decision['verdict']['sentence']}" in err
    assert "bar 50% (from the sweep's gate)" in err
    assert err.index("1     incumbent (baseline)") < err.index("2     mini ")
    assert "unpriced" in err and "$0.00" not in err
    assert "mini, second (paired) test: Paired check (exact McNemar" in err
    # Named positionally, the same verdict is printed on stdout.
    assert positional.code == 0, positional.stderr
    assert f"Verdict: {decision['verdict']['sentence']}" in positional.stdout
    # The bar and the baseline are the flags', and said to be.
    assert flipped.code == 0, flipped.stderr
    assert flipped.json["bar"] == {"value": 0.6, "source": "query"}
    assert flipped.json["baselineArmId"] == mini
    assert "bar 60% (from --bar)" in flipped.stderr


def test_require_winner_exits_1_when_no_arm_clears_a_high_bar_and_bad_flags_exit_2(
    neens: Neens,
) -> None:
    sweep = finished_sweep(neens, steady(ONE_WRONG, path="/a"), steady(ONE_WRONG, path="/b"))

    required = neens.neens(
        "sweep", "decide", "--sweep-id", sweep["id"], "--bar", "0.9", "--require-winner", "--json"
    )
    informational = neens.neens("sweep", "decide", "--sweep-id", sweep["id"], "--bar", "0.9")
    unknown_arm = neens.neens("sweep", "decide", sweep["id"], "--baseline-arm", "msa-nope")
    bad_bar = neens.neens("sweep", "decide", sweep["id"], "--bar", "90")

    assert required.code == 1, required.stderr
    verdict = required.json["verdict"]
    assert verdict["outcome"] == "no_arm_clears" and verdict["recommendedArmId"] is None
    assert f"neens: --require-winner: no arm is recommended: {verdict['sentence']}" in (
        required.stderr
    )
    assert informational.code == 0, informational.stderr  # the same verdict, informational
    assert f"Verdict: {verdict['sentence']}" in informational.stdout
    assert unknown_arm.code == 2
    assert "neens: error: --baseline-arm: " in unknown_arm.stderr
    assert "[HTTP 422" in unknown_arm.stderr
    assert bad_bar.code == 2
    assert "argument --bar: 90 is not between 0 and 1" in bad_bar.stderr


def test_a_void_sweep_exits_4_with_its_reason_even_with_json(neens: Neens) -> None:
    sweep = finished_sweep(neens, steady(RIGHT, path="/a"), steady(RIGHT, path="/b"))
    neens.alter_judges(sweep["arms"][1]["runIds"][1])

    result = neens.neens("sweep", "decide", "--sweep-id", sweep["id"], "--json")

    assert result.code == 4, result.stderr
    decision = result.json
    assert decision["status"] == "void" and decision["comparable"] is False
    assert decision["leaderboard"] == [] and decision["verdict"]["outcome"] == "unavailable"
    reason = decision["voidReason"]
    assert sweep["arms"][1]["runIds"][1] in reason
    assert f"neens: sweep {sweep['id']} is VOID: {reason}" in result.stderr
    assert "neens: diverged arms: mini." in result.stderr
    assert "Leaderboard" not in result.stderr and "vs baseline" not in result.stderr


def test_wait_follows_a_running_sweep_to_its_end_then_decides(neens: Neens) -> None:
    dataset = neens.golden()
    slow = 0.3
    with serve(steady(RIGHT, path="/a", latency_s=slow), steady(RIGHT, path="/b",
               latency_s=slow)) as agents:  # fmt: skip
        a = neens.connection(agents.url("/a"))
        b = neens.connection(agents.url("/b"))
        started = neens.start(dataset, f"incumbent={a}", f"mini={b}", flags=("--json",))
        assert started.code == 0, started.stderr
        sweep_id = started.json["id"]
        assert started.json["status"] in ("pending", "running")

        result = neens.neens("sweep", "decide", sweep_id, "--wait", "--require-winner", "--json")

    assert result.code == 0, result.stderr
    decision = result.json
    assert decision["status"] == "completed"
    assert decision["verdict"]["outcome"] == "recommended"
    assert f"neens: waiting for sweep {sweep_id}" in result.stderr
    assert "neens:   incumbent: " in result.stderr  # each arm's state, live
    assert (
        f"neens: {decision['verdict']['recommendedLabel']} is recommended (--require-winner)."
        in result.stderr
    )
