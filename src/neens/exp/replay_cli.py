"""The `exp replay` and `exp ab` commands' flags; the work is in `replay_command`, imported
only when one of them runs."""

from __future__ import annotations

import argparse
from typing import Any

from neens_eval.arg_types import count, positive_int, seconds
from neens_eval.errors import ConfigError

from neens.exp.flags import concurrency, seed

PROVIDERS = ("openai", "anthropic")
"""The wire formats (`neens.exp.providers`)."""

DEFAULT_JUDGE_MODEL = "gpt-4o-mini"

REPLAY_REPEATS = 10
"""`exp replay`'s default --n. One call's repeats are its cases, and the exact sign test needs at
least 6 changed cases to reject at 5%, all one way; 10 lets one repeat go the other way (9 of 10
gives p = 0.021)."""


def register_replay(commands: Any, common: Any) -> None:
    """Add `exp replay` and `exp ab`."""
    replay = commands.add_parser(
        "replay",
        help="send stored model calls again with the model, system prompt or a field changed",
        description=(
            "Send model calls stored from your traces again, as recorded (arm A) and changed "
            "(arm B), --n times each, and compare the arms as exp compare does: a reply passes "
            "when its first action (a tool call by name, or text) is the recorded one."
        ),
    )
    replay.add_argument(
        "ref",
        nargs="?",
        metavar="REF",
        help="the call: latest, latest#-1, TRACE_ID#N or a span id (default: latest)",
    )
    replay.add_argument(
        "--session",
        metavar="SESSION",
        help="replay every call of this session (latest or a trace id), each as a case",
    )
    replay.add_argument(
        "--limit", type=positive_int, metavar="N", help="with --session: its first N calls"
    )
    _shared(replay, n_default=REPLAY_REPEATS)
    common(replay)
    replay.set_defaults(func=_replay)

    ab = commands.add_parser(
        "ab",
        help="replay a whole turn (every call of one session) as recorded and changed",
        description=(
            "Send every model call of one session again, as recorded (arm A) and changed "
            "(arm B), and compare the arms call by call; also says in how many repeats the "
            "whole turn went as recorded."
        ),
    )
    ab.add_argument(
        "ref", nargs="?", metavar="SESSION", help="latest or a trace id (default: latest)"
    )
    _shared(ab, n_default=1)
    common(ab)
    ab.set_defaults(func=_ab)


def _shared(parser: argparse.ArgumentParser, *, n_default: int) -> None:
    parser.add_argument(
        "--vary",
        metavar="FIELD=B|FIELD=A,B",
        action="append",
        default=[],
        help="what arm B changes (one value) or both arms set (two): model, system (text or "
        "@FILE), or any request field; repeatable",
    )
    parser.add_argument(
        "--n",
        type=positive_int,
        default=n_default,
        help=f"repeats of each call (default {n_default})",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the calls, their count and a cost estimate; send nothing, need no key",
    )
    parser.add_argument(
        "--criterion",
        metavar="TEXT",
        help="also judge each reply against TEXT with an LLM (OpenAI-compatible)",
    )
    parser.add_argument(
        "--judge-model",
        metavar="MODEL",
        help=f"the --criterion judge's model (default {DEFAULT_JUDGE_MODEL})",
    )
    parser.add_argument(
        "--provider",
        choices=PROVIDERS,
        help="the wire format of every call (default: anthropic for claude… models, else openai)",
    )
    parser.add_argument(
        "--project", metavar="PROJECT", help="look only at this project's sessions (id or name)"
    )
    parser.add_argument("--concurrency", type=concurrency, default=4, help="calls in flight (4)")
    parser.add_argument(
        "--retries",
        type=count,
        default=3,
        help="retries of rate limits, 5xx and network errors (default 3)",
    )
    parser.add_argument(
        "--timeout", type=seconds, default=120.0, metavar="SEC", help="per call (default 120)"
    )
    parser.add_argument("--seed", type=seed, default=0, help="seed of the send order (default 0)")


def _replay(args: argparse.Namespace) -> int:
    if args.session is not None and args.ref is not None:
        raise ConfigError("--session: not with REF; name the session in one or the other")
    if args.limit is not None and args.session is None:
        raise ConfigError("--limit: only with --session (it caps that session's calls)")
    ref = args.session if args.session is not None else (args.ref or "latest")
    return _run(args, ref, kind="replay", whole=args.session is not None)


def _ab(args: argparse.Namespace) -> int:
    ref = args.ref or "latest"
    if "#" in ref:
        raise ConfigError(
            f"SESSION {ref}: exp ab replays a whole session; replay one call with "
            f"`neens exp replay {ref}`"
        )
    args.limit = None
    return _run(args, ref, kind="ab", whole=True)


def _run(args: argparse.Namespace, ref: str, *, kind: str, whole: bool) -> int:
    from neens.exp.replay_command import run_main

    return run_main(args, ref, kind=kind, whole=whole)
