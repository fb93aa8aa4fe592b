"""`neens sweep decide` against the loopback stand-in for the server: the flags and the query they
make, what is shown of every outcome, and the exit code of each outcome with and without
`--require-winner`.

The comparisons are shaped as `GET /model-sweeps/{id}/comparison` answers (checked against
schemas/openapi.json below); tests/e2e/test_cli_sweep_decide.py runs the command against the real
server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from neens.demo.endpoints import Reply, Scripted

from neens_eval import cli, waiting
from neens_eval.decision_render import conclude_decision, decision_report, pct
from neens_eval.errors import ApiError
from neens_eval.sweep_render import Seen

ROOT = Path(__file__).resolve().parents[3]
URL = "http://neens/model-sweeps/msw-1/comparison"
PATH = "/model-sweeps/msw-1/comparison"
REASON = "arm 'mini': run ppr_9 has judge set ['jdg_other'] instead of ['jdg_1']"


def arm(label: str, position: int, rate: float | None = 0.95, **fields: Any) -> dict[str, Any]:
    n = fields.pop("n", 40)
    return {
        "armId": f"msa-{label}",
        "label": label,
        "position": position,
        "status": "completed",
        "passed": True,
        "runs": 3,
        "isBaseline": position == 0,
        "n": n,
        "passedItems": round((rate or 0) * n),
        "flakyItems": 0,
        "rate": rate,
        "wilsonLow": None if rate is None else max(rate - 0.1, 0),
        "wilsonHigh": None if rate is None else min(rate + 0.03, 1),
        "cases": 120,
        "pricedCases": 120,
        "costPerCaseUsd": 0.013,
        "costDeltaUsd": 0.0 if position == 0 else -0.011,
        "costDeltaPct": 0.0 if position == 0 else -84.6,
        "regressions": 0 if position == 0 else 2,
        "newPasses": 0 if position == 0 else 1,
        "mcnemar": None,
        "excluded": None,
        "clearsBar": "point",
        "rank": position + 1,
        "notDistinguishable": None,
        **fields,
    }


def verdict(outcome: str = "recommended", sentence: str | None = None) -> dict[str, Any]:
    recommended = outcome == "recommended"
    return {
        "outcome": outcome,
        "recommendedArmId": "msa-mini" if recommended else None,
        "recommendedLabel": "mini" if recommended else None,
        "costPerCaseUsd": 0.002 if recommended else None,
        "savingsUsd": 0.011 if recommended else None,
        "savingsPct": 84.6 if recommended else None,
        "clearsOn": "point" if recommended else None,
        "sentence": sentence or f"the server's {outcome} sentence.",
    }


def comparison(
    outcome: str = "recommended", status: str = "completed", **fields: Any
) -> dict[str, Any]:
    arms = fields.pop("arms", [arm("incumbent", 0), arm("mini", 1, costPerCaseUsd=0.002)])
    agent = {
        "agentName": None,
        "label": "Unattributed",
        "items": 3,
        "unnamedItems": 2,
        "conflictingItems": 1,
        "arms": arms,
        "leaderboard": [a["armId"] for a in arms],
        "winnerArmId": arms[0]["armId"],
        "verdict": verdict(outcome, f"Unattributed: the {outcome} sentence."),
    }
    return {
        "sweepId": "msw-1",
        "status": status,
        "comparable": True,
        "voidReason": None,
        "bar": {"value": 0.9, "source": "gate"},
        "baselineArmId": "msa-incumbent",
        "itemCount": 40,
        "uncapturedItems": 0,
        "arms": arms,
        "leaderboard": [a["armId"] for a in arms],
        "winnerArmId": arms[0]["armId"],
        "verdict": verdict(outcome),
        "agents": [agent],
        "frontier": {
            "points": [
                {
                    "armId": a["armId"],
                    "label": a["label"],
                    "costPerCaseUsd": 0.002,
                    "rate": 1.0,
                    "wilsonLow": 0.9,
                    "wilsonHigh": 1.0,
                    "n": 40,
                    "excluded": None,
                    "onFrontier": True,
                    "highlighted": False,
                }
                for a in arms[1:2]
            ],
            "unpricedArmIds": [],
            "noDataArmIds": [],
            "highlightedArmId": None,
        },
        **fields,
    }


def void() -> dict[str, Any]:
    arms = [
        arm(label, i, rank=None, regressions=None, newPasses=None, costDeltaUsd=None,
            costDeltaPct=None)
        for i, label in enumerate(("incumbent", "mini"))
    ]  # fmt: skip
    document = comparison(
        "unavailable", "void", comparable=False, voidReason=REASON, arms=arms, leaderboard=[],
        winnerArmId=None,
    )  # fmt: skip
    document["verdict"]["sentence"] = f"The sweep is void, so no arm is ranked: {REASON}."
    document["agents"][0]["leaderboard"] = []
    return document


def sweep(status: str, **fields: Any) -> dict[str, Any]:
    arms = [
        {"id": "msa-incumbent", "label": "incumbent", "status": status, "greenRuns": 0,
         "progress": {"runsFinished": 0, "runs": 3, "itemsDone": 2, "itemsTotal": 120}},
    ]  # fmt: skip
    return {"id": "msw-1", "status": status, "spentUsd": 0.1, "unpricedCalls": 0, "arms": arms,
            "voidReason": None, "divergedArms": [], "reason": None, **fields}  # fmt: skip


def rows(text: str) -> dict[str, list[str]]:
    """The first table's rows, by arm label (its second cell)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        cells = line.split()
        if line.startswith("    ") and not line.startswith("     ") and len(cells) > 2:
            found.setdefault(cells[1], cells)
    return found


