"""`neens exp replay` and `neens exp ab`: stored model calls sent again, A against B.

Where the calls come from: the store the other `exp` commands use (`--database-url`, else
$NEENS_DATABASE_URL, else ./.neens/neens.db), which is the database `neens serve` ingests
traces into. Nothing is sent to a Neens server. Everything that can be refused (the reference,
`--vary`, a missing key, a model-less call) is refused before anything is written or sent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from neens_eval.errors import ConfigError

from neens.domain.exp_compare import compare
from neens.domain.paired import ALPHA
from neens.domain.pricing import PriceLookupError
from neens.domain.stats import fewest_changed_to_reject
from neens.exp.compare import load_side, pass_text, render, to_json
from neens.exp.progress import RunProgress, cost_text
from neens.exp.providers import (
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    KEY_ENV,
    Endpoint,
    ProviderName,
)
from neens.exp.replay_arms import Arm, make_arms
from neens.exp.replay_calls import RecordedCall
from neens.exp.replay_cli import DEFAULT_JUDGE_MODEL
from neens.exp.replay_run import Judge, ReplayPlan, experiment_rows, run_replay
from neens.exp.replay_source import Selected, select_calls
from neens.exp.run_command import new_experiment_id
from neens.exp.store import open_store
from neens.exp.table import table
from neens.store.experiments import get_experiment, tally, trials_of

CHARS_PER_TOKEN = 4
"""For the estimate only: a changed system prompt's length difference, in tokens."""


def run_main(args: argparse.Namespace, ref: str, *, kind: str, whole: bool) -> int:
    import asyncio

    arms = make_arms(args.vary, Path.cwd())
    if args.judge_model is not None and args.criterion is None:
        raise ConfigError("--judge-model: only with --criterion (it names the judge's model)")
    if args.criterion is not None and not args.criterion.strip():
        raise ConfigError("--criterion: empty; say what a good reply does")
    holder: dict[str, Any] = {}
    try:
        return asyncio.run(_command(args, ref, kind, whole, arms, holder))
    except KeyboardInterrupt:
        ids = holder.get("ids")
        if ids is None:
            print("neens: interrupted before the replay started", file=sys.stderr)
        else:
            print(
                f"neens: interrupted: the arms {ids[0]} and {ids[1]} keep every reply saved so "
                "far (`neens exp compare` reads them); a replay is not resumed, run it again",
                file=sys.stderr,
            )
        return 130


def _models(arm: Arm, calls: list[RecordedCall], forced: ProviderName | None) -> None:
    for call in calls:
        if arm.model(call) is None:
            raise ConfigError(
                f"--vary: call {call.case_id} recorded no model, so arm {arm.label} has none to "
                "call; set both arms' models with --vary model=A,B"
            )


def _endpoints(
    plan_arms: tuple[Arm, Arm], calls: list[RecordedCall], forced: ProviderName | None
) -> dict[ProviderName, Endpoint]:
    """Each provider the arms call, with the person's own key; ConfigError naming the missing
    variable."""
    endpoints: dict[ProviderName, Endpoint] = {}
    for arm in plan_arms:
        for call in calls:
            provider = arm.provider(call, forced)
            assert provider is not None
            if provider in endpoints:
                continue
            key = os.environ.get(KEY_ENV[provider], "").strip()
            if not key:
                raise ConfigError(
                    f"{KEY_ENV[provider]} is not set: arm {arm.label} calls {arm.model(call)} "
                    f"through the {provider} API with your own key; export it, or use --dry-run "
                    "to see the calls and their estimated cost without one"
                )
            base = os.environ.get(BASE_URL_ENV[provider], "").strip() or DEFAULT_BASE_URL[provider]
            if not base.startswith(("http://", "https://")):
                raise ConfigError(f"{BASE_URL_ENV[provider]}: must be an http:// or https:// URL")
            endpoints[provider] = Endpoint(provider, base, key)
    return endpoints


def _judge(args: argparse.Namespace) -> Judge | None:
    if args.criterion is None:
        return None
    key = os.environ.get("OPENAI_API_KEY", "").strip()
    if not key:
        raise ConfigError(
            "OPENAI_API_KEY is not set: the --criterion judge runs on an OpenAI-compatible API "
            "(OPENAI_BASE_URL) with your own key"
        )
    base = os.environ.get("OPENAI_BASE_URL", "").strip() or DEFAULT_BASE_URL["openai"]
    return Judge(args.criterion.strip(), args.judge_model or DEFAULT_JUDGE_MODEL, base, key)


