"""`neens sweep preview|start|get|cancel` against the loopback stand-in for the server: the flags,
the requests they make, what is shown, and the exit code of every sweep status.

The server side is `fake_neens` (conftest.py), scripted with the answers docs/sweeps.md documents;
tests/e2e/test_cli_sweep.py runs the same commands against the real server.
"""

from __future__ import annotations

import argparse
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from neens.demo.endpoints import Reply, Scripted

from neens_eval import cli, sweep_render, waiting
from neens_eval.cli import EXIT_BROKEN_PIPE
from neens_eval.errors import EXIT_UNTRUSTED, ApiError
from neens_eval.sweep_args import parse_arm
from neens_eval.sweep_render import conclude, live_rows, preview_table, sweep_table
from neens_eval.waiting import Board, BoardRow

ARMS = ["--arm", "sonnet=conn_s", "--arm", "mini=conn_m"]


def arm(
    label: str,
    status: str = "completed",
    *,
    passed: bool | None = True,
    finished: int = 3,
    green: int = 3,
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "id": f"msa-{label}",
        "label": label,
        "agentConnectionId": f"conn_{label[0]}",
        "model": {"sonnet": "claude-sonnet-4-5", "mini": "gpt-4o-mini"}.get(label),
        "modelProvider": {"sonnet": "anthropic", "mini": "openai"}.get(label),
        "status": status,
        "progress": {
            "runsFinished": finished,
            "runs": 3,
            "itemsDone": finished * 2,
            "itemsTotal": 6,
        },
        "greenRuns": green,
        "passed": passed,
        "error": error,
        "runIds": [f"ppr_{label}_{n}" for n in range(finished)],
    }


def sweep(status: str = "completed", *arms: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "id": "msw-1",
        "name": "monthly model sweep",
        "versionLabel": "3f2c9e1",
        "datasetId": "ds_1",
        "datasetVersionId": "dsv_1",
        "passK": 3,
        "budgetUsd": 10.0,
        "spentUsd": 0.42,
        "unpricedCalls": 0,
        "judgeDeploymentIds": ["jdg_1"],
        "gate": {"min_pass_rate": 0.9},
        "fingerprint": "sha256:abc",
        "status": status,
        "voidReason": None,
        "divergedArms": [],
        "reason": None,
        "createdAt": "2026-11-30T12:00:00Z",
        "completedAt": None,
        "arms": list(arms) or [arm("sonnet"), arm("mini")],
        **fields,
    }


VOID = sweep(
    "void",
    voidReason="arm 'mini': run ppr_mini_1 was scored by a different judge set",
    divergedArms=["mini"],
)

PREVIEW = {
    "datasetId": "ds_1",
    "datasetVersionId": "dsv_1",
    "itemCount": 2,
    "passK": 3,
    "arms": [
        {"label": "sonnet", "agentConnectionId": "conn_s", "model": "claude-sonnet-4-5",
         "calls": 6, "estimatedUsd": 1.23, "basis": "history",
         "basisDetail": "mean of 412 earlier calls through this connection"},
        {"label": "self-host", "agentConnectionId": "conn_h", "model": None, "calls": 6,
         "estimatedUsd": None, "basis": "unpriced", "basisDetail": "no price for this model"},
    ],
    "totalCalls": 12,
    "estimatedUsd": 1.23,
    "partial": True,
    "budgetUsd": None,
    "wouldRefuse": None,
    "refusal": None,
}  # fmt: skip


def body_of(fake: Scripted, method: str, path: str) -> Any:
    return next(r.body for r in fake.calls if r.method == method and r.path == path)


# --- --arm --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "label", "connection"),
    [
        ("sonnet=conn_s", "sonnet", "conn_s"),
        (" self-host = conn_h ", "self-host", "conn_h"),
        ("gpt=4o=conn_g", "gpt=4o", "conn_g"),  # a label may hold "="; an id never does
    ],
)
def test_an_arm_is_a_label_and_a_connection_id(text: str, label: str, connection: str) -> None:
    parsed = parse_arm(text)
    assert (parsed.label, parsed.connection_id, parsed.text) == (label, connection, text)
    assert parsed.to_json() == {"label": label, "agentConnectionId": connection}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("sonnet", "is not LABEL=CONNECTION_ID"),
        ("=conn_s", "is not LABEL=CONNECTION_ID"),
        ("sonnet=", "is not LABEL=CONNECTION_ID"),
        ("sonnet=conn s", "contains whitespace"),
        ("conn_s=sonnet", "looks reversed: write LABEL=CONNECTION_ID, such as --arm sonnet=conn_s"),
    ],
)
def test_a_malformed_arm_is_a_usage_error_naming_it(
    text: str, words: str, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=words):
        parse_arm(text)

    code = cli.main(
        ["sweep", "preview", "--dataset-id", "ds_1", "--arm", "a=conn_a", "--arm", text]
    )

    assert code == 2
    assert f"argument --arm: {text!r}" in capsys.readouterr().err
    assert env.calls == []  # nothing was sent