def schema(name: str) -> set[str]:
    document = json.loads((ROOT / "schemas" / "openapi.json").read_text(encoding="utf-8"))
    return set(document["components"]["schemas"][name]["properties"])


def test_these_comparisons_have_exactly_the_fields_the_server_sends() -> None:
    # The other tests' arms leave out pass^k, as a server from before it did (shown as "-").
    hat = {"passHatK": 0.9, "passHatKItems": 40}
    document = comparison(arms=[arm("incumbent", 0, **hat), arm("mini", 1, **hat)])
    assert set(document) == schema("SweepComparisonOut")
    assert set(document["arms"][0]) == schema("ArmComparisonOut")
    assert set(document["verdict"]) == schema("VerdictOut")
    assert set(document["agents"][0]) == schema("AgentComparisonOut")
    assert set(document["frontier"]) == schema("FrontierOut")
    assert set(document["frontier"]["points"][0]) == schema("FrontierPointOut")


# --- the flags and the query --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "query"),
    [
        (["--sweep-id", "msw-1"], {}),
        (["msw-1"], {}),
        (["msw-1", "--sweep-id", "msw-1"], {}),
        (["--sweep-id", "msw-1", "--bar", "0.9", "--baseline-arm", "msa-mini"],
         {"bar": ["0.9"], "baselineArm": ["msa-mini"]}),
        (["--sweep-id", "msw-1", "--bar", "0.925"], {"bar": ["0.925"]}),
    ],
)  # fmt: skip
def test_the_sweep_may_be_named_either_way_and_only_given_flags_are_sent(
    argv: list[str], query: dict[str, list[str]], env: Scripted
) -> None:
    env.reply("GET", PATH, Reply(200, comparison()))

    assert cli.main(["sweep", "decide", *argv]) == 0

    assert env.paths() == [f"GET {PATH}"]
    assert env.calls[0].query == query


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        ([], "give the sweep to decide with --sweep-id msw-…"),
        (["msw-1", "--sweep-id", "msw-2"], "two different sweeps were given"),
        (["msw-1", "--bar", "90"], "argument --bar: 90 is not between 0 and 1 (0.9 means 90%)"),
        (["msw-1", "--bar", "nan"], "argument --bar: 'nan' is not a finite number"),
        (["msw-1", "--baseline-arm", " "], "--baseline-arm is empty"),
        (["msw-1", "--timeout", "0"], "argument --timeout"),
        (["msw-1", "--require-all-arms"], "unrecognized arguments: --require-all-arms"),
    ],
)
def test_usage_errors_exit_2_naming_the_flag_before_anything_is_sent(
    argv: list[str], words: str, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["sweep", "decide", *argv]) == 2
    assert words in capsys.readouterr().err
    assert env.calls == []


