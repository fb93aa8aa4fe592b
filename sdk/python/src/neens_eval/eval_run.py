"""`neens eval run` and `neens eval push`: drive a pre-prod run to a verdict and exit with it.

    neens eval run --create --dataset support-golden --version-label "$GIT_SHA" -- python -m myagent
    neens eval run --run-id ppr_… -- python -m myagent
    neens eval push --dataset support-golden --version-label "$GIT_SHA" --agent-connection conn_…
    neens eval push --run-id ppr_…     # follow any run again, after a restart or a lost job

`run` (you run the agent) fetches the run's frozen prompts and invokes the command once per item
still pending, with the prompt on stdin and in $NEENS_ITEM_INPUT and the correlation attributes
in OTEL_RESOURCE_ATTRIBUTES; `push` creates a run in which Neens calls the agent connection.
Both then wait for the verdict, evaluate the gate policy's client-side rules, print the result,
and exit: 0 passed, 1 failed, 2 usage or configuration error, 3 no verdict (see summary.py).

An item whose command fails or times out never sends a trace. Once every other item is captured
(and a short grace period has passed, in case its trace was exported after all), the command
records it on the server as an error (`POST /preprod-evals/{id}/items/{item}/error`), so the run
finishes with that failure counted in its verdict; the command still exits 1, since part of the
golden set was not run. When the server cannot record it, the run is left open and
`neens eval run --run-id` runs just the missing items after the fix.

Every request is retried while the server does not answer, for the retry window (`--retry-window`,
`NEENS_RETRY_WINDOW`, 60 s by default), so a server restart while a run is waited for costs a
pause, not the CI job. A create request that got no answer is not sent again: once the server
answers, the run it may have created is looked up, and followed when it is found.

This module drives a run (invoking the agent, waiting for the verdict); the flags live in
`eval_args`, creating a run in `eval_create`, and reading and printing the result in
`eval_results`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

from neens_eval import correlation
from neens_eval.client import Client, RetryNotice, RetryPolicy
from neens_eval.errors import EXIT_UNREACHABLE, ApiError, ConfigError, NeensClientError
from neens_eval.eval_args import (
    add_commands,
    policy_from_args,
    refuse_create_flags,
    refuse_project_id,
    require_create_fields,
)
from neens_eval.eval_create import create_run
from neens_eval.eval_results import emit, no_verdict, read_result
from neens_eval.gate_policy import GatePolicy
from neens_eval.invoke import Invoker, ItemRun, check_command
from neens_eval.summary import describe_counts
from neens_eval.waiting import TERMINAL, LastSeen, Poller, Progress, wait_for_verdict

if TYPE_CHECKING:
    from neens_eval.cli import Subparsers


def register(subparsers: Subparsers) -> None:
    """Add the `eval` group with its `run` and `push` commands."""
    add_commands(subparsers, run=run_command, push=push_command)


SERVER_POLL_DURING_RUN_S: Final = 2.0


def _report_only(
    command: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """With --no-gate, a verdict that could not be reached (the server went away, exit 3) is
    reported and the command exits 0, as every other gate outcome does; usage errors (2) stay."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except NeensClientError as exc:
            if not args.no_gate or exc.exit_code != EXIT_UNREACHABLE:
                raise
            sys.stderr.write(
                f"neens: error: {exc}\nneens: --no-gate: no verdict, reported only, exiting 0\n"
            )
            return 0

    run.__doc__ = command.__doc__
    return run


@_report_only
def run_command(args: argparse.Namespace) -> int:
    """`neens eval run`: create or resume a runner-mode run, invoke the agent, gate."""
    refuse_project_id(args)
    if args.create == bool(args.run_id):
        raise ConfigError(
            "give either --create (with --dataset and --version-label) to start a new run, or "
            "--run-id ppr_… to drive an existing one"
        )
    if args.create:
        require_create_fields(args)
        check_command(args.command, os.environ)
    else:
        refuse_create_flags(args, "--run-id")
        if args.command:
            check_command(args.command, os.environ)
    policy = policy_from_args(args)
    progress = Progress(sys.stderr)
    client = _client(args, progress)
    with _terminate_as_interrupt():
        if args.create:
            run = create_run(client, args, policy, runner_mode="runner", progress=progress)
            progress.log(
                f"neens: created run {run['id']} ({run.get('itemCount')} items); "
                f"{_follow_hint(run, args.command)}"
            )
            return _drive(client, run, args, policy, progress)
        run = Poller(client, args.run_id).run()
        _warn_gate_not_applied(policy, run, progress)
        if run.get("runnerMode") == "push" or not args.command:
            return _follow(client, run, args, policy, progress)
        return _drive(client, run, args, policy, progress)


