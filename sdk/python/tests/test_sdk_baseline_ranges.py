"""The SDK's reading of `--baseline prod:WINDOW`, on the cases it shares with the server.

tests/shared/baseline_ranges.json (at the repository's root) is the one table of those cases;
the platform's tests run it against the server's `range` parser, so a window the CLI accepts is
one the server accepts and reads as the same length. Read with the standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from neens_eval.eval_args import window_seconds

TABLE_PATH = Path(__file__).resolve().parents[3] / "tests" / "shared" / "baseline_ranges.json"
TABLE = json.loads(TABLE_PATH.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "case", TABLE["cases"], ids=[repr(case["range"]) for case in TABLE["cases"]]
)
def test_each_shared_range_reads_as_its_expected_window(case: dict[str, Any]) -> None:
    assert window_seconds(case["range"]) == case["seconds"]
