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
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Final, NoReturn

from neens_eval import correlation
from neens_eval.client import RETRY_WINDOW_VAR, Client, RetryNotice, RetryPolicy, parse_window
from neens_eval.errors import (
    EXIT_UNREACHABLE,
    ApiError,
    ConfigError,
    NeensClientError,
    Unreachable,
)
from neens_eval.gate_policy import (
    POLICY_ENV_VAR,
    GatePolicy,
    RunData,
    check_server_gate,
    evaluate,
    flag_rule,
    load_policy,
    with_flag_rules,
)
from neens_eval.invoke import Invoker, ItemRun, check_command
from neens_eval.summary import (
    EvalResult,
    NotRun,
    Outcome,
    describe_last_seen,
    follow_command,
    write_json,
    write_summary,
)
from neens_eval.waiting import TERMINAL, LastSeen, Poller, Progress, WaitResult, wait_for_verdict

if TYPE_CHECKING:
    from neens_eval.cli import Subparsers

DEFAULT_TIMEOUT_S: Final = 600.0
DEFAULT_ITEM_TIMEOUT_S: Final = 300.0
SERVER_POLL_DURING_RUN_S: Final = 2.0
RECENT_RUNS: Final = 50
_WINDOW = re.compile(r"^[1-9][0-9]{0,3}[mhd]$")

EXIT_CODES_HELP: Final = """\
exit codes:
  0  the gate passed (or --no-gate, whatever the verdict or its absence)
  1  the gate failed: the server gate, a `block` rule, or items whose command failed
  2  usage or configuration error: a bad flag or policy file, a missing NEENS_BASE_URL or
     NEENS_API_KEY, a refused key, a dataset without a golden version
  3  no verdict: the server could not be reached for the whole retry window, or --timeout
     ran out
"""

CREATE_ONLY = (
    ("dataset", "--dataset"),
    ("version_label", "--version-label"),
    ("name", "--name"),
    ("dataset_version", "--dataset-version"),
    ("baseline", "--baseline"),
    ("min_pass_rate", "--min-pass-rate"),
    ("max_regressions", "--max-regressions"),
    ("judges", "--judge"),
    ("agent_connection", "--agent-connection"),
)


# --- the command line ----------------------------------------------------------------------------


