"""`neens sweep decide`: read the server's verdict over a sweep, from a terminal or CI.

    neens sweep decide --sweep-id msw-…
    neens sweep decide --sweep-id msw-… --bar 0.9 --baseline-arm msa-… --wait
    neens sweep decide --sweep-id msw-… --bar 0.9 --require-winner --json

The comparison (`GET /model-sweeps/{id}/comparison`) is read first, so a --bar or --baseline-arm
the server refuses is a usage error at once (exit 2, naming the flag), never after an hour of
waiting. With `--wait`, a sweep that is not finished is then followed like `neens sweep get
--wait` follows it (each arm's state live on standard error), and the comparison is read again
once the sweep is terminal, or when --timeout ran out (exit 3, the comparison as it then stood
printed). `--json` writes the comparison exactly as the server answered it; the report for a
person goes to standard error then. The exit code is `decision_render.conclude_decision`'s.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from neens_eval.client import Client, expect_object
from neens_eval.decision_render import conclude_decision, decision_report
from neens_eval.errors import ApiError, NeensClientError
from neens_eval.sweep import follow, make_client, sweep_path, write_json
from neens_eval.sweep_args import (
    DECIDE_FIELD_FLAGS,
    DecideRequest,
    decide_request,
    refused_as_usage,
)
from neens_eval.sweep_render import SWEEP_TERMINAL, Seen
from neens_eval.waiting import Board

EXPLAINED_STATUSES = frozenset({"void", "failed", "cancelled"})
"""Statuses whose exit line gives the sweep's own reason, read from the sweep."""


def decide(args: argparse.Namespace) -> int:
    """Read the comparison (after following the sweep to its end with --wait), print it and
    return the exit code."""
    request = decide_request(args)
    board = Board(sys.stderr)
    client = make_client(args, board)
    comparison = _read(client, request)
    sweep: dict[str, Any] | None = None
    seen: Seen = "read"
    if args.wait:
        seen = "finished"
        if comparison.get("status") not in SWEEP_TERMINAL:
            waited = follow(
                client,
                request.sweep_id,
                args,
                board,
                first=None,
                again=f"`neens sweep decide {request.sweep_id} --wait`",
                write_last=False,
            )
            sweep = waited.document
            seen = "finished" if waited.outcome == "finished" else "timeout"
            comparison = _read(client, request)
    status = comparison.get("status")
    if status in EXPLAINED_STATUSES and (sweep is None or sweep.get("status") != status):
        sweep = _sweep_for_its_reason(client, request.sweep_id, board)
    conclusion = conclude_decision(
        comparison,
        seen=seen,
        require_winner=args.require_winner,
        timeout_s=args.timeout,
        sweep=sweep,
    )
    report = decision_report(
        comparison, client.url(_comparison_path(request.sweep_id), request.params())
    )
    if args.as_json:
        sys.stderr.write(report)
        write_json(comparison)
    else:
        sys.stdout.write(report)
        sys.stdout.flush()
    for line in conclusion.lines:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
    return conclusion.exit_code


def _read(client: Client, request: DecideRequest) -> dict[str, Any]:
    """The comparison; a refusal naming `bar`, `baselineArm` or the sweep id is said in terms of
    its flag."""
    path = _comparison_path(request.sweep_id)
    try:
        answer = client.get(path, request.params())
    except ApiError as exc:
        usage = refused_as_usage(exc, flags=DECIDE_FIELD_FLAGS)
        if usage is None:
            raise
        raise usage from exc
    comparison = expect_object(answer, f"GET {path}")
    if not isinstance(comparison.get("sweepId"), str):
        raise ApiError(200, "unexpected_response", f"GET {path} answered without a sweep id")
    return comparison


def _sweep_for_its_reason(client: Client, sweep_id: str, board: Board) -> dict[str, Any] | None:
    """The sweep, for the reason it is void, failed or cancelled; None when it cannot be read
    (the exit code does not depend on it, so an outage here does not turn 4 into 3)."""
    path = sweep_path(sweep_id)
    try:
        return expect_object(client.get(path), f"GET {path}")
    except NeensClientError as exc:
        board.log(f"neens: the sweep's reason could not be read ({exc})")
        return None


def _comparison_path(sweep_id: str) -> str:
    return sweep_path(sweep_id) + "/comparison"