# --- the request the flags describe -------------------------------------------------------------


def test_start_sends_every_flag_in_the_servers_camel_case_body(env: Scripted) -> None:
    env.reply("POST", "/model-sweeps", Reply(201, sweep("running")))

    code = cli.main(
        ["sweep", "start", "--name", "monthly model sweep", "--dataset-id", "ds_1",
         "--dataset-version-id", "dsv_1", "--version-label", "3f2c9e1", *ARMS, "--pass-k", "2",
         "--budget-usd", "10", "--judge-id", "jdg_a", "--judge-id", "jdg_b",
         "--min-pass-rate", "0.9", "--max-regressions", "0", "--json"]
    )  # fmt: skip

    assert code == 0
    assert body_of(env, "POST", "/model-sweeps") == {
        "name": "monthly model sweep",
        "versionLabel": "3f2c9e1",
        "datasetId": "ds_1",
        "datasetVersionId": "dsv_1",
        "passK": 2,
        "budgetUsd": 10.0,
        "judgeDeploymentIds": ["jdg_a", "jdg_b"],
        "gate": {"min_pass_rate": 0.9, "max_regressions": 0},
        "arms": [
            {"label": "sonnet", "agentConnectionId": "conn_s"},
            {"label": "mini", "agentConnectionId": "conn_m"},
        ],
    }
    assert env.paths() == ["POST /model-sweeps"]  # no --wait: started, not followed