@_report_only
def push_command(args: argparse.Namespace) -> int:
    """`neens eval push`: create a push-mode run (or follow one by id), wait for it, gate."""
    refuse_project_id(args)
    if args.run_id:
        refuse_create_flags(args, "--run-id")
    else:
        require_create_fields(args)
        if not (args.agent_connection or "").strip():
            raise ConfigError(
                "--agent-connection is required to create a push run: the agent connection "
                "Neens calls (conn_…); or give --run-id ppr_… to follow an existing run"
            )
    policy = policy_from_args(args)
    progress = Progress(sys.stderr)
    client = _client(args, progress)
    if args.run_id:
        run = Poller(client, args.run_id).run()
        _warn_gate_not_applied(policy, run, progress)
        return _follow(client, run, args, policy, progress)
    run = create_run(client, args, policy, runner_mode="push", progress=progress)
    progress.log(
        f"neens: created push run {run['id']} ({run.get('itemCount')} items), Neens is calling "
        f"{args.agent_connection}; {_follow_hint(run)}"
    )
    return _conclude(client, run, args, policy, progress, runs={})


def _follow(
    client: Client,
    run: dict[str, Any],
    args: argparse.Namespace,
    policy: GatePolicy,
    progress: Progress,
) -> int:
    """Wait for an existing run's verdict and gate on it, without running anything."""
    mode = run.get("runnerMode")
    if mode == "push":
        progress.log(f"neens: following push run {run['id']}: Neens calls the agent itself")
    elif run.get("status") not in TERMINAL and _run_count(run, "pending"):
        progress.log(
            f"neens: following runner run {run['id']} without an agent command: its "
            f"{_run_count(run, 'pending')} pending items are left to whatever runs them (give the "
            f"command after -- with `neens eval run --run-id` to run them here)"
        )
    return _conclude(client, run, args, policy, progress, runs={})


def _drive(
    client: Client,
    run: dict[str, Any],
    args: argparse.Namespace,
    policy: GatePolicy,
    progress: Progress,
) -> int:
    poller = Poller(client, str(run["id"]))
    try:
        items = poller.items()
    except NeensClientError as exc:
        no_verdict(client, run, args, policy, progress, exc, LastSeen(datetime.now(UTC), run))
    pending = [item for item in items if item.get("status") == "pending"]
    if run.get("status") in TERMINAL:
        progress.log(f"neens: run {run['id']} is already {run['status']}; nothing to run")
        pending = []
    elif len(pending) < len(items):
        progress.log(
            f"neens: already captured: {len(items) - len(pending)} of {len(items)} items; "
            f"running the {len(pending)} still pending"
        )
    env = {**os.environ}
    env.update(correlation.exporter_env(os.environ, client.base_url, _api_key()))
    runs = _run_items(poller, run, pending, env, args, progress)
    return _conclude(client, run, args, policy, progress, runs=runs)


def _run_items(
    poller: Poller,
    run: dict[str, Any],
    pending: Sequence[Mapping[str, Any]],
    env: Mapping[str, str],
    args: argparse.Namespace,
    progress: Progress,
) -> dict[str, ItemRun]:
    """Invoke the command for each pending item, `--concurrency` at a time."""
    if not pending:
        return {}
    run_id, label = str(run["id"]), str(run.get("versionLabel", ""))
    invoker = Invoker(args.command, item_timeout=args.item_timeout)
    progress.log(
        f"neens: running {len(pending)} item{'s' if len(pending) != 1 else ''} with "
        f"`{' '.join(args.command)}` (concurrency {args.concurrency})"
    )
    long_prompts: list[str] = []
    lock = threading.Lock()

    def one(item: Mapping[str, Any]) -> ItemRun:
        item_id, prompt = str(item["item_id"]), str(item.get("input") or "")
        item_env, fits = correlation.item_env(
            env, run_id=run_id, item_id=item_id, version_label=label, prompt=prompt
        )
        if not fits:
            with lock:
                long_prompts.append(item_id)
        return invoker.run(item_id, prompt, item_env)

    results: dict[str, ItemRun] = {}
    started = time.monotonic()
    server: dict[str, Any] = run
    last_poll = started
    pool = ThreadPoolExecutor(max_workers=args.concurrency, thread_name_prefix="neens-item")
    try:
        futures: set[Future[ItemRun]] = {pool.submit(one, item) for item in pending}
        while futures:
            done, futures = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                result = future.result()
                results[result.item_id] = result
                if not result.ok:
                    progress.log(f"neens: item {result.item_id}: {result.reason}")
            now = time.monotonic()
            if futures and now - last_poll >= SERVER_POLL_DURING_RUN_S:
                last_poll = now
                try:
                    server = poller.run()
                except NeensClientError:
                    pass  # only for the progress line; the wait that follows reports errors
            failed = sum(1 for r in results.values() if not r.ok)
            progress.update(
                f"neens: {run_id}: {len(results)}/{len(pending)} items run"
                f"{f' ({failed} failed)' if failed else ''}, "
                f"{_captured(server)}/{server.get('itemCount', '?')} captured "
                f"[{now - started:.0f}s]",
                key="running items",
            )
    except BaseException:
        # In this order: once the worker running an item is freed by the kill, it must find
        # neither a queued item to pick up nor leave to start a command.
        invoker.stop()
        pool.shutdown(wait=False, cancel_futures=True)
        invoker.kill_all()
        raise
    pool.shutdown()
    for item_id in long_prompts:
        progress.log(
            f"neens: the prompt of item {item_id} is too long for ${correlation.ITEM_INPUT_VAR}; "
            f"it was given on standard input only"
        )
    return results


