"""How an imported item's repeats fold into its stored verdict, checked case by case."""

from __future__ import annotations

import pytest

from neens.store.run_imports import ImportedTrial, item_result


def _t(
    trial: int,
    *,
    passed: bool | None = None,
    score: float | None = None,
    error: str | None = None,
    output: str | None = None,
) -> ImportedTrial:
    return ImportedTrial(trial, output, score, passed, error, None, None)


@pytest.mark.parametrize(
    ("trials", "status", "passed", "score"),
    [
        ((_t(0, passed=True, score=1.0),), "scored", True, 1.0),
        ((_t(0, passed=True, score=1.0), _t(1, passed=False, score=0.0)), "scored", False, 0.5),
        ((_t(0, passed=True), _t(1, passed=True), _t(2, passed=True)), "scored", True, None),
        # A repeat that errored without a verdict counts as failed; its missing score is left out.
        ((_t(0, passed=True, score=0.8), _t(1, error="timeout")), "scored", False, 0.8),
        # An error with a verdict (a limit hit, still graded) keeps the verdict.
        ((_t(0, passed=True, error="token limit"),), "scored", True, None),
        # A score without a threshold gives no verdict.
        ((_t(0, score=0.25), _t(1, score=0.75)), "scored", None, 0.5),
        ((_t(0, error="rate limited"), _t(1, error="again")), "error", None, None),
    ],
)
def test_repeats_fold_strictly(
    trials: tuple[ImportedTrial, ...], status: str, passed: bool | None, score: float | None
) -> None:
    result = item_result(trials)
    assert (result.status, result.passed, result.score) == (status, passed, score)


def test_the_output_and_the_error_are_the_first_repeat_s() -> None:
    trials = (_t(1, error="second", output="b"), _t(0, error="first"))
    result = item_result(trials)
    assert (result.output, result.error) == ("b", "first")