def test_preview_sends_only_what_was_given_and_leaves_defaults_to_the_server(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("POST", "/model-sweeps/preview", Reply(200, PREVIEW))

    code = cli.main(["sweep", "preview", "--dataset-id", "ds_1", *ARMS, "--json"])

    assert code == 0
    assert body_of(env, "POST", "/model-sweeps/preview") == {
        "datasetId": "ds_1",
        "arms": [
            {"label": "sonnet", "agentConnectionId": "conn_s"},
            {"label": "mini", "agentConnectionId": "conn_m"},
        ],
    }
    out = capsys.readouterr()
    assert json.loads(out.out) == PREVIEW  # stdout is exactly the server's answer
    assert "Sweep preview" in out.err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["sweep", "preview", *ARMS], "--dataset-id"),
        (["sweep", "start", "--dataset-id", "ds_1", *ARMS], "--version-label is required"),
        (["sweep", "start", "--dataset-id", "ds_1", "--version-label", "v", *ARMS,
          "--require-all-arms"], "--require-all-arms needs --wait"),
        (["sweep", "preview", "--dataset-id", "ds_1"], "one --arm LABEL=CONNECTION_ID each"),
        (["sweep", "preview", "--dataset-id", "ds_1", *ARMS, "--budget-usd", "-1"],
         "argument --budget-usd"),
        (["sweep", "preview", "--dataset-id", "ds_1", *ARMS, "--budget-usd", "nan"],
         "argument --budget-usd"),
        (["sweep", "preview", "--dataset-id", "ds_1", *ARMS, "--pass-k", "0"],
         "argument --pass-k"),
        (["sweep", "preview", "--dataset-id", "ds_1", *ARMS, "--min-pass-rate", "90"],
         "argument --min-pass-rate"),
        (["sweep", "get"], "SWEEP_ID"),
        (["sweep", "cancel", "msw-1", "--wait"], "unrecognized arguments: --wait"),
    ],
)  # fmt: skip
def test_usage_errors_exit_2_before_anything_is_sent(
    argv: list[str], words: str, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    assert words in capsys.readouterr().err
    assert env.calls == []


@pytest.mark.parametrize(
    ("field", "flag"),
    [
        ("arms[1].label", "--arm 'mini=conn_m' (arm 2): "),
        ("arms[0].agentConnectionId", "--arm 'sonnet=conn_s' (arm 1): "),
        ("arms", "--arm: "),
        ("passK", "--pass-k: "),
        ("budgetUsd", "--budget-usd: "),
        ("datasetId", "--dataset-id: "),
    ],
)
def test_a_refused_body_is_said_in_terms_of_the_flag_that_carried_the_field(
    field: str, flag: str, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    refusal = {"error": {"code": "unprocessable", "message": "refused", "field": field}}
    env.reply("POST", "/model-sweeps", Reply(422, refusal))

    code = cli.main(
        ["sweep", "start", "--dataset-id", "ds_1", "--version-label", "v", *ARMS, "--wait"]
    )

    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"neens: error: {flag}refused")
    assert "[HTTP 422 unprocessable]" in err


def test_a_start_whose_answer_was_lost_is_not_sent_again_and_exits_3(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("POST", "/model-sweeps", Reply(504))

    code = cli.main(["sweep", "start", "--dataset-id", "ds_1", "--version-label", "v", *ARMS])

    assert code == 3
    assert env.paths() == ["POST /model-sweeps"]
    err = capsys.readouterr().err
    assert "may or may not have been applied" in err
    assert "follow the one of version v, if it is there" in err


# --- the exit code of every status --------------------------------------------------------------

PASSED_BOTH = [arm("sonnet"), arm("mini")]
ONE_NOT_PASSED = [arm("sonnet"), arm("mini", passed=False, green=1)]
ONE_FAILED = [arm("sonnet"), arm("mini", "failed", passed=None, finished=1, green=0, error="x")]
RUNNING = [arm("sonnet", "running", passed=None, finished=1, green=1), arm("mini", "pending",
           passed=None, finished=0, green=0)]  # fmt: skip


@pytest.mark.parametrize(
    ("status", "arms", "require", "seen", "cancelling", "code"),
    [
        ("completed", PASSED_BOTH, False, "finished", False, 0),
        ("completed", PASSED_BOTH, True, "finished", False, 0),
        ("completed", ONE_NOT_PASSED, False, "finished", False, 0),  # informational
        ("completed", ONE_NOT_PASSED, True, "finished", False, 1),
        ("completed_with_failures", ONE_FAILED, False, "finished", False, 0),
        ("completed_with_failures", ONE_FAILED, True, "finished", False, 1),
        ("completed_with_failures", ONE_FAILED, True, "read", False, 1),
        ("void", PASSED_BOTH, False, "finished", False, 4),
        ("void", PASSED_BOTH, True, "read", False, 4),
        ("void", PASSED_BOTH, False, "read", True, 4),  # even from cancel: void is final
        ("failed", ONE_FAILED, False, "finished", False, 4),
        ("failed", ONE_FAILED, True, "read", True, 4),
        ("cancelled", RUNNING, False, "read", False, 4),
        ("cancelled", RUNNING, True, "finished", False, 4),
        ("cancelled", RUNNING, False, "read", True, 0),  # what `neens sweep cancel` asked for
        ("running", RUNNING, False, "read", False, 0),
        ("pending", RUNNING, False, "read", False, 0),
        ("running", RUNNING, True, "read", False, 3),  # no verdict to require anything of
        ("running", RUNNING, False, "timeout", False, 3),
        ("pending", RUNNING, True, "timeout", False, 3),
    ],
)
def test_exit_code_of_every_sweep_status(
    status: str,
    arms: list[dict[str, Any]],
    require: bool,
    seen: sweep_render.Seen,
    cancelling: bool,
    code: int,
) -> None:
    document = sweep(status, *arms, reason="why" if status in ("failed", "cancelled") else None)
    if status == "void":
        document = {**VOID, "arms": arms}
    conclusion = conclude(
        document, seen=seen, require_all_arms=require, cancelling=cancelling, timeout_s=5
    )
    assert conclusion.exit_code == code
    if code in (1, 3, 4):
        assert conclusion.lines, "a non-zero exit says why"


def test_an_unknown_status_is_an_unexpected_answer_not_a_pass() -> None:
    with pytest.raises(ApiError, match="unexpected answer") as raised:
        conclude(sweep("finished_ish"), seen="finished")
    assert raised.value.exit_code == 2


def test_the_void_exit_code_is_4_and_the_reason_names_the_diverged_arms() -> None:
    conclusion = conclude(VOID, seen="read", require_all_arms=False)
    assert conclusion.exit_code == EXIT_UNTRUSTED == 4
    assert conclusion.lines == [
        f"neens: sweep msw-1 is VOID: {VOID['voidReason']}",
        "neens: diverged arms: mini. The arms did not run under identical conditions, so no "
        "comparison can be drawn from this sweep.",
    ]


def test_require_all_arms_names_each_arm_that_did_not_pass_and_why() -> None:
    arms = [arm("sonnet", passed=False, green=1), arm("mini", "failed", passed=None, finished=1,
            green=0, error="connection refused")]  # fmt: skip
    conclusion = conclude(
        sweep("completed_with_failures", *arms), seen="finished", require_all_arms=True
    )
    assert conclusion.exit_code == 1
    assert conclusion.lines == [
        "neens: --require-all-arms: 2 of 2 arms did not pass pass^k:",
        "neens:   - sonnet: 1/3 runs green",
        "neens:   - mini: failed: connection refused",
    ]


# --- what is shown ------------------------------------------------------------------------------


def test_an_arm_without_k_finished_runs_shows_no_verdict_not_its_greens_as_a_result() -> None:
    table = sweep_table(sweep("running", *RUNNING), "http://neens/model-sweeps/msw-1")
    rows = {line.split()[0]: line for line in table.splitlines() if line.startswith("  ")}
    assert rows["sonnet"].endswith("1 of 1  no verdict")
    assert "PASSED" not in table and "not passed" not in table


def test_the_table_shows_each_arm_its_verdict_and_its_error() -> None:
    failed = arm("self-host", "failed", passed=None, finished=1, green=0, error="refused\nat once")
    arms = [arm("sonnet"), arm("mini", passed=False, green=2), failed]
    table = sweep_table(sweep("completed_with_failures", *arms), "http://neens/model-sweeps/msw-1")
    lines = table.splitlines()
    assert lines[0] == (
        'Model sweep msw-1 "monthly model sweep", version 3f2c9e1: completed_with_failures'
    )
    assert "spent $0.4200 of a $10.00 budget" in lines[1]
    header = next(line for line in lines if line.lstrip().startswith("arm "))
    assert header.split() == ["arm", "model", "status", "runs", "items", "green", "pass^k"]
    rows = {line.split()[0]: line.split() for line in lines if line.startswith("  ")}
    assert rows["sonnet"][-3:] == ["of", "3", "PASSED"]
    assert rows["mini"][-2:] == ["not", "passed"]
    assert rows["self-host"][-1] == "failed"
    assert "  - self-host: refused at once" in lines  # on one line
    assert lines[-1].endswith("http://neens/model-sweeps/msw-1")


def test_a_void_sweep_draws_no_comparison_between_its_arms() -> None:
    table = sweep_table(VOID, "http://neens/model-sweeps/msw-1")
    assert f"VOID: {VOID['voidReason']}" in table
    assert "Diverged arms: mini. No comparison is drawn from this sweep." in table
    assert "pass^k" not in table and "PASSED" not in table and "green" not in table
    rows = live_rows(VOID)
    assert all("green" not in row.text for row in rows)


def test_live_rows_show_each_arm_its_status_runs_items_and_greens() -> None:
    rows = live_rows(sweep("running", *RUNNING, unpricedCalls=2))
    assert [row.text for row in rows] == [
        "neens: sweep msw-1 running: spent $0.4200 (+2 unpriced calls)",
        "neens:   sonnet: running, runs 1/3, items 2/6, 1 green",
        "neens:   mini: pending, runs 0/3, items 0/6, 0 green",
    ]
    assert len({row.key for row in rows}) == 3


def test_the_preview_shows_unpriced_never_zero_and_says_the_total_is_partial() -> None:
    text = preview_table(PREVIEW)
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith("  ")}
    assert rows["sonnet"] == ["sonnet", "claude-sonnet-4-5", "6", "$1.23", "history"]
    assert rows["self-host"] == ["self-host", "-", "6", "unpriced", "unpriced"]
    assert rows["total"] == ["total", "12", "$1.23"]
    assert "  partial: 1 of 2 arms unpriced (self-host); the total counts the priced arms only" in (
        text.splitlines()
    )
    assert "  - sonnet: mean of 412 earlier calls through this connection" in text.splitlines()
    assert "Budget: none given (--budget-usd)" in text


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"budgetUsd": 1, "wouldRefuse": True, "refusal": "estimate $1.23 is over $1.00"},
         "Budget $1.00: starting it would be REFUSED: estimate $1.23 is over $1.00"),
        ({"budgetUsd": 10, "wouldRefuse": False, "partial": False},
         "Budget $10.00: starting it would not be refused on the budget."),
        ({"budgetUsd": 10, "wouldRefuse": False},
         "the estimate leaves unpriced arms out, so they are not checked against it"),
    ],
)  # fmt: skip
def test_the_preview_says_whether_starting_would_be_refused_on_the_budget(
    fields: dict[str, Any], words: str
) -> None:
    assert words in preview_table({**PREVIEW, **fields})


