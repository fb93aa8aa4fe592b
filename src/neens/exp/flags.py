"""Argument types of the `neens exp` flags that `neens_eval.arg_types` has no type for.

Each refuses a bad value with a message argparse prints after the flag's name, and exits 2
(`argument --seed: -5 is negative`).
"""

from __future__ import annotations

import argparse
from typing import Final

from neens_eval.arg_types import positive_int, whole_number

from neens.exp.spec import MAX_TRIALS

MAX_CONCURRENCY: Final = 1000
"""The most case-trials (or calls) `--concurrency` may keep in flight at once."""


def seed(text: str) -> int:
    """A random seed: a whole number, 0 or more (numpy's generators take no negative seed), of
    any size: `exp compare` prints a 64-bit one, past what `count` takes."""
    return whole_number(text)


def trials(text: str) -> int:
    """A whole number from 1 to `MAX_TRIALS`, as a spec's `trials` (a larger --trials planned
    that many case-trials in memory before running any)."""
    value = positive_int(text)
    if value > MAX_TRIALS:
        raise argparse.ArgumentTypeError(f"{text} is above the most allowed, {MAX_TRIALS}")
    return value


def concurrency(text: str) -> int:
    """A whole number from 1 to `MAX_CONCURRENCY`."""
    value = positive_int(text)
    if value > MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"{text} is above the most allowed, {MAX_CONCURRENCY}")
    return value


def named(text: str) -> str:
    """A value that names something (a file, a dataset, an experiment, a store): not blank,
    since a blank value would otherwise mean "the default" without saying so."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text
