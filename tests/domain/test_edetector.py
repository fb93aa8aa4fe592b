"""E-detector recursions (stats-methods §12) against values computed by hand from its
formulas, against their sum-/max-of-products definitions in exact fractions, and the e-value's
defining property by exact enumeration."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neens.domain.edetector import MixtureDetector, changepoint, e_value, step


def _run(xs: list[float], lam: float, recursion: str) -> list[float]:
    detector = MixtureDetector(0.5, (lam,), recursion)  # type: ignore[arg-type]
    return [detector.update(x) for x in xs]


def test_shiryaev_roberts_by_hand() -> None:
    # m0 = 1/2, λ = 1: L = 1.5 after a 0, 0.5 after a 1. M_t = L_t·(M_{t−1} + 1), M_0 = 0.
    #   M1 = 1.5·1 = 1.5; M2 = 1.5·2.5 = 3.75; M3 = 0.5·4.75 = 2.375; M4 = 1.5·3.375 = 5.0625
    assert _run([0, 0, 1, 0], 1.0, "sr") == [1.5, 3.75, 2.375, 5.0625]


def test_cusum_by_hand() -> None:
    # M_t = L_t·max(M_{t−1}, 1): M1 = 1.5; M2 = 2.25; M3 = 0.5·2.25 = 1.125; M4 = 1.6875;
    # after two more 1s it falls below 1 and restarts from 1: M5 = 0.84375, M6 = 0.5·1 = 0.5.
    assert _run([0, 0, 1, 0, 1, 1], 1.0, "cusum") == [1.5, 2.25, 1.125, 1.6875, 0.84375, 0.5]


def test_a_clipped_gain_between_0_and_1_is_an_observation_too() -> None:
    assert e_value(0.25, 0.5, 1.0) == 1.25
    assert e_value(1.0, 0.5, 2.0) == 0.0  # λ = 1/(1 − m0): an improvement wipes it out


def test_the_mixture_of_the_plateau_by_hand() -> None:
    # λ ∈ {0.5, 1, 1.5}, m0 = 1/2. After a 1: L = 0.75, 0.5, 0.25, so M = their mean 0.5.
    # Then a 0: L = 1.25, 1.5, 1.75; M = (1.25·1.75 + 1.5·1.5 + 1.75·1.25)/3 = 6.625/3.
    detector = MixtureDetector(0.5, (0.5, 1.0, 1.5))
    assert detector.value == 0.0
    assert detector.update(1) == 0.5
    assert detector.update(0) == pytest.approx(6.625 / 3, rel=1e-15)


def _definition(xs: list[int], lam: Fraction, m0: Fraction) -> tuple[Fraction, Fraction]:
    """SR = Σ_k ∏_{i=k}^t L_i and CUSUM = max_k ∏_{i=k}^t L_i, in exact arithmetic."""
    t = len(xs)
    products = []
    for k in range(t):
        p = Fraction(1)
        for x in xs[k:]:
            p *= 1 + lam * (m0 - x)
        products.append(p)
    return sum(products, Fraction(0)), max(products)


@given(
    st.lists(st.integers(0, 1), min_size=1, max_size=25),
    st.sampled_from([Fraction(1, 2), Fraction(1), Fraction(3, 2)]),
)
def test_the_recursions_are_the_sum_and_max_of_products(xs: list[int], lam: Fraction) -> None:
    sr, cusum_products = _definition(xs, lam, Fraction(1, 2))
    assert _run(list(map(float, xs)), float(lam), "sr")[-1] == pytest.approx(float(sr), rel=1e-12)
    # L_t·max(M_{t−1}, 1) unrolls to max_k ∏_{i=k}^t L_i: each restart is a new start k.
    cusum = _run(list(map(float, xs)), float(lam), "cusum")[-1]
    assert cusum == pytest.approx(float(cusum_products), rel=1e-12)


@pytest.mark.parametrize("m0", [Fraction(1, 5), Fraction(1, 2), Fraction(4, 5)])
def test_the_e_value_has_mean_at_most_one_while_still_improving(m0: Fraction) -> None:
    # Exact enumeration over Bernoulli(p) observations with p ≥ m0: E[L] = 1 + λ(m0 − p) ≤ 1.
    for lam in [Fraction(0), 1 / (1 - m0) / 2, 1 / (1 - m0)]:
        for p in [m0, (m0 + 1) / 2, Fraction(1)]:
            expected = (1 - p) * (1 + lam * m0) + p * (1 + lam * (m0 - 1))
            assert expected <= 1
            assert (1 - p) * Fraction(e_value(0, float(m0), float(lam))) + p * Fraction(
                e_value(1, float(m0), float(lam))
            ) == pytest.approx(float(expected), rel=1e-12)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="observation"):
        e_value(1.5, 0.5, 1.0)
    with pytest.raises(ValueError, match="lambda"):
        e_value(0, 0.5, 2.5)
    with pytest.raises(ValueError, match="m0"):
        MixtureDetector(1.0, (1.0,))
    with pytest.raises(ValueError, match="at least one"):
        MixtureDetector(0.5, ())


def test_step_is_one_recursion_step() -> None:
    assert step(3.0, 2.0, "sr") == 8.0
    assert step(0.5, 2.0, "cusum") == 2.0


def test_the_changepoint_is_the_start_of_the_run_of_non_improvements() -> None:
    lambdas = (0.5, 1.0, 1.5)
    assert changepoint([1, 1, 0, 0, 0], 0.5, lambdas) == 2
    assert changepoint([0, 0, 0], 0.5, lambdas) == 0
    # One improvement inside a long flat stretch does not move the start past it.
    assert changepoint([1, 0, 0, 0, 1, 0, 0, 0, 0], 0.5, lambdas) == 1