def test_a_preview_with_no_priced_arm_totals_unpriced() -> None:
    document = {**PREVIEW, "estimatedUsd": None, "arms": [PREVIEW["arms"][1]]}
    assert sweep_render.total_usd(document) == "unpriced"


@pytest.mark.parametrize(
    ("usd", "shown"),
    [(0, "$0.00"), (0.00004, "<$0.0001"), (0.0123, "$0.0123"), (1234.5, "$1,234.50")],
)
def test_amounts_are_never_rounded_away(usd: float, shown: str) -> None:
    assert sweep_render._usd(usd) == shown


# --- the live board -----------------------------------------------------------------------------


def test_in_a_log_a_row_is_printed_again_only_when_it_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(waiting.time, "monotonic", lambda: now[0])
    stream = io.StringIO()
    board = Board(stream, interactive=False)

    board.update([BoardRow("a", "a: running, items 0/6", "running 0"), BoardRow("b", "b", "x")])
    board.update([BoardRow("a", "a: running, items 0/6", "running 0"), BoardRow("b", "b", "x")])
    now[0] += 1
    board.update([BoardRow("a", "a: running, items 1/6", "running 0")])  # throttled
    board.update([BoardRow("a", "a: running, items 3/6", "running 1")])  # a run finished: shown
    now[0] += waiting.LOG_EVERY_S
    board.update([BoardRow("a", "a: running, items 4/6", "running 1")])  # 10 s later: shown

    assert stream.getvalue().splitlines() == [
        "a: running, items 0/6",
        "b",
        "a: running, items 3/6",
        "a: running, items 4/6",
    ]


