"""A composite's weighted mean: exact for ordinary weights, and finite for weights of any size.

The oracle is `fractions.Fraction` arithmetic, which is exact: Σ wᵢ·xᵢ / Σ wᵢ computed on the
floats' exact values, rounded once to a float."""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neens.domain.judges import Verdict, composite, weighted_mean

SMALLEST = 5e-324
"""The smallest positive float (a subnormal)."""
LARGEST = sys.float_info.max


def exact_mean(weights: list[float], values: list[float]) -> float:
    numerator = sum((Fraction(w) * Fraction(x) for w, x in zip(weights, values, strict=True)))
    return float(numerator / sum(Fraction(w) for w in weights))


def textbook_mean(weights: list[float], values: list[float]) -> float:
    """The formula the composite used before (it overflowed for weights near the largest
    float)."""
    return math.fsum(w * x for w, x in zip(weights, values, strict=True)) / math.fsum(weights)


weights_and_values = st.lists(
    st.tuples(
        st.floats(min_value=SMALLEST, max_value=LARGEST, allow_subnormal=True),
        st.floats(min_value=0, max_value=1),
    ),
    min_size=1,
    max_size=20,
)


@pytest.mark.parametrize(
    ("weights", "values", "mean"),
    [
        ([1e308, 1e308], [1.0, 0.0], 0.5),
        ([LARGEST, LARGEST, LARGEST], [1.0, 0.5, 0.0], 0.5),
        ([LARGEST, LARGEST], [0.25, 0.75], 0.5),
        ([SMALLEST], [0.3], 0.3),
        ([SMALLEST, SMALLEST], [1.0, 0.0], 0.5),
        ([SMALLEST, 3 * SMALLEST], [1.0, 0.0], 0.25),
        ([LARGEST, SMALLEST], [0.8, 0.0], 0.8),
        ([1.0, 3.0], [1.0, 0.6], 0.7),
    ],
)
def test_extreme_weights_give_the_exact_mean(
    weights: list[float], values: list[float], mean: float
) -> None:
    assert weighted_mean(weights, values) == pytest.approx(mean, rel=1e-15)
    assert weighted_mean(weights, values) == pytest.approx(exact_mean(weights, values), rel=1e-15)


def test_a_composite_of_huge_weights_scores_instead_of_raising() -> None:
    """Two weights of 1e308 overflowed `math.fsum` ("intermediate overflow in fsum"), and every
    item a run scored with that composite errored."""
    verdict = composite(
        [(1e308, "shipped", Verdict.scored(1.0, "")), (1e308, "refund", Verdict.scored(0.0, ""))]
    )
    assert verdict.score == 0.5
    assert "'shipped' 1.00 × 1e+308" in verdict.reason


def test_a_composite_of_the_smallest_weights_scores() -> None:
    verdict = composite([(SMALLEST, "a", Verdict.scored(0.9, ""))])
    assert verdict.score == 0.9


@given(weights_and_values)
def test_the_mean_of_any_positive_weights_is_finite_and_within_the_values(
    parts: list[tuple[float, float]],
) -> None:
    weights = [w for w, _ in parts]
    values = [x for _, x in parts]
    mean = weighted_mean(weights, values)
    assert math.isfinite(mean)
    # Two roundings (a product, the division) may take it one unit in the last place out, and
    # a subnormal product may round by a whole subnormal step either way (1.25 x 5e-324 / 1.25
    # gives 1e-323): an absolute 1e-300 of slack on both sides.
    assert min(values) * (1 - 1e-15) - 1e-300 <= mean <= max(values) * (1 + 1e-15) + 1e-300
    score = composite([(w, f"j{i}", Verdict.scored(x, "")) for i, (w, x) in enumerate(parts)])
    assert score.score is not None and 0.0 <= score.score <= 1.0


@given(weights_and_values)
def test_the_mean_is_the_exact_mean_for_weights_of_any_size(
    parts: list[tuple[float, float]],
) -> None:
    """Weights that scale below the smallest float next to the largest weight drop out; their
    share of the mean is under 2⁻¹⁰⁷⁴ of it, so the mean stays within a few units in the last
    place of the exact one (an absolute bound, as the values are at most 1)."""
    weights = [w for w, _ in parts]
    values = [x for _, x in parts]
    assert weighted_mean(weights, values) == pytest.approx(
        exact_mean(weights, values), rel=1e-14, abs=1e-300
    )


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=1e-6, max_value=1e6), st.floats(min_value=0.001, max_value=1)
        ),
        min_size=1,
        max_size=20,
    )
)
def test_ordinary_weights_give_the_textbook_mean_bit_for_bit(
    parts: list[tuple[float, float]],
) -> None:
    """Scaling by a power of two is exact, so nothing changed for the weights people use."""
    weights = [w for w, _ in parts]
    values = [x for _, x in parts]
    assert weighted_mean(weights, values) == textbook_mean(weights, values)
    assert weighted_mean(weights, values) == pytest.approx(exact_mean(weights, values), rel=1e-14)


@pytest.mark.parametrize(
    ("weights", "values"),
    [([1.0, 3.0], [1.0, 0.6]), ([2.0, 1.0], [1.0, 0.4]), ([1.0, 1.0, 1.0], [0.7, 0.7, 0.7])],
)
def test_ordinary_weights_give_the_exact_mean_once_rounded(
    weights: list[float], values: list[float]
) -> None:
    scores = [
        (w, f"j{i}", Verdict.scored(x, ""))
        for i, (w, x) in enumerate(zip(weights, values, strict=True))
    ]
    assert composite(scores).score == round(exact_mean(weights, values), 12)
