"""The command line of series and plateaus: `exp run`'s series flags and `exp plateau`.

Kept apart from the work (`neens.exp.plateau`) so that `neens --help` imports argparse only.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any


def _eps(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(
            f"must be a fraction from 0 to 1 (0.05 is 5pp), not {text}"
        )
    return value


def _delta(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {text}")
    return value


def _series_name(text: str) -> str:
    if not text.strip() or len(text) > 200:
        raise argparse.ArgumentTypeError("a series name is 1 to 200 characters")
    return text


DEFAULT_EPS = 0.05
DEFAULT_DELTA = 0.05
DEFAULT_GATE = "greedy"


def _detector_options(group: Any, *, defaults: bool = True) -> None:
    """--eps, --delta, --gate; without `defaults` they stay None when not given (so that
    `exp run` can refuse them without --series)."""
    group.add_argument(
        "--eps",
        type=_eps,
        default=DEFAULT_EPS if defaults else None,
        metavar="E",
        help="a round improves when it beats the incumbent by more than E (default 0.05 = 5pp)",
    )
    group.add_argument(
        "--delta",
        type=_delta,
        default=DEFAULT_DELTA if defaults else None,
        metavar="D",
        help="the detector's threshold is 1/D: false alarms on average no sooner than every "
        "1/D rounds (default 0.05: 20 rounds; an average run length, not an error rate)",
    )
    group.add_argument(
        "--gate",
        choices=["greedy", "chain"],
        default=DEFAULT_GATE if defaults else None,
        help="greedy: keep a candidate only when it beats the incumbent (default); chain: keep "
        "every one",
    )


def add_series_options(run: argparse.ArgumentParser) -> None:
    """`exp run --series NAME [--eps E --delta D --gate G]`."""
    group = run.add_argument_group("series (know when to stop a loop)")
    group.add_argument(
        "--series",
        type=_series_name,
        metavar="NAME",
        help="tag the finished run as the next round (v1, v2, …) of series NAME and say "
        "whether to continue or stop",
    )
    _detector_options(group, defaults=False)


def _plateau(args: argparse.Namespace) -> int:
    from neens.exp.plateau import plateau_command

    return asyncio.run(plateau_command(args))


def register_plateau(commands: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add `exp plateau` to the `exp` commands; `common` adds --json and --database-url."""
    plateau = commands.add_parser(
        "plateau",
        help="whether a series of runs has reached its plateau: continue, or stop and ship",
        description=(
            "Print one row per round of the series (exp run … --series NAME) and the decision: "
            "continue from the incumbent, or stop and ship the incumbent from before the "
            "plateau. Exits 0 (continue), 3 (stop) or 2 (fewer than 3 rounds, or bad input)."
        ),
    )
    plateau.add_argument(
        "--series", type=_series_name, metavar="NAME", required=True, help="the series"
    )
    _detector_options(plateau)
    common(plateau)
    plateau.set_defaults(func=_plateau)