def test_on_a_terminal_the_rows_are_redrawn_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting.shutil, "get_terminal_size", lambda: os.terminal_size((80, 24)))
    stream = io.StringIO()
    board = Board(stream, interactive=True)

    board.update([BoardRow("a", "one", ""), BoardRow("b", "two", "")])
    board.log("a log line")
    board.update([BoardRow("a", "ONE", ""), BoardRow("b", "TWO", "")])
    board.close()

    assert (
        stream.getvalue()
        == (
            "one\ntwo\n"
            "\x1b[2F\x1b[J" + "a log line\n" + "one\ntwo\n"  # the log line goes above the rows
            "\x1b[2F\x1b[J" + "ONE\nTWO\n"
            "\x1b[2F\x1b[J"
        )
    )


# --- following a sweep --------------------------------------------------------------------------


def test_start_wait_follows_each_arm_until_terminal_then_prints_the_json(
    env: Scripted, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting.ObjectPoller, "sleep", lambda self: None)
    env.reply("POST", "/model-sweeps", Reply(201, sweep("pending", *RUNNING)))
    final = sweep("completed_with_failures", *ONE_FAILED)
    env.reply(
        "GET", "/model-sweeps/msw-1", Reply(200, sweep("running", *RUNNING)), Reply(200, final)
    )

    code = cli.main(
        [
            "sweep",
            "start",
            "--dataset-id",
            "ds_1",
            "--version-label",
            "v",
            *ARMS,
            "--wait",
            "--json",
        ]
    )

    assert code == 0  # informational: an arm failed, and nothing required every arm to pass
    out = capsys.readouterr()
    assert json.loads(out.out) == final
    assert env.paths() == [
        "POST /model-sweeps",
        "GET /model-sweeps/msw-1",
        "GET /model-sweeps/msw-1",
    ]
    assert "neens:   mini: failed, runs 1/3, items 2/6, 0 green" in out.err
    assert "Model sweep msw-1" in out.err  # the table goes to stderr under --json


