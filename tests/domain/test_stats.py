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
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from neens.domain.stats import (
    exact_sum,
    fewest_changed_to_reject,
    mcnemar_exact,
    mean,
    proportion,
    wilson_interval,
)

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


HUGE = st.floats(min_value=1e306, max_value=1.7976931348623157e308)


@given(st.lists(HUGE, min_size=2, max_size=20))
def test_the_mean_of_doubles_too_large_to_sum_is_their_exact_mean(values: list[float]) -> None:
    """fsum raises past the largest double; the mean of doubles is always one. Exact fractions
    are the oracle: the sum is scaled by a power of two, which loses nothing, so the one
    rounding left is the division's."""
    result = mean(values)
    expected = sum(Fraction(v) for v in values) / len(values)

    assert result is not None and math.isfinite(result)
    assert abs(Fraction(result) - expected) <= abs(expected) * Fraction(1, 2**52)


def test_a_sum_too_large_to_represent_is_none_never_infinity() -> None:
    assert exact_sum([1e308, 1e308]) is None  # fsum raises "intermediate overflow"
    assert exact_sum([1.0, math.inf]) is None
    assert exact_sum([math.inf, -math.inf]) is None  # fsum raises ValueError here
    assert exact_sum([0.1] * 10) == 1.0
    assert exact_sum([]) == 0.0
    nan = exact_sum([1.0, math.nan])
    assert nan is not None and math.isnan(nan)


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


# --- Wilson interval and exact McNemar: checked against statsmodels and SciPy themselves ---------

COUNTS = st.integers(min_value=1, max_value=2000).flatmap(
    lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
)


@given(COUNTS)
def test_the_wilson_interval_is_statsmodels_and_scipys(counts: tuple[int, int]) -> None:

    hits, total = counts
    result = wilson_interval(hits, total)
    sm_low, sm_high = proportion_confint(hits, total, alpha=0.05, method="wilson")
    scipy_ci = binomtest(hits, total).proportion_ci(confidence_level=0.95, method="wilson")

    assert result is not None
    assert result.low == pytest.approx(sm_low, rel=1e-12, abs=1e-15)
    assert result.high == pytest.approx(sm_high, rel=1e-12, abs=1e-15)
    assert result.low == pytest.approx(scipy_ci.low, rel=1e-9, abs=1e-12)
    assert result.high == pytest.approx(scipy_ci.high, rel=1e-9, abs=1e-12)
    assert 0.0 <= result.low <= hits / total <= result.high <= 1.0


def test_the_wilson_interval_of_no_trial_is_no_data_not_an_interval_around_zero() -> None:
    assert wilson_interval(0, 0) is None


def test_the_wilson_interval_at_zero_hits_starts_exactly_at_zero() -> None:

    raw_low, _ = proportion_confint(0, 1000, alpha=0.05, method="wilson")
    result = wilson_interval(0, 1000)

    assert raw_low != 0.0  # the library's floating point leaves ~2e-19
    assert result is not None and result.low == 0.0


@pytest.mark.parametrize(("hits", "total"), [(-1, 3), (4, 3), (0, -1)])
def test_the_wilson_interval_refuses_counts_that_are_no_sample(hits: int, total: int) -> None:
    with pytest.raises(ValueError):
        wilson_interval(hits, total)


@given(
    st.integers(min_value=0, max_value=60),
    st.integers(min_value=0, max_value=60),
    st.integers(min_value=0, max_value=60),
    st.integers(min_value=0, max_value=60),
)
def test_exact_mcnemar_is_the_binomial_test_on_the_discordant_items(
    b: int, c: int, n11: int, n00: int
) -> None:

    p_value = mcnemar_exact(b, c, n11, n00)

    assert p_value == mcnemar([[n11, b], [c, n00]], exact=True).pvalue
    if b + c:
        assert p_value == pytest.approx(binomtest(c, b + c, 0.5).pvalue, rel=1e-12)
    else:
        assert p_value == 1.0


def test_exact_mcnemar_at_six_one_sided_pairs_is_the_first_significant_table() -> None:
    assert mcnemar_exact(0, 5, 10, 10) == pytest.approx(0.0625)
    assert mcnemar_exact(0, 6, 10, 10) == pytest.approx(0.03125)


def test_exact_mcnemar_refuses_a_negative_cell() -> None:
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2, 3, 4)


@pytest.mark.parametrize("alpha", [0.5, 0.1, 0.05, 0.01, 0.001, 1e-9])
def test_the_fewest_changed_pairs_to_reject_are_the_first_all_one_way_p_below_alpha(
    alpha: float,
) -> None:
    """Exact enumeration: all m pairs one way is the most extreme outcome, p = 2 · (1/2)ᵐ
    (capped at 1), so the fewest is the first m where that falls below alpha."""
    m = 1
    while min(Fraction(1), 2 * Fraction(1, 2) ** m) >= Fraction(alpha):
        m += 1
    assert fewest_changed_to_reject(alpha) == m
    assert fewest_changed_to_reject(0.05) == 6


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, float("nan")])
def test_the_fewest_changed_pairs_need_an_alpha_between_0_and_1(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        fewest_changed_to_reject(alpha)
