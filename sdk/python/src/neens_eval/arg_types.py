"""Argument types for command-line flags: numbers, fractions, seconds and counts, each refusing
a bad value with a message argparse prints after the flag's name (`argument --concurrency: 0
must be at least 1`). Shared by every `neens` command, the SDK's and the platform's.
"""

from __future__ import annotations

import argparse


def number(text: str) -> float:
    """A finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def fraction(text: str) -> float:
    """A number from 0 to 1, both included."""
    value = number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1 (0.9 means 90%)")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds above 0."""
    value = number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


MAX_COUNT = 2**63 - 1
"""The largest count a flag takes: what a database can store and compare (a larger one made
SQLite's driver raise "Python int too large to convert to SQLite INTEGER")."""


def whole_number(text: str) -> int:
    """A whole number, 0 or more, however large (a seed: a 64-bit hash is printed as one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def count(text: str) -> int:
    """A whole number, 0 or more, at most `MAX_COUNT`."""
    value = whole_number(text)
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{text} is too large (at most {MAX_COUNT})")
    return value


def positive_int(text: str) -> int:
    """A whole number, 1 or more."""
    value = count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value