@pytest.mark.parametrize(
    ("field", "flag"),
    [("baselineArm", "--baseline-arm"), ("bar", "--bar"), ("sweep_id", "--sweep-id")],
)
def test_a_refused_query_is_said_in_terms_of_its_flag_and_nothing_is_waited_for(
    field: str, flag: str, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    status = 404 if field == "sweep_id" else 422
    error = {"code": "unprocessable", "message": "msa-x is not an arm of this sweep"}
    env.reply("GET", PATH, Reply(status, {"error": {**error, "field": field}}))

    code = cli.main(["sweep", "decide", "msw-1", "--baseline-arm", "msa-x", "--wait"])

    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"neens: error: {flag}: msa-x is not an arm of this sweep")
    assert env.paths() == [f"GET {PATH}"]


# --- exit codes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "seen", "informational", "required"),
    [
        (comparison("recommended"), "read", 0, 0),
        (comparison("recommended"), "finished", 0, 0),
        (comparison("no_arm_clears"), "read", 0, 1),
        (comparison("no_arm_clears", "completed_with_failures"), "finished", 0, 1),
        (comparison("not_finished", "running"), "read", 0, 3),
        (comparison("not_finished", "pending"), "read", 0, 3),
        (comparison("not_finished", "running"), "timeout", 3, 3),
        (void(), "read", 4, 4),
        (void(), "finished", 4, 4),
        (comparison("no_arm_clears", "failed"), "read", 4, 4),
        (comparison("no_arm_clears", "cancelled"), "read", 4, 4),
        (comparison("recommended", "cancelled"), "finished", 4, 4),
    ],
)
def test_exit_code_of_every_outcome_with_and_without_require_winner(
    document: dict[str, Any], seen: Seen, informational: int, required: int
) -> None:
    plain = conclude_decision(document, seen=seen, timeout_s=5)
    strict = conclude_decision(document, seen=seen, require_winner=True, timeout_s=5)
    assert (plain.exit_code, strict.exit_code) == (informational, required)
    for conclusion in (plain, strict):
        if conclusion.exit_code:
            assert conclusion.lines, "a non-zero exit says why"


def test_an_unknown_outcome_or_status_is_an_unexpected_answer_not_a_verdict() -> None:
    odd = comparison()
    odd["verdict"]["outcome"] = "winner"
    with pytest.raises(ApiError, match="unexpected answer") as raised:
        conclude_decision(odd, seen="read")
    assert raised.value.exit_code == 2
    with pytest.raises(ApiError, match="unexpected answer"):
        conclude_decision(comparison(status="done"), seen="read")


def test_require_winner_says_why_the_build_fails() -> None:
    document = comparison("no_arm_clears")
    document["verdict"]["sentence"] = "No arm clears the 99% bar: mini is below it (95%, n=40)."
    conclusion = conclude_decision(document, seen="read", require_winner=True)
    assert conclusion.lines == [
        "neens: --require-winner: no arm is recommended: No arm clears the 99% bar: mini is "
        "below it (95%, n=40)."
    ]


def test_a_failed_or_cancelled_sweep_gives_the_sweeps_own_reason() -> None:
    reason = "budget reached: $10.01 spent of the $10.00 budget"
    conclusion = conclude_decision(
        comparison("recommended", "cancelled"),
        seen="read",
        sweep=sweep("cancelled", reason=reason),
    )
    assert conclusion.exit_code == 4
    assert conclusion.lines == [
        f"neens: sweep msw-1 was cancelled: {reason}; its evidence is incomplete, so its "
        f"verdict is not one to act on"
    ]


