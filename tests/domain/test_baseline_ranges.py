"""The server's reading of a baseline `range`, on the cases it shares with the SDK.

tests/shared/baseline_ranges.json is the one table of those cases; sdk/python/tests runs it
against the SDK's `--baseline prod:WINDOW`, so a window the CLI accepts is one the server accepts
and reads as the same length.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from neens.domain.baseline import parse_range

TABLE = json.loads((Path(__file__).parents[1] / "shared" / "baseline_ranges.json").read_text())


@pytest.mark.parametrize(
    "case", TABLE["cases"], ids=[repr(case["range"]) for case in TABLE["cases"]]
)
def test_each_shared_range_reads_as_its_expected_window(case: dict[str, Any]) -> None:
    if case["seconds"] is None:
        with pytest.raises(
            ValueError, match=r"^range must (look like 30m, 24h or 7d|be at most 366 days)$"
        ):
            parse_range(case["range"])
    else:
        assert parse_range(case["range"]) == timedelta(seconds=case["seconds"])


def test_a_well_formed_range_beyond_the_limit_says_so() -> None:
    with pytest.raises(ValueError, match="at most 366 days"):
        parse_range("367d")
