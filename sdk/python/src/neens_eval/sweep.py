"""`neens sweep preview|start|get|cancel|decide`: compare models with a model sweep from a
terminal or CI.

    neens sweep preview --dataset-id ds_… --arm sonnet=conn_… --arm mini=conn_… --json
    neens sweep start --dataset-id ds_… --version-label "$GIT_SHA" --arm … --arm … --wait
    neens sweep get msw-… --json
    neens sweep cancel msw-…
    neens sweep decide --sweep-id msw-… --bar 0.9 --require-winner --json

The estimate first, then the decision: `preview` writes nothing and spends nothing. `start`
creates the sweep; with `--wait` each arm's own state is shown live on standard error until the
sweep is terminal, then the result is printed (the server's JSON on stdout with `--json`). The
exit code is `sweep_render.conclude`'s: a sweep is informational, except that a void, failed or
cancelled one exits 4 and `--require-all-arms` exits 1 unless every arm passed. `decide` reads the
server's verdict (`neens_eval.sweep_decide`), following the sweep first with `--wait`.

A start request is never sent twice (see `neens_eval.client`): when its answer is lost the command
exits 3 and says how to look for the sweep it may have created.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from neens_eval.client import Client, RetryNotice, RetryPolicy, expect_object
from neens_eval.errors import EXIT_UNREACHABLE, ApiError, NeensClientError, Unreachable
from neens_eval.sweep_args import add_commands, refused_as_usage, sweep_body
from neens_eval.sweep_render import (
    SWEEP_TERMINAL,
    Conclusion,
    Seen,
    conclude,
    live_rows,
    preview_table,
    sweep_table,
)
from neens_eval.waiting import Board, ObjectPoller, ObjectWait, wait_until_terminal

if TYPE_CHECKING:
    from neens_eval.cli import Subparsers

RETRY_NOTICE_EVERY_S = 10.0


def register(subparsers: Subparsers) -> None:
    """Add the `sweep` group with its `preview`, `start`, `get`, `cancel`, `decide` and `export`
    commands."""
    from neens_eval.sweep_export import add_export  # here: it imports this module

    commands = add_commands(
        subparsers, preview=preview_command, start=start_command, get=get_command,
        cancel=cancel_command, decide=decide_command,
    )  # fmt: skip
    add_export(commands)


def preview_command(args: argparse.Namespace) -> int:
    """`neens sweep preview`: what the sweep would call and cost. Exits 0 whatever the estimate
    (a budget the estimate is over is reported, and is what `start` would refuse)."""
    body = sweep_body(args, creating=False)
    board = Board(sys.stderr)
    client = make_client(args, board)
    preview = expect_object(
        _refusals_as_flags(args, lambda: client.post("/model-sweeps/preview", body)),
        "POST /model-sweeps/preview",
    )
    if args.as_json:
        sys.stderr.write(preview_table(preview))
        write_json(preview)
    else:
        sys.stdout.write(preview_table(preview))
    return 0


def start_command(args: argparse.Namespace) -> int:
    """`neens sweep start`: create the sweep; with --wait, follow it to the end."""
    body = sweep_body(args, creating=True)
    board = Board(sys.stderr)
    client = make_client(args, board)
    try:
        created = _refusals_as_flags(args, lambda: client.post("/model-sweeps", body))
    except Unreachable as exc:
        if not exc.maybe_applied:
            raise
        raise Unreachable(
            f'{exc}: list the newest sweeps (curl -sH "Authorization: Bearer $NEENS_API_KEY" '
            f"{client.base_url}/model-sweeps) and follow the one of version "
            f"{body['versionLabel']}, if it is there, with `neens sweep get SWEEP_ID --wait`",
            maybe_applied=True,
        ) from None
    sweep = _sweep(created, "POST /model-sweeps")
    board.log(
        f"neens: started sweep {sweep['id']} ({len(body['arms'])} arms, "
        f"pass^{sweep.get('passK')}); follow it with `neens sweep get {sweep['id']} --wait`"
    )
    if not args.wait:
        return _finish(client, sweep, args, "read")
    return _follow(client, sweep, args, board)


def get_command(args: argparse.Namespace) -> int:
    """`neens sweep get SWEEP_ID`: print the sweep; with --wait, follow it to the end."""
    board = Board(sys.stderr)
    client = make_client(args, board)
    path = sweep_path(args.sweep_id)
    sweep = _sweep(client.get(path), f"GET {path}")
    if not args.wait or sweep.get("status") in SWEEP_TERMINAL:
        return _finish(client, sweep, args, "finished" if args.wait else "read")
    return _follow(client, sweep, args, board)


def cancel_command(args: argparse.Namespace) -> int:
    """`neens sweep cancel SWEEP_ID`: cancel it; a finished sweep comes back as it was."""
    board = Board(sys.stderr)
    client = make_client(args, board)
    path = sweep_path(args.sweep_id) + "/cancel"
    sweep = _sweep(client.post(path, None), f"POST {path}")
    return _finish(client, sweep, args, "read", cancelling=True)


def decide_command(args: argparse.Namespace) -> int:
    """`neens sweep decide`: the server's verdict over the sweep (`neens_eval.sweep_decide`)."""
    from neens_eval.sweep_decide import decide  # here: it imports this module

    return decide(args)