# --- what is shown ------------------------------------------------------------------------------


def test_the_report_leads_with_the_servers_sentence_and_where_the_bar_came_from() -> None:
    text = decision_report(comparison(), URL)
    lines = text.splitlines()
    assert lines[0] == "Sweep decision msw-1: completed"
    assert lines[1] == (
        "  bar 90% (from the sweep's gate); baseline arm incumbent (msa-incumbent); 40 frozen items"
    )
    assert "Verdict: the server's recommended sentence." in lines
    assert lines[-1].endswith(f'"{URL}"')


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("gate", "bar 90% (from the sweep's gate)"),
        ("query", "bar 90% (from --bar)"),
        ("default", "bar 90% (Neens' default: no --bar, and the sweep's gate pins no"),
    ],
)
def test_the_bar_always_says_where_it_came_from(source: str, words: str) -> None:
    document = comparison(bar={"value": 0.9, "source": source})
    assert words in decision_report(document, URL)


def test_the_leaderboard_is_the_servers_order_never_re_sorted_here() -> None:
    # The server ranked b over a though a has the higher rate: shown as ranked, not re-derived.
    arms = [
        arm("a", 0, 0.97, rank=2),
        arm("b", 1, 0.91, rank=1),
        arm("c", 2, 0.99, rank=None, excluded="not_pass_k", passed=False),
    ]
    document = comparison(arms=arms, leaderboard=["msa-b", "msa-a"])
    text = decision_report(document, URL)
    assert [label for label in rows(text) if label in ("a", "b", "c")] == ["b", "a", "c"]
    assert rows(text)["c"][0] == "-"
    assert "    - c: not ranked (not_pass_k): not green on all 3 of its runs (pass^k)" in text


def test_each_arm_shows_rate_n_interval_flaky_and_what_it_saves_against_the_baseline() -> None:
    arms = [arm("incumbent", 0, 0.9), arm("mini", 1, 0.925, flakyItems=2, wilsonLow=0.8,
            wilsonHigh=0.975, costPerCaseUsd=0.00027)]  # fmt: skip
    cells = rows(decision_report(comparison(arms=arms), URL))
    assert cells["mini"] == [
        "2", "mini", "92.5%", "40", "80%–97.5%", "-", "2", "point", "only", "$0.00027", "cost",
        "-84.6%,", "2", "regressions,", "1", "new", "pass",
    ]  # fmt: skip
    assert cells["incumbent"][-1] == "baseline"


def test_no_data_is_shown_as_no_data_never_0_percent() -> None:
    dead = arm("dead", 1, None, n=0, excluded="failed", status="failed", rank=None, cases=0,
               pricedCases=0, costPerCaseUsd=None, clearsBar="no", mcnemar=None)  # fmt: skip
    text = decision_report(comparison(arms=[arm("incumbent", 0), dead]), URL)
    row = rows(text)["dead"]
    assert row[2:4] == ["no", "data"] and row[4] == "0" and row[5] == "-"
    assert "no cases" in " ".join(row)
    assert "0%" not in " ".join(row) and "$0" not in " ".join(row)
    assert "    - dead: not ranked (failed): it failed" in text


def test_unpriced_is_never_free_and_a_partly_priced_arm_says_how_much_it_covers() -> None:
    arms = [
        arm("incumbent", 0),
        arm("self-host", 1, pricedCases=0, costPerCaseUsd=None, costDeltaUsd=None,
            costDeltaPct=None),
        arm("partly", 2, pricedCases=6, cases=12, costPerCaseUsd=0.0021),
    ]  # fmt: skip
    text = decision_report(comparison(arms=arms), URL)
    assert " ".join(rows(text)["self-host"]).count("unpriced") == 1
    assert "cost unknown" in " ".join(rows(text)["self-host"])
    assert "$0.0021 (6 of 12 priced)" in " ".join(rows(text)["partly"])
    assert "$0.00 " not in text and "$0 " not in text