def _conclude(
    client: Client,
    run: dict[str, Any],
    args: argparse.Namespace,
    policy: GatePolicy,
    progress: Progress,
    *,
    runs: Mapping[str, ItemRun],
) -> int:
    """Wait for the verdict, read everything the summary needs, print it, return the exit code."""
    run_id = str(run["id"])
    poller = Poller(client, run_id)
    poller.last_seen = LastSeen(datetime.now(UTC), run)
    failed_locally = {item_id for item_id, result in runs.items() if not result.ok}
    if runs:
        progress.log(
            f"neens: all {len(runs)} commands finished; waiting for {run_id}'s verdict "
            f"(timeout {args.timeout:g} s)"
        )
    else:
        progress.log(f"neens: waiting for {run_id}'s verdict (timeout {args.timeout:g} s)")
    reported: set[str] = set()

    def report_failed(item_ids: list[str]) -> bool:
        for item_id in item_ids:
            try:
                client.post(
                    f"{poller.path}/items/{urllib.parse.quote(item_id, safe='')}/error",
                    {"reason": f"not run: {runs[item_id].reason}"},
                )
            except ApiError as exc:
                if exc.status != 409:  # 409: its trace arrived after all; the verdict stands
                    progress.log(f"neens: could not record item {item_id} as an error: {exc}")
                    return False
            reported.add(item_id)
        progress.log(
            f"neens: recorded {len(item_ids)} item{'s' if len(item_ids) > 1 else ''} whose "
            f"command failed as errors on the server; waiting for the verdict"
        )
        return True

    try:
        waited = wait_for_verdict(
            poller,
            timeout_s=args.timeout,
            progress=progress,
            describe=_describe_progress(run_id),
            failed_locally=failed_locally,
            report_failed=report_failed,
        )
        progress.close()
        result = read_result(client, poller, waited, args, policy, runs, reported)
    except NeensClientError as exc:
        progress.close()
        no_verdict(client, run, args, policy, progress, exc, poller.last_seen)
    emit(result, args)
    return result.exit_code


def _warn_gate_not_applied(policy: GatePolicy, run: Mapping[str, Any], progress: Progress) -> None:
    if policy.gate and policy.gate != run.get("gate"):
        progress.log(
            f"neens: warning: the gate block of {policy.source} is not applied: {run.get('id')} "
            f"was created with the gate {json.dumps(run.get('gate'))}, which the server keeps"
        )


def _client(args: argparse.Namespace, progress: Progress) -> Client:
    """The client from the environment, retrying for `--retry-window` (or NEENS_RETRY_WINDOW),
    and showing on the progress line that Neens is being waited for."""
    retry = RetryPolicy.from_env()
    if args.retry_window is not None:
        retry = retry.with_window(args.retry_window, "--retry-window")
    client = Client.from_env(retry=retry)

    def on_retry(notice: RetryNotice) -> None:
        progress.update(f"{notice.describe()} [{notice.waited_s:.0f}s]", key="retrying")

    client.on_retry = on_retry
    return client


def _describe_progress(run_id: str) -> Callable[[dict[str, Any], float], str]:
    def describe(run: dict[str, Any], elapsed: float) -> str:
        return f"neens: {run_id} {run.get('status')}: {describe_counts(run)} [{elapsed:.0f}s]"

    return describe


def _run_count(run: Mapping[str, Any], key: str) -> int:
    counts = run.get("counts")
    value = counts.get(key) if isinstance(counts, dict) else None
    return value if isinstance(value, int) else 0


def _follow_hint(run: Mapping[str, Any], command: Sequence[str] = ()) -> str:
    """How to follow a run again from another shell, or after this command was stopped."""
    if command:
        return (
            f"follow it again with `neens eval run --run-id {run['id']} -- {shlex.join(command)}`"
        )
    return f"follow it again with `neens eval push --run-id {run['id']}`"


def _captured(run: Mapping[str, Any]) -> int:
    """Items whose trace arrived (scored ones included), as the server counts them."""
    counts = run.get("counts")
    if not isinstance(counts, dict):
        return 0
    return sum(int(counts.get(key) or 0) for key in ("captured", "scored"))


def _api_key() -> str:
    return os.environ.get("NEENS_API_KEY", "").strip()


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM (a cancelled CI job) like Ctrl-C, so the agent commands are killed too."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