def test_get_of_a_void_sweep_exits_4_and_prints_the_reason_on_stderr_even_with_json(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", "/model-sweeps/msw-1", Reply(200, VOID))

    code = cli.main(["sweep", "get", "msw-1", "--json"])

    assert code == 4
    out = capsys.readouterr()
    assert json.loads(out.out) == VOID
    assert f"neens: sweep msw-1 is VOID: {VOID['voidReason']}" in out.err


def test_get_wait_that_runs_out_of_time_exits_3_with_the_sweep_as_last_read(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", "/model-sweeps/msw-1", Reply(200, sweep("running", *RUNNING)))

    code = cli.main(["sweep", "get", "msw-1", "--wait", "--timeout", "0.01", "--json"])

    assert code == 3
    out = capsys.readouterr()
    assert json.loads(out.out)["status"] == "running"
    assert "no verdict after 0.01 s (--timeout)" in out.err
    assert "follow it again with `neens sweep get msw-1 --wait`" in out.err


def test_a_server_gone_while_waiting_exits_3_and_says_how_to_follow_again(
    env: Scripted, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting.ObjectPoller, "sleep", lambda self: None)
    env.reply("GET", "/model-sweeps/msw-1", Reply(200, sweep("running", *RUNNING)), Reply(503))

    code = cli.main(["sweep", "get", "msw-1", "--wait", "--json"])

    assert code == 3
    out = capsys.readouterr()
    assert json.loads(out.out)["status"] == "running"
    assert "the server keeps it: once it is back, follow it again with" in out.err
    assert out.err.splitlines()[-1].startswith("neens: error: could not reach Neens")


@pytest.mark.parametrize(
    ("answer", "code", "words"),
    [
        (sweep("cancelled", *RUNNING, reason="cancelled by request"), 0,
         "neens: sweep msw-1 is cancelled: cancelled by request"),
        (sweep("completed"), 0, ""),  # already finished: returned unchanged
        (VOID, 4, "is VOID"),
        (sweep("failed", *ONE_FAILED, reason="every arm failed"), 4, "failed: every arm failed"),
    ],
)  # fmt: skip
def test_cancel_exits_0_once_the_sweep_is_cancelled_and_by_the_table_otherwise(
    answer: dict[str, Any], code: int, words: str, env: Scripted,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    env.reply("POST", "/model-sweeps/msw-1/cancel", Reply(200, answer))

    assert cli.main(["sweep", "cancel", "msw-1"]) == code
    out = capsys.readouterr()
    assert words in out.err
    assert out.out.startswith("Model sweep msw-1")


def test_reading_a_cancelled_sweep_exits_4_with_its_reason(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = "budget reached: $10.0100 spent of the $10.00 budget"
    env.reply("GET", "/model-sweeps/msw-1", Reply(200, sweep("cancelled", *RUNNING, reason=reason)))

    assert cli.main(["sweep", "get", "msw-1"]) == 4
    out = capsys.readouterr()
    assert f"was cancelled: {reason}; its evidence is incomplete" in out.err
    assert f"Reason: {reason}" in out.out


def test_an_unknown_sweep_id_is_a_usage_error(
    env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["sweep", "get", "msw-nope"]) == 2
    assert "[HTTP 404 not_found]" in capsys.readouterr().err


# --- docs/cli.md --------------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[3] / "docs" / "cli.md"


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_every_flag_of_every_sweep_command_is_documented() -> None:
    section = _section(DOCS.read_text(encoding="utf-8"), "## `neens sweep`")
    parser = cli.build_parser(with_plugins=False)
    group = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    ).choices["sweep"]
    verbs = next(
        action for action in group._actions if isinstance(action, argparse._SubParsersAction)
    ).choices
    assert set(verbs) == {"preview", "start", "get", "cancel", "decide", "export"}
    for verb, verb_parser in verbs.items():
        assert f"### `neens sweep {verb}`" in section
        for action in verb_parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in section, f"{verb} {flag} is not in docs/cli.md"


def test_the_exit_code_table_has_one_row_per_code_the_cli_uses() -> None:
    table = _section(DOCS.read_text(encoding="utf-8"), "## Exit codes")
    codes = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
    assert codes[1:] == ["0", "1", "2", "3", str(EXIT_UNTRUSTED), "130", str(EXIT_BROKEN_PIPE)]


def test_on_a_terminal_a_row_wider_than_the_screen_is_cut_so_the_redraw_stays_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(waiting.shutil, "get_terminal_size", lambda: os.terminal_size((30, 24)))
    stream = io.StringIO()
    board = Board(stream, interactive=True)

    board.update([BoardRow("a", "x" * 100, "")])

    assert stream.getvalue() == "x" * 28 + "…\n"