def test_the_paired_test_is_a_second_labelled_line_and_indistinguishable_arms_are_said() -> None:
    sentence = "Paired check (exact McNemar, not the ranking rule) against incumbent: p = 0.5."
    mcnemar = {"b": 2, "c": 1, "n11": 30, "n00": 7, "discordant": 3, "sharedItems": 40,
               "pValue": 0.5, "sentence": sentence}  # fmt: skip
    arms = [
        arm("incumbent", 0, notDistinguishable="not distinguishable from mini at n=40"),
        arm("mini", 1, mcnemar=mcnemar),
    ]
    text = decision_report(comparison(arms=arms, leaderboard=["msa-mini", "msa-incumbent"]), URL)
    assert f"    - mini, second (paired) test: {sentence}" in text
    assert "    - incumbent: not distinguishable from mini at n=40" in text


def test_per_agent_verdicts_follow_in_the_servers_order_with_unattributed_explained() -> None:
    document = comparison()
    named = {**document["agents"][0], "agentName": "refund-agent", "label": "refund-agent",
             "items": 22, "unnamedItems": 0, "conflictingItems": 0,
             "verdict": verdict("no_arm_clears", "refund-agent: no arm clears.")}  # fmt: skip
    document["agents"] = [named, document["agents"][0]]
    text = decision_report(document, URL)
    refund, unattributed = text.index("  refund-agent, 22 items"), text.index("  Unattributed")
    assert refund < unattributed
    assert (
        "  Unattributed, 3 items (2 whose answers named no agent, 1 whose answers named "
        "different agents)" in text
    )
    assert "    Verdict: refund-agent: no arm clears." in text
    assert "    Verdict: Unattributed: the recommended sentence." in text


def test_a_void_sweep_shows_its_reason_and_each_arms_own_numbers_but_no_comparison() -> None:
    text = decision_report(void(), URL)
    assert f"VOID: {REASON}" in text
    assert "No arm is ranked, compared or recommended." in text
    for words in ("vs baseline", "clears bar", "regression", "Leaderboard", "rank  "):
        assert words not in text
    header = next(line.split() for line in text.splitlines() if line.startswith("    arm "))
    assert header == ["arm", "status", "rate", "n", "95%", "interval", "pass^k", "flaky", "cost",
                      "per", "case"]  # fmt: skip
    own = [line.split() for line in text.splitlines() if line.startswith("    mini ")]
    assert own and own[0][:4] == ["mini", "completed", "95%", "40"]


def test_rates_never_read_as_the_bar_zero_or_all_when_they_are_not() -> None:
    assert pct(0.8996, 0.9) == "89.96%"
    assert pct(0.9, 0.9) == "90%"
    assert pct(0.9004, 0.9) == "90.04%"
    assert pct(0.9999) == "99.99%"
    assert pct(0.00001) == "0.001%"
    assert (pct(0.0), pct(1.0), pct(0.925)) == ("0%", "100%", "92.5%")


# --- the command --------------------------------------------------------------------------------


