"""The paired statistics against their oracles: SciPy's paired bootstrap and the exact (ideal)
bootstrap distribution, statsmodels' exact McNemar enumerated case by case, SciPy's beta
distribution integrated numerically, and the reference values of the statistics notes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats
from statsmodels.stats.contingency_tables import mcnemar

from neens.domain.paired import (
    cluster_bootstrap,
    mcnemar_ceiling,
    mcnemar_mde,
    mcnemar_power,
    paired_bootstrap,
    ppi_mean,
    prob_b_beats_a,
    tango_interval,
)


def _pairs(n11: int, n10: int, n01: int, n00: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([1] * n11 + [1] * n10 + [0] * n01 + [0] * n00, dtype=float)
    b = np.array([1] * n11 + [0] * n10 + [1] * n01 + [0] * n00, dtype=float)
    return a, b


def _scipy_interval(a: np.ndarray, b: np.ndarray, seed: int) -> tuple[float, float]:
    result = stats.bootstrap(
        (a, b),
        lambda x, y, axis: y.mean(axis=axis) - x.mean(axis=axis),
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=9999,
        confidence_level=0.95,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _ideal_interval(n10: int, n01: int, n: int) -> tuple[float, float]:
    """The B = ∞ percentile interval: the exact distribution of the resampled mean, the n-fold
    convolution of the empirical pmf of d ∈ {−1, 0, 1}, read at its 2.5% and 97.5% points."""
    step = np.array([n10 / n, 1 - (n10 + n01) / n, n01 / n])
    pmf = np.array([1.0])
    for _ in range(n):
        pmf = np.convolve(pmf, step)
    support = (np.arange(len(pmf)) - n) / n
    cdf = np.cumsum(pmf)
    low = support[np.searchsorted(cdf, 0.025)]
    high = support[np.searchsorted(cdf, 0.975)]
    return float(low), float(high)


@pytest.mark.parametrize(
    "cells",
    [(20, 2, 9, 19), (30, 5, 5, 10), (40, 10, 3, 47), (120, 14, 26, 40), (3, 1, 4, 2)],
)
def test_the_fast_bootstrap_matches_scipys_and_the_ideal_interval(
    cells: tuple[int, int, int, int],
) -> None:
    n11, n10, n01, n00 = cells
    n = sum(cells)
    a, b = _pairs(*cells)
    ours = paired_bootstrap(list(b - a), seed=1)
    assert ours is not None
    ideal = _ideal_interval(n10, n01, n)
    # Monte-Carlo error at 10,000 resamples is about one or two lattice steps of 1/n.
    tolerance = max(0.0125, 2.5 / n)
    for seed in (1, 2, 3):
        theirs = _scipy_interval(a, b, seed)
        assert ours.low == pytest.approx(theirs[0], abs=tolerance)
        assert ours.high == pytest.approx(theirs[1], abs=tolerance)
    assert ours.low == pytest.approx(ideal[0], abs=tolerance)
    assert ours.high == pytest.approx(ideal[1], abs=tolerance)


def test_the_notes_vector_with_b2_c9_n50_excludes_zero() -> None:
    """Vector pboot_n10_2_n01_9_n50: the ideal percentile interval is [0.02, 0.26]."""
    a, b = _pairs(20, 2, 9, 19)
    assert _ideal_interval(2, 9, 50) == pytest.approx((0.02, 0.26))
    ours = paired_bootstrap(list(b - a), seed=5)
    assert ours is not None
    assert ours.low == pytest.approx(0.02, abs=0.021) and ours.low > 0
    assert ours.high == pytest.approx(0.26, abs=0.021)


def test_the_replicates_spread_as_the_plug_in_standard_error() -> None:
    """The ideal bootstrap SD of the mean is sqrt(((n10 + n01)/n − d̄²)/n)."""
    n10, n01, n = 30, 45, 400
    diffs = [-1.0] * n10 + [1.0] * n01 + [0.0] * (n - n10 - n01)
    mean = (n01 - n10) / n
    se = math.sqrt(((n10 + n01) / n - mean**2) / n)
    interval = paired_bootstrap(diffs, seed=11, resamples=40_000)
    assert interval is not None
    z = stats.norm.isf(0.025)
    # Near-normal at this n: the percentile interval is close to mean ± z·se.
    assert interval.low == pytest.approx(mean - z * se, abs=0.006)
    assert interval.high == pytest.approx(mean + z * se, abs=0.006)


def test_fractional_differences_of_several_trials_match_scipy() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, size=80) / 3
    b = np.clip(a + rng.choice([-1, 0, 0, 1, 1], size=80) / 3, 0, 1)
    ours = paired_bootstrap(list(b - a), seed=4)
    theirs = _scipy_interval(a, b, seed=4)
    assert ours is not None
    assert ours.low == pytest.approx(theirs[0], abs=0.0125)
    assert ours.high == pytest.approx(theirs[1], abs=0.0125)


def test_the_bootstrap_is_reproducible_from_its_seed_and_handles_degenerate_data() -> None:
    diffs = list(np.random.default_rng(0).uniform(-1, 1, size=50))
    assert paired_bootstrap(diffs, seed=9) == paired_bootstrap(diffs, seed=9)
    assert paired_bootstrap(diffs, seed=9) != paired_bootstrap(diffs, seed=10)
    assert paired_bootstrap([], seed=1) is None
    zeros = paired_bootstrap([0.0] * 30, seed=1)
    assert zeros is not None and (zeros.low, zeros.high) == (0.0, 0.0)


def _brute_force_power(n: int, p10: float, p01: float, alpha: float = 0.05) -> float:
    """Every table (b, c) with its multinomial weight, rejected by statsmodels' exact McNemar
    in the direction of the true effect (both directions when there is none)."""
    total = 0.0
    for b in range(n + 1):
        for c in range(n - b + 1):
            weight = stats.multinomial.pmf([b, c, n - b - c], n, [p10, p01, 1 - p10 - p01])
            if weight == 0:
                continue
            p = mcnemar([[n - b - c, b], [c, 0]], exact=True).pvalue
            right_way = (c > b) if p01 > p10 else (b > c) if p10 > p01 else b != c
            if p <= alpha and right_way:
                total += weight
    return total


@pytest.mark.parametrize(
    ("n", "p10", "p01"),
    [(12, 0.05, 0.3), (15, 0.0, 0.4), (20, 0.1, 0.1), (18, 0.3, 0.05), (9, 0.0, 0.9)],
)
def test_exact_power_equals_enumerating_every_table_with_statsmodels(
    n: int, p10: float, p01: float
) -> None:
    assert mcnemar_power(n, p10, p01) == pytest.approx(_brute_force_power(n, p10, p01), abs=1e-10)


@pytest.mark.parametrize(
    ("n", "p10", "p01", "expected"),
    [
        (100, 0.05, 0.15, 0.5444),
        (30, 0.0, 0.20, 0.5725),
        (20, 0.0, 0.25, 0.3828),
        (11, 0.0, 0.50, 0.5000),
        (100, 0.10, 0.10, 0.029),
    ],
)
def test_exact_power_matches_the_reference_table(
    n: int, p10: float, p01: float, expected: float
) -> None:
    assert mcnemar_power(n, p10, p01) == pytest.approx(expected, abs=6e-4)


def test_the_ceiling_and_the_mde_match_the_reference_values() -> None:
    assert mcnemar_ceiling(30, 0.2) == pytest.approx(0.57, abs=0.005)
    assert mcnemar_ceiling(20, 0.3) == pytest.approx(0.58, abs=0.005)
    assert mcnemar_mde(30, 0.2) is None  # below 80% even at the ceiling
    for n, q, expected in [(50, 0.2, 0.176), (100, 0.2, 0.128), (400, 0.1, 0.046)]:
        mde = mcnemar_mde(n, q)
        assert mde is not None and mde == pytest.approx(expected, abs=0.001)
        assert mcnemar_power(n, (q - mde) / 2, (q + mde) / 2) >= 0.8


def test_the_mde_is_the_first_effect_with_80_percent_power_on_a_fine_grid() -> None:
    n, q = 60, 0.3
    mde = mcnemar_mde(n, q)
    assert mde is not None
    grid = np.linspace(0, q, 3001)[1:]
    first = next(d for d in grid if mcnemar_power(n, (q - d) / 2, (q + d) / 2) >= 0.8)
    assert mde == pytest.approx(first, abs=q / 3000 + 1e-6)


@pytest.mark.parametrize(("b", "c"), [(0, 3), (2, 8), (5, 5), (9, 1), (0, 0), (30, 41)])
def test_p_b_beats_a_is_the_beta_posterior_mass_above_one_half(b: int, c: int) -> None:
    integral, _ = integrate.quad(lambda t: stats.beta.pdf(t, 1 + c, 1 + b), 0.5, 1)
    assert prob_b_beats_a(b, c) == pytest.approx(integral, abs=1e-9)


def test_p_b_beats_a_matches_the_reference_examples() -> None:
    assert prob_b_beats_a(0, 3) == pytest.approx(0.9375)
    assert prob_b_beats_a(2, 8) == pytest.approx(0.967, abs=5e-4)
    assert prob_b_beats_a(4, 4) == pytest.approx(0.5)


def _scipy_cluster_interval(
    totals: np.ndarray, sizes: np.ndarray, seed: int
) -> tuple[float, float]:
    result = stats.bootstrap(
        (totals, sizes),
        lambda t, z, axis: t.sum(axis=axis) / z.sum(axis=axis),
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=9999,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def test_the_cluster_bootstrap_matches_scipys_on_group_totals() -> None:
    rng = np.random.default_rng(8)
    sizes = rng.integers(1, 9, size=25)
    totals = np.array([rng.integers(-s, s + 1) for s in sizes], dtype=float)
    ours = cluster_bootstrap(list(totals), list(sizes), seed=2)
    assert ours is not None
    for seed in (1, 2):
        theirs = _scipy_cluster_interval(totals, sizes.astype(float), seed)
        assert ours.low == pytest.approx(theirs[0], abs=0.02)
        assert ours.high == pytest.approx(theirs[1], abs=0.02)


def test_with_equal_groups_the_cluster_interval_follows_millers_clustered_se() -> None:
    """With equal group sizes the ideal cluster-bootstrap SD is Miller's clustered SE,
    sqrt(Σ_g (Σ_i (d_gi − d̄))²) / n, equal to statsmodels' cluster-robust OLS SE without the
    small-sample correction."""
    import statsmodels.api as sm

    rng = np.random.default_rng(4)
    groups, size = 200, 6
    shift = rng.choice([-1, 0, 1], size=groups, p=[0.2, 0.5, 0.3])
    d = np.clip(shift[:, None] + rng.choice([-1, 0, 1], size=(groups, size)), -1, 1)
    flat = d.ravel().astype(float)
    labels = np.repeat(np.arange(groups), size)
    se = (
        sm.OLS(flat, np.ones(len(flat)))
        .fit(cov_type="cluster", cov_kwds={"groups": labels, "use_correction": False})
        .bse[0]
    )
    mean = flat.mean()
    miller = math.sqrt(((d - mean).sum(axis=1) ** 2).sum()) / len(flat)
    assert se == pytest.approx(miller, rel=1e-9)
    interval = cluster_bootstrap(
        list(d.sum(axis=1).astype(float)), [size] * groups, seed=6, resamples=40_000
    )
    assert interval is not None
    z = stats.norm.isf(0.025)
    assert interval.low == pytest.approx(mean - z * se, abs=0.01)
    assert interval.high == pytest.approx(mean + z * se, abs=0.01)


def test_the_cluster_bootstrap_of_one_kind_of_group_is_that_ratio() -> None:
    assert cluster_bootstrap([], [], seed=1) is None
    one = cluster_bootstrap([2.0, 2.0], [4, 4], seed=1)
    assert one is not None and (one.low, one.high) == (0.5, 0.5)


def _ppi_by_hand(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray) -> tuple[float, ...]:
    """PPI++ re-derived (Angelopoulos, Duchi & Zrnic 2023): λ̂ = Cov(Y, Ŷ)/((1 + n/N)·Var(Ŷ
    over labeled and unlabeled)) clipped to [0, 1] (ppi_py: the covariance with ddof=0, the
    variance with ddof=1); θ̂ = λ·mean(Ŷ_u) + mean(Y − λŶ); SE² = Var(λŶ_u)/N + Var(Y − λŶ)/n
    (ddof=0); a normal interval, and its two-sided p-value against 0."""
    n, big_n = len(y), len(yhat_u)
    every = np.concatenate([yhat, yhat_u])
    lam = np.clip(np.cov(y, yhat, ddof=0)[0, 1] / ((1 + n / big_n) * every.var(ddof=1)), 0, 1)
    theta = lam * yhat_u.mean() + (y - lam * yhat).mean()
    se = math.sqrt((lam * yhat_u).var() / big_n + (y - lam * yhat).var() / n)
    z = stats.norm.isf(0.025)
    return theta, theta - z * se, theta + z * se, 2 * stats.norm.sf(abs(theta) / se)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppi_mean_matches_ppi_plus_plus_derived_by_hand(seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.choice([-1.0, 0.0, 1.0], size=40)
    yhat = np.where(rng.random(40) < 0.7, y, rng.choice([-1.0, 0.0, 1.0], size=40))
    yhat_u = rng.choice([-1.0, 0.0, 1.0], size=300, p=[0.2, 0.5, 0.3])
    result = ppi_mean(list(y), list(yhat), list(yhat_u))
    theta, low, high, p = _ppi_by_hand(y, yhat, yhat_u)
    assert result.estimate == pytest.approx(theta, abs=1e-10)
    assert result.interval.low == pytest.approx(low, abs=1e-10)
    assert result.interval.high == pytest.approx(high, abs=1e-10)
    assert result.p_value == pytest.approx(p, abs=1e-9)


def test_ppi_mean_leaves_the_warning_filters_alone() -> None:
    import warnings

    before = list(warnings.filters)
    ppi_mean([1.0, 0.0, -1.0], [1.0, 0.0, 0.0], [1.0, 0.0])
    assert warnings.filters == before
    with pytest.raises(ValueError):
        ppi_mean([1.0], [1.0], [0.0])


# Tango's score interval. Reference values: Fagerland, Lydersen & Laake's `contingencytables`
# (the R companion of their 2017 book, test-ch8.R), which orients the table as A − B; here
# they are turned into B − A. Cavo et al. (2012): 59 both, 6 A only, 16 B only, 80 neither.


def test_tango_matches_the_published_worked_values() -> None:
    cavo = tango_interval(6, 16, 161)
    assert cavo is not None
    assert cavo.low == pytest.approx(0.0054, abs=5e-5)
    assert cavo.high == pytest.approx(0.1240, abs=5e-5)
    one_way = tango_interval(0, 3, 3)  # every case fail → pass: Tango's lower end is −12.3pp
    assert one_way is not None
    assert one_way.low == pytest.approx(-0.1230, abs=5e-5) and one_way.high == 1.0
    mirrored = tango_interval(3, 0, 3)
    assert mirrored is not None
    assert mirrored.low == -1.0 and mirrored.high == pytest.approx(0.1230, abs=5e-5)
    assert tango_interval(0, 0, 0) is None


def _score_statistic(b: int, c: int, n: int, delta: float) -> float:
    """Tango's statistic with the restricted maximum likelihood found numerically
    (`scipy.optimize.minimize_scalar` on the multinomial log-likelihood with p01 = p10 + δ),
    not by the closed form the product uses."""
    from scipy.optimize import minimize_scalar

    lowest, highest = max(0.0, -delta), min(1.0, (1 - delta) / 2)

    def minus_log_likelihood(p10: float) -> float:
        p01 = p10 + delta
        rest = max(1 - p10 - p01, 1e-300)
        total = (n - b - c) * math.log(rest)
        total += b * math.log(max(p10, 1e-300)) if b else 0.0
        total += c * math.log(max(p01, 1e-300)) if c else 0.0
        return -total

    found = minimize_scalar(
        minus_log_likelihood, bounds=(lowest, highest), method="bounded", options={"xatol": 1e-13}
    )
    p10 = float(found.x)
    return (c - b - n * delta) / math.sqrt(n * (2 * p10 + delta - delta**2))


@pytest.mark.parametrize(
    ("b", "c", "n"), [(6, 16, 161), (2, 9, 50), (0, 0, 2), (4, 4, 400), (5, 1, 30)]
)
def test_tango_ends_are_where_the_score_statistic_is_plus_or_minus_z(
    b: int, c: int, n: int
) -> None:
    """The interval inverts the score test: at its ends the statistic, with p10 fitted
    numerically under B − A = δ, is ±z (the variance under δ is p10 + p01 − δ² = 2·p10 + δ − δ²)."""
    interval = tango_interval(b, c, n)
    assert interval is not None
    z = stats.norm.isf(0.025)
    assert _score_statistic(b, c, n, interval.low) == pytest.approx(z, abs=1e-5)
    assert _score_statistic(b, c, n, interval.high) == pytest.approx(-z, abs=1e-5)


def test_two_agreeing_cases_give_a_wide_score_interval_and_400_a_narrow_one() -> None:
    few = tango_interval(0, 0, 2)
    many = tango_interval(4, 4, 400)
    assert few is not None and many is not None
    assert few.low < -0.6 and few.high > 0.6
    assert -0.03 < many.low < 0 < many.high < 0.03


def _low(down: float, up: float, n: int) -> float:
    interval = tango_interval(down, up, n)
    assert interval is not None
    return interval.low


def _declares_non_inferior(n: int, margin: float, p10: float, p01: float) -> float:
    """P(the score interval's lower end is above −M) by enumerating every (b, c) of n cases
    under the multinomial (p10, p01, 1 − p10 − p01)."""
    rows = [(b, c) for b in range(n + 1) for c in range(n + 1 - b)]
    clears = [(b, c) for b, c in rows if _low(b, c, n) > -margin]
    if not clears:
        return 0.0
    counts = np.array([[b, c, n - b - c] for b, c in clears])
    return float(stats.multinomial.pmf(counts, n, [p10, p01, 1 - p10 - p01]).sum())


@pytest.mark.parametrize("n", [10, 20, 30])
def test_the_score_margin_rarely_declares_non_inferiority_when_b_is_exactly_m_worse(n: int) -> None:
    """At a true B − A of exactly −M the lower end of a 95% interval should clear −M at most
    2.5% of the time. Tango's is approximate: the worst found over these cells is about 2.7%."""
    worst = 0.0
    for margin in (0.03, 0.1, 0.2):
        for p01 in (0.0, 0.01, 0.05, 0.2):
            worst = max(worst, _declares_non_inferior(n, margin, p01 + margin, p01))
    assert 0.01 < worst <= 0.03


def test_fractional_counts_of_two_trials_keep_the_margin_honest() -> None:
    """Two trials a side: d ∈ {−1, −½, 0, ½, 1}; the counts are the sums of the negative and of
    the positive parts. Every outcome of 10 cases enumerated at a true mean of exactly −M."""
    n = 10
    outcomes = np.array(
        [
            (i, j, k, m, n - i - j - k - m)
            for i in range(n + 1)
            for j in range(n + 1 - i)
            for k in range(n + 1 - i - j)
            for m in range(n + 1 - i - j - k)
        ]
    )  # counts of d = −1, −½, ½, 1, 0
    down = outcomes[:, 0] + outcomes[:, 1] / 2
    up = outcomes[:, 2] / 2 + outcomes[:, 3]
    lows = np.array([_low(float(d), float(u), n) for d, u in zip(down, up, strict=True)])
    worst = 0.0
    for margin in (0.05, 0.1, 0.2):
        for half_up, one_up in ((0.0, 0.0), (0.05, 0.05), (0.2, 0.0), (0.0, 0.2)):
            for share in (0.0, 0.5, 1.0):
                deficit = margin + half_up / 2 + one_up
                probs = [share * deficit, 2 * (1 - share) * deficit, half_up, one_up]
                probs.append(1 - sum(probs))
                chance = stats.multinomial.pmf(outcomes[lows > -margin], n, probs).sum()
                worst = max(worst, float(chance))
    assert 0.005 < worst <= 0.03
