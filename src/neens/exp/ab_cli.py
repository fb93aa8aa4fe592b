"""The command line of A/B runs: `exp run --arm NAME=SPEC --arm NAME=SPEC` and its flags.

Kept apart from the work (`neens.exp.ab`) so that `neens --help` imports argparse only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from neens_eval.arg_types import positive_int
from neens_eval.errors import ConfigError

AB_ONLY = ("stop_early", "max_cases", "looks")
"""Flags that mean nothing without two arms."""


def add_ab_options(run: argparse.ArgumentParser) -> None:
    """`exp run`'s A/B flags."""
    group = run.add_argument_group(
        "A/B run (two configs, each case in both arms back to back)",
    )
    group.add_argument(
        "--arm",
        metavar="NAME=SPEC",
        action="append",
        default=[],
        help="an arm and its spec, e.g. --arm base=a.json; give two, the first is A (the "
        "baseline); instead of SPEC",
    )
    group.add_argument(
        "--stop-early",
        action="store_true",
        help="stop once the answer is clear: an O'Brien-Fleming group-sequential test "
        "(Lan-DeMets spending, two-sided alpha 0.05), never before 20 cases",
    )
    group.add_argument(
        "--looks",
        type=positive_int,
        metavar="K",
        help="with --stop-early: looks at 1/K, 2/K, … of the cases (default 4, at most 20)",
    )
    group.add_argument(
        "--max-cases",
        type=positive_int,
        metavar="N",
        help="run at most N cases (each in both arms): the first N of those chosen",
    )


def uses_arms(args: argparse.Namespace) -> bool:
    """Whether `exp run` was given arms; ConfigError (exit 2) for an A/B flag without them, or
    neither a spec nor arms."""
    if args.arm:
        return True
    for flag in AB_ONLY:
        if getattr(args, flag) not in (None, False):
            name = "--" + flag.replace("_", "-")
            raise ConfigError(f"{name}: only with two arms (--arm base=a.json --arm cand=b.json)")
    if args.spec is None:
        raise ConfigError(
            "SPEC: give the experiment spec (spec.json), or two arms with --arm NAME=SPEC"
        )
    return False


def run_ab(args: argparse.Namespace) -> int:
    from neens.exp.ab import ab_command

    holder: dict[str, Any] = {}
    try:
        return asyncio.run(ab_command(args, holder))
    except KeyboardInterrupt:
        ids = holder.get("ids")
        if ids is None:
            print("neens: interrupted before the arms started", file=sys.stderr)
        else:
            print(
                f"neens: interrupted: the arms {ids[0]} and {ids[1]} keep every finished "
                f"case-trial; run the same command with --resume {ids[0]} to run only what is "
                "left",
                file=sys.stderr,
            )
        return 130
