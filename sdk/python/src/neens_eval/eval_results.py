"""Reading a finished run back: its items, gate, comparison and metrics, the client-side rules
evaluated on them, and the result printed as a summary or as JSON.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, NoReturn

from neens_eval.client import Client, expect_object
from neens_eval.errors import EXIT_UNREACHABLE, ApiError, ConfigError, NeensClientError
from neens_eval.gate_rules import GatePolicy, RunData, evaluate
from neens_eval.invoke import ItemRun
from neens_eval.summary import (
    EvalResult,
    NotRun,
    Outcome,
    describe_last_seen,
    follow_command,
    write_json,
    write_summary,
)
from neens_eval.summary_md import write_summary_md
from neens_eval.waiting import LastSeen, Poller, Progress, WaitResult


def read_result(
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
        gate = expect_object(client.get(f"{path}/gate"), f"GET {path}/gate")
        comparison = expect_object(client.get(f"{path}/comparison"), f"GET {path}/comparison")
        listed = expect_object(client.get(f"{path}/metrics"), f"GET {path}/metrics").get("metrics")
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


def no_verdict(
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
    if args.summary_md is not None:
        try:
            write_summary_md(result, args.summary_md)
        except ConfigError as exc:  # the outage stays the error to exit with
            progress.log(f"neens: error: {exc}")
    if result.last_seen is not None:
        progress.log(f"neens: {describe_last_seen(result.last_seen)}")
    progress.log(
        f"neens: no verdict for {result.run_id}; the server keeps the run: once it is back, "
        f"follow it again with `{follow_command(result)}`"
    )
    raise error


def emit(result: EvalResult, args: argparse.Namespace) -> None:
    if args.as_json:
        write_summary(result, sys.stderr)
        write_json(result, sys.stdout)
    else:
        write_summary(result, sys.stdout)
    if args.summary_md is not None:
        write_summary_md(result, args.summary_md)


def _url(client: Client, run: Mapping[str, Any]) -> str:
    return f"{client.base_url}/preprod-evals/{urllib.parse.quote(str(run['id']), safe='')}"
