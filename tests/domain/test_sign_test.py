"""The sign test and the median-of-differences interval (stats-methods §10), checked against
statsmodels, SciPy and exact binomial enumeration; and `exp metrics`' verdict rule, including
an A/A simulation that counts false verdicts."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest, quantile_test
from statsmodels.stats.descriptivestats import sign_test as sm_sign_test

from neens.domain.metric_pairs import MIN_PAIRS, compare_metric, run_order
from neens.domain.stats import median_difference_interval, sign_test

# The vectors of stats-methods §10: d = B − A per pair, integer ms.
TEN_OF_ELEVEN = [-40, -35, -30, -20, -50, -10, 5, -25, -45, -15, -60]
NINE_OF_ELEVEN = [-40, -35, -30, -20, -50, 10, 5, -25, -45, -15, -60]
ONE_TIE = [-40, -35, -30, -20, -50, -10, 0, -25, -45, -15, -60]


def test_ten_of_eleven_pairs_in_one_direction_is_significant() -> None:
    result = sign_test(TEN_OF_ELEVEN)
    assert (result.positive, result.negative, result.ties) == (1, 10, 0)
    assert result.p == pytest.approx(0.01171875, rel=1e-12)
    assert result.p == pytest.approx(sm_sign_test(np.array(TEN_OF_ELEVEN), 0)[1], rel=1e-12)


def test_nine_of_eleven_is_not() -> None:
    result = sign_test(NINE_OF_ELEVEN)
    assert result.p == pytest.approx(0.0654296875, rel=1e-12)  # 2·(1 + 11 + 55)/2¹¹
    assert result.p > 0.05


def test_a_tie_is_dropped_from_the_sign_test() -> None:
    result = sign_test(ONE_TIE)
    assert (result.positive, result.negative, result.ties) == (0, 10, 1)
    assert result.p == pytest.approx(2 / 2**10, rel=1e-12)  # 0.00195, n = 10
    assert result.p == pytest.approx(sm_sign_test(np.array(ONE_TIE), 0)[1], rel=1e-12)


def test_only_ties_is_no_evidence_not_an_error() -> None:
    assert sign_test([0, 0, 0]).p == 1.0
    assert sign_test([]).p == 1.0


@given(st.lists(st.integers(-5, 5), min_size=1, max_size=40))
def test_the_sign_test_is_scipys_binomial_test(diffs: list[int]) -> None:
    result = sign_test(diffs)
    n = result.positive + result.negative
    if n:
        assert result.p == pytest.approx(binomtest(result.positive, n, 0.5).pvalue, rel=1e-12)


def test_the_interval_at_eleven_pairs_is_the_second_and_tenth_order_statistics() -> None:
    interval = median_difference_interval(TEN_OF_ELEVEN)
    ordered = sorted(TEN_OF_ELEVEN)
    assert interval == (ordered[1], ordered[9]) == (-50, -10)
    # Its coverage by exact enumeration: 1 − 2·P(Bin(11, ½) ≤ 1) = 1 − 24/2048 = 98.8%.
    coverage = 1 - 2 * sum(math.comb(11, k) for k in range(2)) / 2**11
    assert coverage == pytest.approx(0.98828125) and coverage >= 0.95


@given(st.lists(st.integers(-20, 20), min_size=1, max_size=30))
def test_the_interval_is_scipys_quantile_test_interval(diffs: list[int]) -> None:
    found = quantile_test(diffs, q=0, p=0.5).confidence_interval(0.95)
    interval = median_difference_interval(diffs)
    if math.isnan(found.low) or math.isnan(found.high):
        assert interval is None
    else:
        assert interval == (found.low, found.high)


def test_below_six_pairs_there_is_no_95_interval() -> None:
    assert median_difference_interval([1, 2, 3, 4, 5]) is None
    assert median_difference_interval([1, 2, 3, 4, 5, 6]) == (1, 6)
    assert median_difference_interval([]) is None
    # And no sign test reaches 0.05 below six pairs: 5 of 5 gives 2/2⁵.
    assert sign_test([1] * 5).p == pytest.approx(0.0625) and sign_test([1] * 6).p < 0.05
    assert MIN_PAIRS == 6


def test_pairs_alternate_which_arm_runs_first() -> None:
    assert run_order(4) == [(0, 1), (1, 0), (0, 1), (1, 0)]


def test_a_clear_drop_in_a_lower_is_better_metric_is_better() -> None:
    a = [2300 + i for i in range(11)]
    b = [x + d for x, d in zip(a, TEN_OF_ELEVEN, strict=True)]
    result = compare_metric("lcp_ms", a, b, higher_is_better=False)
    assert result.median_difference == -30  # median(B − A), the paired estimand
    assert result.interval == (-50, -10)
    assert result.verdict == "better"
    assert compare_metric("score", a, b, higher_is_better=True).verdict == "worse"


def test_median_of_differences_is_not_difference_of_medians() -> None:
    a = [10, 20, 30, 40, 50, 60]
    b = [12, 25, 33, 41, 70, 61]
    result = compare_metric("m", a, b, higher_is_better=True)
    assert result.median_difference == 2.5  # median of [2, 5, 3, 1, 20, 1]
    assert result.median_b - result.median_a == 2.0  # 37 − 35


def test_nine_of_eleven_is_no_change_even_though_most_pairs_moved() -> None:
    a = [100.0] * 11
    b = [100.0 + d for d in NINE_OF_ELEVEN]
    assert compare_metric("m", a, b, higher_is_better=False).verdict == "no change"


def test_the_sign_test_alone_does_not_make_a_change() -> None:
    # 9 of 9 untied pairs went down (sign test p = 0.004) but two ties put 0 at the tenth
    # order statistic, so the interval does not exclude 0: no change.
    diffs = [-5] * 9 + [0, 0]
    assert sign_test(diffs).p < 0.05
    result = compare_metric("m", [50] * 11, [50 + d for d in diffs], higher_is_better=False)
    assert result.interval == (-5, 0)
    assert result.verdict == "no change"


def test_a_against_itself_200_times_gives_at_most_5_percent_false_verdicts() -> None:
    rng = random.Random(20261202)
    false_verdicts = 0
    runs = 200
    for run in range(runs):
        true_value = rng.uniform(50, 5000)
        # Three noise shapes: gaussian, right-skewed (latency-like), and rounded to whole ms
        # (ties).
        if run % 3 == 0:
            draw = [true_value + rng.gauss(0, true_value * 0.05) for _ in range(22)]
        elif run % 3 == 1:
            draw = [true_value * rng.lognormvariate(0, 0.2) for _ in range(22)]
        else:
            draw = [round(true_value + rng.gauss(0, 3)) for _ in range(22)]
        result = compare_metric("m", draw[:11], draw[11:], higher_is_better=run % 2 == 0)
        false_verdicts += result.verdict != "no change"
    assert false_verdicts <= 0.05 * runs, false_verdicts
