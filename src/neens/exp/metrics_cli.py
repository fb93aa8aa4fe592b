"""The command line of `exp metrics`. Kept apart from the work (`neens.exp.metrics`) so that
`neens --help` imports argparse only."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

DEFAULT_PAIRS = 11


def _arm(text: str) -> tuple[str, str]:
    name, sep, command = text.partition("=")
    if not sep or not name.strip() or not command.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=COMMAND (base='node bench.mjs a')")
    return name.strip(), command


def _pairs(text: str) -> int:
    from neens.domain.metric_pairs import MIN_PAIRS

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < MIN_PAIRS:
        raise argparse.ArgumentTypeError(
            f"must be at least {MIN_PAIRS}, not {value} (below that no sign test reaches "
            "p < 0.05, so no verdict could be reached)"
        )
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return value


def _metrics(args: argparse.Namespace) -> int:
    from neens.exp.metrics import metrics_command

    return asyncio.run(metrics_command(args))


def register_metrics(commands: Any) -> None:
    """Add `exp metrics` to the `exp` commands."""
    metrics = commands.add_parser(
        "metrics",
        help="compare two commands that print JSON numbers, in interleaved pairs",
        description=(
            "Run two commands that each print a JSON object of numbers, e.g. "
            '{"lcp_ms": 2310}, in interleaved pairs (A then B, then B then A, …). For each '
            "metric print both medians, the median of the paired differences B − A with a 95%% "
            "interval, the sign test and a verdict. Lower is better unless named in --higher. "
            "Exits 0, 1 with --fail-on-worse when a metric is worse, 2 for bad input or a "
            "command that fails."
        ),
    )
    metrics.add_argument(
        "--arm",
        type=_arm,
        action="append",
        default=[],
        required=True,
        metavar="NAME=COMMAND",
        help="an arm and its shell command; give two, the baseline first: "
        "--arm base='node bench.mjs a' --arm cand='node bench.mjs b'",
    )
    metrics.add_argument(
        "--pairs",
        type=_pairs,
        default=DEFAULT_PAIRS,
        metavar="N",
        help=f"pairs of runs (default {DEFAULT_PAIRS}, at least 6)",
    )
    metrics.add_argument(
        "--higher",
        action="append",
        default=[],
        metavar="METRIC",
        help="a metric for which higher is better (repeatable, or comma-separated)",
    )
    metrics.add_argument(
        "--fail-on-worse", action="store_true", help="exit 1 when any metric is worse"
    )
    metrics.add_argument(
        "--timeout",
        type=_seconds,
        default=600.0,
        metavar="SEC",
        help="stop a command that runs longer than SEC seconds: exit 2 (default 600)",
    )
    metrics.add_argument("--json", action="store_true", help="print one JSON object")
    metrics.set_defaults(func=_metrics)