def test_json_writes_the_servers_comparison_unchanged_and_the_report_to_stderr(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    document = comparison()
    env.reply("GET", PATH, Reply(200, document))

    assert cli.main(["sweep", "decide", "--sweep-id", "msw-1", "--json"]) == 0

    out = capsys.readouterr()
    assert out.out.count("\n") == 1 and json.loads(out.out) == document
    assert "Verdict: the server's recommended sentence." in out.err


def test_a_void_sweep_exits_4_with_its_reason_on_stderr_also_with_json(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", PATH, Reply(200, void()))
    env.reply("GET", "/model-sweeps/msw-1", Reply(200, sweep("void", voidReason=REASON,
              divergedArms=["mini"])))  # fmt: skip

    assert cli.main(["sweep", "decide", "msw-1", "--json", "--require-winner"]) == 4

    out = capsys.readouterr()
    assert json.loads(out.out) == void()
    assert f"neens: sweep msw-1 is VOID: {REASON}" in out.err
    assert "neens: diverged arms: mini. The arms did not run under identical conditions" in out.err


def test_a_void_sweep_exits_4_even_when_the_sweep_itself_cannot_be_read(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", PATH, Reply(200, void()))
    env.reply("GET", "/model-sweeps/msw-1", Reply(503))

    assert cli.main(["sweep", "decide", "msw-1"]) == 4
    assert f"is VOID: {REASON}" in capsys.readouterr().err


def test_a_running_sweep_without_wait_is_informational_and_says_how_to_wait(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", PATH, Reply(200, comparison("not_finished", "running")))

    assert cli.main(["sweep", "decide", "msw-1"]) == 0
    assert "no verdict yet; run this command again with --wait" in capsys.readouterr().err
    assert env.paths() == [f"GET {PATH}"]


def test_wait_follows_the_sweep_live_then_reads_the_verdict(
    env: Scripted, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting.ObjectPoller, "sleep", lambda self: None)
    final = comparison("no_arm_clears")
    env.reply("GET", PATH, Reply(200, comparison("not_finished", "running")), Reply(200, final))
    env.reply(
        "GET", "/model-sweeps/msw-1", Reply(200, sweep("running")), Reply(200, sweep("completed"))
    )

    code = cli.main(["sweep", "decide", "msw-1", "--wait", "--bar", "0.99", "--require-winner",
                     "--json"])  # fmt: skip

    assert code == 1
    assert env.paths() == [
        f"GET {PATH}", "GET /model-sweeps/msw-1", "GET /model-sweeps/msw-1", f"GET {PATH}",
    ]  # fmt: skip
    assert [call.query for call in env.calls if call.path == PATH] == [{"bar": ["0.99"]}] * 2
    out = capsys.readouterr()
    assert json.loads(out.out) == final
    assert "neens:   incumbent: running, runs 0/3, items 2/120, 0 green" in out.err
    assert "neens: --require-winner: no arm is recommended: " in out.err


def test_wait_that_runs_out_of_time_exits_3_with_the_comparison_as_it_stood(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", PATH, Reply(200, comparison("not_finished", "running")))
    env.reply("GET", "/model-sweeps/msw-1", Reply(200, sweep("running")))

    code = cli.main(["sweep", "decide", "msw-1", "--wait", "--timeout", "0.01", "--json"])

    assert code == 3
    out = capsys.readouterr()
    assert json.loads(out.out)["verdict"]["outcome"] == "not_finished"
    assert "no verdict after 0.01 s (--timeout): sweep msw-1 is still running" in out.err


def test_a_server_gone_while_waiting_exits_3_writes_no_json_and_says_how_to_decide_again(
    env: Scripted, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting.ObjectPoller, "sleep", lambda self: None)
    env.reply("GET", PATH, Reply(200, comparison("not_finished", "running")))
    env.reply("GET", "/model-sweeps/msw-1", Reply(200, sweep("running")), Reply(503))

    assert cli.main(["sweep", "decide", "msw-1", "--wait", "--json"]) == 3
    out = capsys.readouterr()
    assert out.out == ""  # stdout is the comparison or nothing
    assert "follow it again with `neens sweep decide msw-1 --wait`" in out.err


def test_wait_on_a_finished_sweep_reads_the_verdict_once_and_polls_nothing(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", PATH, Reply(200, comparison("recommended")))

    assert cli.main(["sweep", "decide", "msw-1", "--wait", "--require-winner"]) == 0

    assert env.paths() == [f"GET {PATH}"]
    out = capsys.readouterr()
    assert "Verdict: the server's recommended sentence." in out.out
    assert "neens: mini is recommended (--require-winner)." in out.err
    assert "waiting for sweep" not in out.err
