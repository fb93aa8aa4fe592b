"""A `prod_window` baseline's `range`: how far back production is read, such as `30m`, `24h`, `7d`.

One parser for the API, which refuses a bad range when a run is created, and the engine, which
reads the stored range when the run finishes, so a range accepted once is read the same way
later. The SDK (dependency-free) keeps its own copy for `--baseline prod:WINDOW`;
tests/shared/baseline_ranges.json holds both to the same cases.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

__all__ = ["MAX_RANGE", "RANGE_UNITS_S", "parse_range"]

RANGE_UNITS_S: Final = {"m": 60, "h": 3600, "d": 86400}
MAX_RANGE: Final = timedelta(days=366)
"""The longest window a baseline may read."""

_RANGE: Final = re.compile(r"([1-9][0-9]{0,3})([mhd])")


def parse_range(text: str) -> timedelta:
    """The window a range spans: a whole number from 1 to 9999 and a unit, `m`, `h` or `d`,
    nothing around them, at most `MAX_RANGE`. Raises ValueError saying what a range looks like."""
    match = _RANGE.fullmatch(text)
    if match is None:
        raise ValueError("range must look like 30m, 24h or 7d")
    window = timedelta(seconds=int(match[1]) * RANGE_UNITS_S[match[2]])
    if window > MAX_RANGE:
        raise ValueError("range must be at most 366 days")
    return window