async def _command(
    args: argparse.Namespace,
    ref: str,
    kind: str,
    whole: bool,
    arms: tuple[Arm, Arm],
    holder: dict[str, Any],
) -> int:
    async with open_store(args.database_url) as db:
        selected = await select_calls(db, ref, project=args.project, whole=whole, limit=args.limit)
        for arm in arms:
            _models(arm, selected.calls, args.provider)
        if args.dry_run:
            _print_dry_run(args, kind, selected, arms)
            return 0
        endpoints = _endpoints(arms, selected.calls, args.provider)
        plan = ReplayPlan(
            selected=selected,
            arms=arms,
            n=args.n,
            seed=args.seed,
            forced=args.provider,
            endpoints=endpoints,
            judge=_judge(args),
            concurrency=args.concurrency,
            retries=args.retries,
            timeout_s=args.timeout,
            kind=kind,
        )
        ids = (new_experiment_id(), new_experiment_id())
        rows = experiment_rows(plan, ids)
        holder["ids"] = ids
        total = 2 * len(selected.calls) * args.n
        if (few := too_few_cases(len(selected.calls), args.n)) and not args.json:
            print(f"warning: {few}", file=sys.stderr)
        with RunProgress(total=total, done=0, label=f"{kind} {ref}") as progress:
            await run_replay(
                db,
                plan,
                rows,
                lambda t: progress.advance(error=t.status == "error", cost_usd=t.cost_usd),
            )
        stored = [await get_experiment(db, i) for i in ids]
        sides = [await load_side(db, row) for row in stored if row is not None]
        counts = await tally(db, list(ids))
        turn = await _turn(db, plan, ids) if kind == "ab" else None
    result = compare(sides[0], sides[1], seed=None)
    head = _head(plan, ids)
    costs = {i: counts[i] for i in ids}
    if args.json:
        body = {
            "command": kind,
            "ref": ref,
            "session": selected.session.trace_id,
            "calls": [c.case_id for c in selected.calls],
            "n": args.n,
            "seed": args.seed,
            "casesAre": "repeats" if plan.per_repeat else "calls",
            "arms": [
                {
                    "label": arm.label,
                    "name": arm.name,
                    "id": i,
                    "vary": arm.shown,
                    "costUsd": costs[i].cost_usd if costs[i].priced else None,
                    "costOverflow": costs[i].cost_overflow,
                    "pricedCalls": costs[i].priced,
                    "calls": costs[i].done,
                }
                for arm, i in zip(arms, ids, strict=True)
            ],
            "comparison": to_json(result, gate=False),
            "turn": turn,
        }
        print(json.dumps(body, ensure_ascii=False, allow_nan=False))
        return 0
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for line in head:
        print(line)
    print()
    print(render(result))
    print()
    for arm, i in zip(arms, ids, strict=True):
        c = costs[i]
        print(
            f"cost {arm.label} {cost_text(c.cost_usd, c.priced, c.done)}"
            f"  ({c.done} calls, {pass_text(c.passed, c.graded)})"
        )
    if turn is not None:
        print(_turn_line(turn))
    return 0


def too_few_cases(calls: int, n: int) -> str | None:
    """Why no outcome of this replay can be better or worse, or None: one call's repeats are
    its cases (several calls: each call is one), and the exact sign test needs a few of them."""
    fewest = fewest_changed_to_reject(ALPHA)
    cases = n if calls == 1 else calls
    if cases >= fewest:
        return None
    if calls == 1:
        what = f"1 call × --n {n} is {n} case{'s' if n != 1 else ''}"
        more = f"give --n {fewest} or more"
    else:
        what = f"{calls} calls are {calls} cases"
        more = f"replay at least {fewest} calls"
    return (
        f"{what}, and the exact sign test cannot reject at 5% with fewer than {fewest}: this "
        f"replay can only be inconclusive, however the replies turn out; {more}"
    )


def _head(plan: ReplayPlan, ids: tuple[str, str]) -> list[str]:
    calls = plan.calls
    what = "1 call" if len(calls) == 1 else f"{len(calls)} calls"
    unit = "each repeat is a case" if plan.per_repeat else "each call is a case, its repeats trials"
    lines = [
        f"{plan.kind} {plan.selected.ref}: {what} of session {plan.selected.session.trace_id} "
        f"× {plan.n} repeats, A and B interleaved (seed {plan.seed}); {unit}"
    ]
    for arm, i in zip(plan.arms, ids, strict=True):
        models = sorted({f"{arm.model(c)} ({arm.provider(c, plan.forced)})" for c in calls})
        lines.append(f"{arm.label} {arm.name}  {', '.join(models)}  {i}")
    return lines


async def _turn(db: Any, plan: ReplayPlan, ids: tuple[str, str]) -> dict[str, Any]:
    """Per arm: in how many repeats every call of the turn passed (each graded and passed),
    and in how many every call was graded at all."""
    body: dict[str, Any] = {}
    for arm, i in zip(plan.arms, ids, strict=True):
        by_repeat: dict[int, list[bool | None]] = {}
        for t in await trials_of(db, i, grades=False):
            by_repeat.setdefault(t.trial, []).append(t.passed)
        complete = [
            r
            for r, outcomes in by_repeat.items()
            if len(outcomes) == len(plan.calls) and None not in outcomes
        ]
        passed = sum(1 for r in complete if all(by_repeat[r]))
        body[arm.label] = {"matched": passed, "graded": len(complete), "repeats": plan.n}
    return body


