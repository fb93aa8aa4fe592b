"""The statistics home: the mean and the proportion, with no data never read as 0.

The standard library's `statistics` module is the oracle: `statistics.mean` computes with exact
fractions, so agreeing with it to 1e-12 relative shows the summation loses nothing.
"""

from __future__ import annotations

import math
import random
import statistics
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neens.domain.stats import mean, proportion

FINITE = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)


def test_the_mean_of_nothing_is_none_not_zero() -> None:
    assert mean([]) is None
    assert mean(value for value in ()) is None


@given(st.lists(FINITE, min_size=1, max_size=50))
def test_the_mean_agrees_with_the_exact_mean_of_the_statistics_module(values: list[float]) -> None:
    expected = statistics.mean(values)
    result = mean(values)

    assert result is not None
    assert math.isclose(result, expected, rel_tol=1e-12, abs_tol=1e-12)
    assert result == statistics.fmean(values)


@given(st.lists(FINITE, min_size=2, max_size=50), st.randoms(use_true_random=False))
def test_the_mean_does_not_depend_on_the_order_of_its_values(
    values: list[float], rng: random.Random
) -> None:
    shuffled = list(values)
    rng.shuffle(shuffled)

    assert mean(shuffled) == mean(values)


def test_the_mean_of_many_small_costs_keeps_their_tail() -> None:
    costs = [0.1] * 10

    assert sum(costs) / 10 != 0.1  # naive summation drifts
    assert mean(costs) == 0.1


def test_a_nan_makes_the_mean_nan_rather_than_being_skipped() -> None:
    result = mean([1.0, math.nan])

    assert result is not None and math.isnan(result)


def test_the_proportion_of_nothing_is_none_not_zero() -> None:
    assert proportion(0, 0) is None


@given(
    st.integers(min_value=1, max_value=10_000).flatmap(
        lambda n: st.tuples(st.integers(0, n), st.just(n))
    )
)
def test_the_proportion_is_hits_over_total(counts: tuple[int, int]) -> None:
    hits, total = counts

    assert proportion(hits, total) == float(Fraction(hits, total))


@pytest.mark.parametrize(("hits", "total"), [(-1, 3), (4, 3), (0, -1)])
def test_counts_that_cannot_describe_a_sample_are_refused(hits: int, total: int) -> None:
    with pytest.raises(ValueError, match="0 <= hits <= total"):
        proportion(hits, total)