def register(subparsers: Subparsers) -> None:
    """Add the `eval` group with its `run` and `push` commands."""
    group = subparsers.add_parser(
        "eval",
        help="run a pre-prod evaluation and gate on its verdict",
        description=(
            "Run a candidate version of your agent over a golden dataset, wait for Neens's "
            "verdict, and exit with it (0 passed, 1 failed, 2 usage error, 3 no verdict)."
        ),
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run your agent command once per golden prompt, then gate",
        description=(
            "Invoke COMMAND once per frozen prompt still pending in the run, with the prompt on "
            "stdin and in $NEENS_ITEM_INPUT, and the correlation attributes (neens.eval_run_id, "
            "neens.dataset_item_id, neens.version_label) in OTEL_RESOURCE_ATTRIBUTES; then wait "
            "for the verdict and exit with it."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage=(
            "neens eval run (--create --dataset NAME|ID --version-label LABEL | --run-id ID) "
            "[options] -- COMMAND [ARG ...]"
        ),
    )
    which = run.add_argument_group("which run")
    which.add_argument("--create", action="store_true", help="create a new run and drive it")
    which.add_argument(
        "--run-id",
        metavar="ID",
        help="drive an existing run (ppr_…): run its pending items, or just wait for a push run",
    )
    _add_create_options(run)
    invoking = run.add_argument_group("running the agent")
    invoking.add_argument(
        "--concurrency",
        type=_positive_int,
        default=1,
        metavar="N",
        help="items run at the same time (default 1); each is tagged with its own item id",
    )
    invoking.add_argument(
        "--item-timeout",
        type=_seconds,
        default=DEFAULT_ITEM_TIMEOUT_S,
        metavar="SECONDS",
        help=f"kill one item's command after this long (default {DEFAULT_ITEM_TIMEOUT_S:g})",
    )
    _add_gate_options(run)
    run.add_argument("command", nargs="*", metavar="COMMAND", help="the agent command, after --")
    run.set_defaults(func=run_command)

    push = commands.add_parser(
        "push",
        help="have Neens call your agent endpoint once per golden prompt, then gate",
        description=(
            "Create a push-mode run: Neens calls the agent connection with every golden prompt "
            "and scores the answers. Wait for the verdict and exit with it. With --run-id, "
            "follow an existing run (push or runner mode) instead, and gate on it."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage=(
            "neens eval push (--dataset NAME|ID --version-label LABEL --agent-connection ID | "
            "--run-id ID) [options]"
        ),
    )
    push.add_argument(
        "--agent-connection",
        metavar="ID",
        help="the agent connection Neens calls (conn_…), see POST /agent-connections",
    )
    push.add_argument(
        "--run-id",
        metavar="ID",
        help="follow an existing run (ppr_…) to its verdict instead of creating one",
    )
    _add_create_options(push)
    _add_gate_options(push)
    push.set_defaults(func=push_command)


def _add_create_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("creating the run")
    group.add_argument(
        "--dataset",
        metavar="NAME|ID",
        help="the golden dataset: its name, or its id (ds_…)",
    )
    group.add_argument(
        "--version-label", metavar="LABEL", help="what is evaluated: a git SHA, pr-482, …"
    )
    group.add_argument("--name", help="a name for the run (default: the version label)")
    group.add_argument(
        "--dataset-version",
        metavar="ID",
        help="pin a dataset version (dsv_…) instead of the dataset's golden version",
    )
    group.add_argument(
        "--baseline",
        type=_baseline,
        metavar="prod:WINDOW|run:ID",
        help="compare with production over a window (prod:7d, prod:24h) or an earlier run "
        "(run:ppr_…)",
    )
    group.add_argument(
        "--judge",
        dest="judges",
        action="extend",
        nargs="+",
        metavar="ID",
        help="judges that score the run (jdg_…; repeatable); default: the Primary Score",
    )
    group.add_argument(
        "--project-id",
        metavar="ID",
        help="not supported: the API key decides the project (see docs/cli.md)",
    )


def _add_gate_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the gate")
    group.add_argument(
        "--min-pass-rate",
        type=_fraction,
        metavar="X",
        help="server gate: the least share of items that must pass (0..1)",
    )
    group.add_argument(
        "--max-regressions",
        type=_count,
        metavar="N",
        help="server gate: the most items that may regress against the baseline",
    )
    group.add_argument(
        "--gate-policy",
        type=Path,
        metavar="PATH",
        help=f"a gate policy file, JSON or YAML (default: ${POLICY_ENV_VAR})",
    )
    group.add_argument(
        "--max-cost-delta-pct",
        type=_pct,
        metavar="PCT",
        help="block rule: cost may grow at most PCT%% over the baseline (negative: must shrink)",
    )
    group.add_argument(
        "--max-latency-delta-pct",
        type=_pct,
        metavar="PCT",
        help="block rule: latency may grow at most PCT%% over the baseline",
    )
    group.add_argument(
        "--min-avg-score",
        type=_fraction,
        metavar="X",
        help="block rule: the mean item score must be at least X (0..1)",
    )
    group.add_argument(
        "--max-abs-failures",
        type=_count,
        metavar="N",
        help="block rule: at most N items may fail or error",
    )
    output = parser.add_argument_group("waiting and output")
    output.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for the verdict (default {DEFAULT_TIMEOUT_S:g}); then exit 3",
    )
    output.add_argument(
        "--retry-window",
        type=_window,
        metavar="SECONDS",
        help=f"how long to keep retrying while Neens does not answer, then exit 3 (default: "
        f"${RETRY_WINDOW_VAR}, else 60)",
    )
    output.add_argument(
        "--no-gate",
        action="store_true",
        help="print the gate but exit 0 when it fails (usage errors still exit 2)",
    )
    output.add_argument(
        "--json",
        action="store_true",
        dest="as_json",
        help="write one JSON result to stdout (the summary goes to stderr)",
    )


# --- the commands --------------------------------------------------------------------------------


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
    _refuse_project_id(args)
    if args.create == bool(args.run_id):
        raise ConfigError(
            "give either --create (with --dataset and --version-label) to start a new run, or "
            "--run-id ppr_… to drive an existing one"
        )
    if args.create:
        _require_create_fields(args)
        check_command(args.command, os.environ)
    else:
        _refuse_create_flags(args, "--run-id")
        if args.command:
            check_command(args.command, os.environ)
    policy = _policy(args)
    progress = Progress(sys.stderr)
    client = _client(args, progress)
    with _terminate_as_interrupt():
        if args.create:
            run = _create_run(client, args, policy, runner_mode="runner", progress=progress)
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
    _refuse_project_id(args)
    if args.run_id:
        _refuse_create_flags(args, "--run-id")
    else:
        _require_create_fields(args)
        if not (args.agent_connection or "").strip():
            raise ConfigError(
                "--agent-connection is required to create a push run: the agent connection "
                "Neens calls (conn_…); or give --run-id ppr_… to follow an existing run"
            )
    policy = _policy(args)
    progress = Progress(sys.stderr)
    client = _client(args, progress)
    if args.run_id:
        run = Poller(client, args.run_id).run()
        _warn_gate_not_applied(policy, run, progress)
        return _follow(client, run, args, policy, progress)
    run = _create_run(client, args, policy, runner_mode="push", progress=progress)
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
        _no_verdict(client, run, args, policy, progress, exc, LastSeen(datetime.now(UTC), run))
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
        invoker.kill_all()
        pool.shutdown(wait=False, cancel_futures=True)
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
        result = _read_result(client, poller, waited, args, policy, runs, reported)
    except NeensClientError as exc:
        progress.close()
        _no_verdict(client, run, args, policy, progress, exc, poller.last_seen)
    _emit(result, args)
    return result.exit_code


def _read_result(
    client: Client,
    poller: Poller,
    waited: WaitResult,
    args: argparse.Namespace,
    policy: GatePolicy,
    runs: Mapping[str, ItemRun],
    reported: set[str],
) -> EvalResult:
    run = waited.run
    path = poller.path
    items = poller.items()
    gate = comparison = None
    metrics: list[dict[str, Any]] = []
    if waited.outcome == "finished":
        gate = _object(client.get(f"{path}/gate"), f"GET {path}/gate")
        comparison = _object(client.get(f"{path}/comparison"), f"GET {path}/comparison")
        listed = _object(client.get(f"{path}/metrics"), f"GET {path}/metrics").get("metrics")
        metrics = [row for row in listed or [] if isinstance(row, dict)]
    stored_gate = run.get("gate") if isinstance(run.get("gate"), dict) else None
    evaluated_policy = replace(policy, gate=stored_gate or None)
    judges = _judge_names(client, run) if any(c.metric for c in policy.checks) else {}
    rules = evaluate(
        evaluated_policy,
        RunData(str(run.get("status")), items, comparison, metrics, judges),
    )
    by_id = {str(item.get("item_id")): item for item in items}
    not_run: list[NotRun] = []
    warnings: list[str] = []
    for item_id, item_run in runs.items():
        if item_run.ok:
            continue
        item = by_id.get(item_id, {})
        if item.get("status") == "pending" or item_id in reported:
            not_run.append(
                NotRun(
                    item_id,
                    str(item.get("input") or ""),
                    item_run.reason,
                    recorded=item_id in reported,
                )
            )
        else:
            warnings.append(
                f"item {item_id}: {item_run.reason}, but its trace was captured, so the "
                f"server's verdict on it stands"
            )
    outcome: Outcome = waited.outcome
    return EvalResult(
        run_id=str(run["id"]),
        url=_url(client, run),
        mode=str(run.get("runnerMode", "runner")),
        version_label=str(run.get("versionLabel", "")),
        run=run,
        outcome=outcome,
        enforce=not args.no_gate,
        gate=gate,
        items=items,
        comparison=comparison,
        rules=rules,
        not_run=not_run,
        waited_s=waited.waited_s,
        timeout_s=args.timeout,
        policy_source=policy.source,
        warnings=warnings,
        command=list(getattr(args, "command", None) or []),
        last_seen=poller.last_seen.to_json() if poller.last_seen else None,
    )


def _judge_names(client: Client, run: Mapping[str, Any]) -> dict[str, str | None]:
    """For metric rules: the run's judges and the components of its composites (scored and
    listed in `/metrics` too), each with its name, the metric it produces; None when the name
    cannot be read (a key whose role may not read judges)."""
    names: dict[str, str | None] = {}
    queue = [str(judge_id) for judge_id in run.get("judgeDeploymentIds") or []]
    while queue:
        judge_id = queue.pop(0)
        if judge_id in names:
            continue
        try:
            judge = client.get(f"/judges/{urllib.parse.quote(judge_id, safe='')}")
        except ApiError as exc:
            if exc.status >= 500:
                raise
            judge = None
        judge = judge if isinstance(judge, dict) else {}
        name = judge.get("name")
        names[judge_id] = name if isinstance(name, str) else None
        config = judge.get("config")
        if judge.get("type") == "composite" and isinstance(config, dict):
            queue.extend(
                str(part["judgeId"])
                for part in config.get("components") or []
                if isinstance(part, dict) and part.get("judgeId")
            )
    return names


def _no_verdict(
    client: Client,
    run: dict[str, Any],
    args: argparse.Namespace,
    policy: GatePolicy,
    progress: Progress,
    error: NeensClientError,
    last_seen: LastSeen | None,
) -> NoReturn:
    """The server went away (or broke) after the run was created: say where the run is and what
    was last seen of it, write the `--json` result when asked, and let the error be reported
    with its exit code."""
    if error.exit_code != EXIT_UNREACHABLE:
        raise error
    seen = last_seen.run if last_seen is not None else run
    result = EvalResult(
        run_id=str(run["id"]),
        url=_url(client, run),
        mode=str(run.get("runnerMode", "runner")),
        version_label=str(run.get("versionLabel", "")),
        run=seen,
        outcome="unreachable",
        enforce=not args.no_gate,
        timeout_s=args.timeout,
        policy_source=policy.source,
        error=str(error),
        last_seen=last_seen.to_json() if last_seen is not None else None,
        command=list(getattr(args, "command", None) or []),
    )
    if args.as_json:
        write_json(result, sys.stdout)
    if result.last_seen is not None:
        progress.log(f"neens: {describe_last_seen(result.last_seen)}")
    progress.log(
        f"neens: no verdict for {result.run_id}; the server keeps the run: once it is back, "
        f"follow it again with `{follow_command(result)}`"
    )
    raise error


def _emit(result: EvalResult, args: argparse.Namespace) -> None:
    if args.as_json:
        write_summary(result, sys.stderr)
        write_json(result, sys.stdout)
    else:
        write_summary(result, sys.stdout)


# --- creating a run ------------------------------------------------------------------------------


def _create_run(
    client: Client,
    args: argparse.Namespace,
    policy: GatePolicy,
    *,
    runner_mode: str,
    progress: Progress,
) -> dict[str, Any]:
    dataset_id = _dataset_id(client, args.dataset.strip())
    body: dict[str, Any] = {"dataset_id": dataset_id, "version_label": args.version_label}
    if args.name is not None:
        body["name"] = args.name
    if args.dataset_version is not None:
        body["dataset_version_id"] = args.dataset_version
    if runner_mode == "push":
        body["runner_mode"] = "push"
        body["agent_connection_id"] = args.agent_connection
    if args.judges:
        body["judge_deployment_ids"] = list(args.judges)
    if args.baseline is not None:
        body["baseline"] = args.baseline
    gate = server_gate(policy, args)
    if gate:
        body["gate"] = gate
    known = _recent_run_ids(client, dataset_id)
    try:
        created = client.post("/preprod-evals", body)
    except Unreachable as exc:
        if not exc.maybe_applied:
            raise
        created = _run_created_by(client, body, known, exc, progress)
    except ApiError as exc:
        if exc.status == 422 and exc.field == "dataset_id" and "golden" in exc.message:
            raise ConfigError(
                f"{exc}; push a golden version with `neens datasets push FILE.jsonl --name NAME "
                f"--golden`, or pin one with --dataset-version dsv_…"
            ) from exc
        if exc.status == 404 and exc.field == "dataset_id":
            raise ConfigError(
                f"{exc}; give --dataset the dataset's name (as given to `neens datasets push "
                f"--name`) or its id (ds_…), which that command prints"
            ) from exc
        raise
    run = _object(created, "POST /preprod-evals")
    if not isinstance(run.get("id"), str):
        raise ApiError(200, "unexpected_response", "POST /preprod-evals answered without an id")
    return run


def _dataset_id(client: Client, dataset: str) -> str:
    """`--dataset` as an id: a `ds_…` value is one already; anything else is a dataset name."""
    if dataset.startswith("ds_"):
        return dataset
    listing = _object(client.get("/datasets", {"name": dataset}), "GET /datasets")
    found = [row for row in listing.get("datasets") or [] if isinstance(row, dict)]
    if found and isinstance(found[0].get("id"), str):
        return str(found[0]["id"])
    raise ConfigError(
        f"--dataset: no dataset named {dataset!r} in this project; give the name you pushed it "
        f"with (`neens datasets push FILE.jsonl --name NAME --golden`) or its id (ds_…)"
    )


def _recent_run_ids(client: Client, dataset_id: str) -> list[str]:
    """The dataset's newest runs before a create, so that a create whose answer was lost can
    be told apart from the runs that were there already."""
    listing = _object(
        client.get("/preprod-evals", {"dataset_id": dataset_id, "limit": RECENT_RUNS}),
        "GET /preprod-evals",
    )
    return [str(row.get("id")) for row in listing.get("runs") or [] if isinstance(row, dict)]


def _run_created_by(
    client: Client,
    body: Mapping[str, Any],
    known: Sequence[str],
    error: Unreachable,
    progress: Progress,
) -> dict[str, Any]:
    """The run a create request that got no answer made, found once the server answers again.

    The request is never sent twice. Exactly one new run of the dataset with the same version
    label, name, mode and connection is the one it created; none means nothing was created; more
    than one cannot be told apart, so the user picks one with --run-id.
    """
    progress.log(
        "neens: the request creating the run got no answer; looking on the server for the run "
        "it may have created (it is not sent twice)"
    )
    dataset_id = str(body["dataset_id"])
    try:
        listing = _object(
            client.get("/preprod-evals", {"dataset_id": dataset_id, "limit": RECENT_RUNS}),
            "GET /preprod-evals",
        )
    except NeensClientError as exc:
        raise Unreachable(
            f"{error}; looking for the run it may have created failed too ({exc}): once Neens "
            f"answers, list the dataset's runs (GET /preprod-evals?dataset_id={dataset_id}) and "
            f"follow the run of {body['version_label']}, if there is one, with "
            f"`neens eval push --run-id ID`"
        ) from None
    before = set(known)
    new: list[dict[str, Any]] = []
    for row in listing.get("runs") or []:  # newest first: stop at the first run seen before
        if not isinstance(row, dict) or row.get("id") in before:
            break
        new.append(row)
    wanted = {
        "versionLabel": body["version_label"],
        "name": body.get("name", body["version_label"]),
        "runnerMode": body.get("runner_mode", "runner"),
        "agentConnectionId": body.get("agent_connection_id"),
    }
    matches = [row for row in new if all(row.get(k) == v for k, v in wanted.items())]
    if len(matches) == 1:
        progress.log(f"neens: the server did create run {matches[0]['id']}; following it")
        return matches[0]
    if not matches:
        raise Unreachable(
            f"{error}: the server answers again and has no new run of {body['version_label']} "
            f"on dataset {dataset_id}, so nothing was created; run the command again"
        )
    ids = ", ".join(str(row["id"]) for row in matches)
    raise Unreachable(
        f"{error}: the server now has {len(matches)} new runs of {body['version_label']} that "
        f"could be it ({ids}); follow the right one with `neens eval push --run-id ID`"
    )


def server_gate(policy: GatePolicy, args: argparse.Namespace) -> dict[str, Any]:
    """The gate sent at create: the policy's `gate` block, with the flags' thresholds on top."""
    gate = dict(policy.gate or {})
    if args.min_pass_rate is not None:
        gate["min_pass_rate"] = args.min_pass_rate
    if args.max_regressions is not None:
        gate["max_regressions"] = args.max_regressions
    return gate


def _policy(args: argparse.Namespace) -> GatePolicy:
    path: Path | None = args.gate_policy
    if path is None and os.environ.get(POLICY_ENV_VAR, "").strip():
        path = Path(os.environ[POLICY_ENV_VAR].strip())
    policy = load_policy(path) if path is not None else GatePolicy()
    flags = [
        ("--max-cost-delta-pct", "cost", "max_delta_pct", args.max_cost_delta_pct),
        ("--max-latency-delta-pct", "latency", "max_delta_pct", args.max_latency_delta_pct),
        ("--min-avg-score", "min_avg_score", "min_avg_score", args.min_avg_score),
        ("--max-abs-failures", "max_abs_failures", "max_abs_failures", args.max_abs_failures),
    ]
    policy = with_flag_rules(
        policy,
        [
            flag_rule(flag, dimension, budget, float(value))
            for flag, dimension, budget, value in flags
            if value is not None
        ],
    )
    for note in policy.notes:
        sys.stderr.write(f"neens: note: {note}\n")
    if policy.gate is not None:
        check_server_gate(policy.gate, f"gate policy {policy.source}: gate")
    return policy


def _warn_gate_not_applied(policy: GatePolicy, run: Mapping[str, Any], progress: Progress) -> None:
    if policy.gate and policy.gate != run.get("gate"):
        progress.log(
            f"neens: warning: the gate block of {policy.source} is not applied: {run.get('id')} "
            f"was created with the gate {run.get('gate')}, which the server keeps"
        )


def _refuse_create_flags(args: argparse.Namespace, instead: str) -> None:
    given = [flag for attr, flag in CREATE_ONLY if getattr(args, attr, None) is not None]
    if given:
        several = len(given) > 1
        raise ConfigError(
            f"{', '.join(given)} {'are' if several else 'is'} only for creating a run: with "
            f"{instead} the run keeps the dataset, baseline, judges and server gate it was "
            f"created with; drop {'them' if several else 'it'} (client-side rules such as "
            f"--min-avg-score or --gate-policy still apply)"
        )


def _client(args: argparse.Namespace, progress: Progress) -> Client:
    """The client from the environment, retrying for `--retry-window` (or NEENS_RETRY_WINDOW),
    and showing on the progress line that Neens is being waited for."""
    retry = RetryPolicy.from_env()
    if args.retry_window is not None:
        retry = replace(retry, window_s=args.retry_window)
    client = Client.from_env(retry=retry)

    def on_retry(notice: RetryNotice) -> None:
        progress.update(
            f"neens: Neens does not answer {notice.method} {notice.path} ({notice.problem}); "
            f"retrying for up to {max(notice.window_s - notice.waited_s, 0):.0f} s more "
            f"[{notice.waited_s:.0f}s]",
            key="retrying",
        )

    client.on_retry = on_retry
    return client


def _require_create_fields(args: argparse.Namespace) -> None:
    missing = [flag for attr, flag in CREATE_ONLY[:2] if not (getattr(args, attr) or "").strip()]
    if missing:
        raise ConfigError(
            f"{' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} required to create "
            f'a run, for example: --dataset support-golden --version-label "$GIT_SHA"'
        )


def _refuse_project_id(args: argparse.Namespace) -> None:
    if args.project_id is not None:
        raise ConfigError(
            "--project-id is not supported: the API key decides the project of the run; drop "
            "--project-id and set NEENS_API_KEY to a key of the project you want"
        )


# --- small helpers --------------------------------------------------------------------------------


def _describe_progress(run_id: str) -> Callable[[dict[str, Any], float], str]:
    def describe(run: dict[str, Any], elapsed: float) -> str:
        counts = run.get("counts") if isinstance(run.get("counts"), dict) else {}
        assert isinstance(counts, dict)
        total = run.get("itemCount", "?")
        done = int(counts.get("scored") or 0) + int(counts.get("error") or 0)
        return (
            f"neens: {run_id} {run.get('status')}: {_captured(run)}/{total} captured, "
            f"{done}/{total} scored [{elapsed:.0f}s]"
        )

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
    counts = run.get("counts")
    if not isinstance(counts, dict):
        return 0
    return sum(int(counts.get(key) or 0) for key in ("captured", "scored", "error"))


def _url(client: Client, run: Mapping[str, Any]) -> str:
    return f"{client.base_url}/preprod-evals/{urllib.parse.quote(str(run['id']), safe='')}"


def _api_key() -> str:
    return os.environ.get("NEENS_API_KEY", "").strip()


def _object(answer: Any, what: str) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise ApiError(
            200,
            "unexpected_response",
            f"unexpected answer to {what}: expected a JSON object; check that NEENS_BASE_URL "
            f"points at a Neens server",
        )
    return answer


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


def _baseline(text: str) -> dict[str, str]:
    kind, _, value = text.partition(":")
    if kind == "prod" and _WINDOW.match(value):
        return {"kind": "prod_window", "range": value}
    if kind == "run" and value.strip():
        return {"kind": "preprod_run", "value": value.strip()}
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a baseline; use prod:WINDOW (prod:7d, prod:24h, prod:30m) or "
        f"run:RUN_ID (run:ppr_…)"
    )


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _fraction(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1 (0.9 means 90%)")
    return value


def _pct(text: str) -> float:
    value = _number(text)
    if value < -100:
        raise argparse.ArgumentTypeError(f"{text} is below -100 (cheaper than free)")
    return value


def _window(text: str) -> float:
    try:
        return parse_window(text, "--retry-window")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--retry-window: ")) from None


def _seconds(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _positive_int(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value