def _follow(client: Client, sweep: dict[str, Any], args: argparse.Namespace, board: Board) -> int:
    """Follow the sweep to the end (or --timeout); then print it and return the exit code."""
    waited = follow(
        client,
        str(sweep["id"]),
        args,
        board,
        first=sweep,
        again=f"`neens sweep get {sweep['id']} --wait`",
        write_last=args.as_json,
    )
    seen: Seen = "finished" if waited.outcome == "finished" else "timeout"
    return _finish(client, waited.document, args, seen)


def follow(
    client: Client,
    sweep_id: str,
    args: argparse.Namespace,
    board: Board,
    *,
    first: dict[str, Any] | None,
    again: str,
    write_last: bool,
) -> ObjectWait:
    """Poll the sweep, each arm's state live on stderr, until it is terminal or --timeout ran
    out. When the server stops answering, say what was last seen and how to follow it `again`
    (writing the sweep as last read on stdout when `write_last`), and raise."""
    poller = ObjectPoller(client, sweep_path(sweep_id))
    board.log(f"neens: waiting for sweep {sweep_id} (timeout {args.timeout:g} s)")
    last = first

    def show(document: dict[str, Any]) -> None:
        nonlocal last
        last = _sweep(document, f"GET {poller.path}")
        board.update(live_rows(last))

    try:
        waited = wait_until_terminal(
            poller, terminal=SWEEP_TERMINAL, timeout_s=args.timeout, show=show, first=first
        )
    except NeensClientError as exc:
        board.close()
        if exc.exit_code == EXIT_UNREACHABLE:
            when = _utc(poller.seen_at) if poller.seen_at is not None else "its start"
            status = last.get("status") if last is not None else "not read yet"
            board.log(
                f"neens: no verdict for sweep {sweep_id}; as last seen ({when}) it was "
                f"{status}; the server keeps it: once it is back, follow it again with {again}"
            )
            if write_last and last is not None:
                write_json(last)
        raise
    board.close()
    return waited


def _finish(
    client: Client,
    sweep: dict[str, Any],
    args: argparse.Namespace,
    seen: Seen,
    *,
    cancelling: bool = False,
) -> int:
    """Print the sweep (the table, or the JSON on stdout and the table on stderr) and the lines
    that explain the exit code, and return it."""
    conclusion: Conclusion = conclude(
        sweep,
        seen=seen,
        require_all_arms=bool(getattr(args, "require_all_arms", False)),
        cancelling=cancelling,
        timeout_s=getattr(args, "timeout", None),
    )
    table = sweep_table(sweep, f"{client.base_url}{sweep_path(str(sweep['id']))}")
    if args.as_json:
        sys.stderr.write(table)
        write_json(sweep)
    else:
        sys.stdout.write(table)
        sys.stdout.flush()
    for line in conclusion.lines:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
    return conclusion.exit_code


def _refusals_as_flags(args: argparse.Namespace, send: Callable[[], Any]) -> Any:
    """Send; a 4xx refusal naming a field of the body is said in terms of its flag."""
    try:
        return send()
    except ApiError as exc:
        usage = refused_as_usage(exc, args.arms)
        if usage is None:
            raise
        raise usage from exc


def _sweep(answer: Any, what: str) -> dict[str, Any]:
    sweep = expect_object(answer, what)
    if not isinstance(sweep.get("id"), str):
        raise ApiError(200, "unexpected_response", f"{what} answered without a sweep id")
    return sweep


def _utc(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def sweep_path(sweep_id: str) -> str:
    """The API path of the sweep."""
    return f"/model-sweeps/{urllib.parse.quote(sweep_id.strip(), safe='')}"


def write_json(document: dict[str, Any]) -> None:
    """The server's JSON answer on stdout, as one line."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def make_client(args: argparse.Namespace, board: Board) -> Client:
    """The client from the environment, retrying for --retry-window (or NEENS_RETRY_WINDOW),
    saying so on stderr at once and then every `RETRY_NOTICE_EVERY_S` seconds."""
    retry = RetryPolicy.from_env()
    if args.retry_window is not None:
        retry = retry.with_window(args.retry_window, "--retry-window")
    client = Client.from_env(retry=retry)
    said_at: list[float] = []

    def on_retry(notice: RetryNotice) -> None:
        if said_at and notice.waited_s - said_at[-1] < RETRY_NOTICE_EVERY_S:
            return
        said_at.append(notice.waited_s)
        board.log(notice.describe())

    client.on_retry = on_retry
    return client