def _turn_line(turn: dict[str, Any]) -> str:
    parts = []
    for label in ("A", "B"):
        t = turn[label]
        part = f"{label} {t['matched']} of {t['graded']}"
        if t["graded"] < t["repeats"]:
            part += f" ({t['repeats'] - t['graded']} with an error or ungraded call)"
        parts.append(part)
    return "turn as recorded (every call's first action): " + ", ".join(parts) + " repeats"


def _estimate(
    selected: Selected, arm: Arm, call: RecordedCall, forced: ProviderName | None
) -> float | None:
    """One send's cost at the recorded token counts (a changed system prompt adds or removes
    its length difference at 4 characters a token); None when unpriced."""
    if call.input_tokens is None or call.output_tokens is None:
        return None
    tokens_in = call.input_tokens
    if "system" in arm.changes:
        delta = len(str(arm.changes["system"])) - len(call.system or "")
        tokens_in = max(tokens_in + round(delta / CHARS_PER_TOKEN), 0)
    model, provider = arm.model(call), arm.provider(call, forced)
    assert model is not None
    try:
        usd, _ = selected.prices.cost(model, provider, tokens_in, call.output_tokens)
    except PriceLookupError:
        return None
    return usd


def _print_dry_run(
    args: argparse.Namespace, kind: str, selected: Selected, arms: tuple[Arm, Arm]
) -> None:
    calls = selected.calls
    n = args.n
    rows = []
    arm_bodies = []
    total = 0.0
    unpriced_total = 0
    for arm in arms:
        costs = [_estimate(selected, arm, call, args.provider) for call in calls]
        priced = [c for c in costs if c is not None]
        unpriced = len(costs) - len(priced)
        unpriced_total += unpriced * n
        usd = sum(priced) * n
        total += usd
        models = sorted({f"{arm.model(c)} ({arm.provider(c, args.provider)})" for c in calls})
        estimate = "unpriced" if not priced else f"${usd:.4f}"
        if priced and unpriced:
            estimate += f" ({unpriced * n} calls unpriced)"
        rows.append([arm.label, arm.name, ", ".join(models), str(len(calls) * n), estimate])
        arm_bodies.append(
            {
                "label": arm.label,
                "name": arm.name,
                "vary": arm.shown,
                "models": models,
                "calls": len(calls) * n,
                "estimateUsd": usd if priced else None,
                "unpricedCalls": unpriced * n,
            }
        )
    sends = 2 * len(calls) * n
    few = too_few_cases(len(calls), n)
    if args.json:
        body = {
            "command": kind,
            "dryRun": True,
            "warnings": [few] if few else [],
            "ref": selected.ref,
            "session": selected.session.trace_id,
            "calls": [_call_json(c) for c in calls],
            "n": n,
            "sends": sends,
            "arms": arm_bodies,
            "estimateUsd": total if unpriced_total < sends else None,
            "unpricedCalls": unpriced_total,
        }
        print(json.dumps(body, ensure_ascii=False, allow_nan=False))
        return
    if few:
        print(f"warning: {few}", file=sys.stderr)
    what = "1 call" if len(calls) == 1 else f"{len(calls)} calls"
    print(
        f"{kind} {selected.ref}: {what} of session {selected.session.trace_id} × {n} repeats × "
        f"2 arms = {sends} calls to send (dry run: nothing sent)"
    )
    print()
    print(
        table(
            ["call", "model", "recorded action", "tokens in", "out"],
            [
                [
                    c.case_id,
                    c.model or "no model",
                    c.action.label() if c.action else "no reply kept",
                    _tokens(c.input_tokens),
                    _tokens(c.output_tokens),
                ]
                for c in calls
            ],
            right={3, 4},
        )
    )
    print()
    print(table(["arm", "changes", "model", "calls", "estimate"], rows, right={3}))
    if unpriced_total == sends:
        print("total unpriced: no model and token count here has a known price")
    else:
        suffix = f", {unpriced_total} calls unpriced (partial)" if unpriced_total else ""
        print(
            f"total ${total:.4f}{suffix}, at the recorded token counts, priced by genai-prices "
            "and the project's own prices"
        )
    if selected.session.unreplayable:
        print(
            f"note: {selected.session.unreplayable} LLM calls of the session kept no request "
            "messages and are left out"
        )


def _call_json(call: RecordedCall) -> dict[str, Any]:
    return {
        "case": call.case_id,
        "spanId": call.span_id,
        "model": call.model,
        "recordedAction": call.action.label() if call.action else None,
        "inputTokens": call.input_tokens,
        "outputTokens": call.output_tokens,
    }


def _tokens(value: int | None) -> str:
    return "?" if value is None else str(value)
