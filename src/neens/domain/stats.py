"""The statistics every number of a run is computed with, written once.

One rule runs through them: no data is never 0. The mean of nothing and the proportion of
nothing are None, so "no item was scored" is never shown, averaged or gated on as a score of 0
or a pass rate of 0%. Callers pass only the values that are known (an unpriced session has no
cost, not a cost of 0) and so decide what "known" means; these functions decide nothing else.

Sums use `math.fsum` (Shewchuk's exactly rounded summation), so a mean does not depend on the
order of its values and many small costs do not lose their tail to rounding.

Intervals and tests are not re-derived here: they wrap statsmodels (which checks itself against
SciPy and R), imported on first use so that importing this module (the gate, the metrics) stays
cheap; statsmodels and SciPy together take seconds to import.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple


def mean(values: Iterable[float]) -> float | None:
    """The arithmetic mean x̄ = (x₁ + … + xₙ) / n, or None when n = 0.

    The sum is exactly rounded (`math.fsum`) before the one division, as `statistics.fmean`
    computes it; only when that sum is too large for a double are the values scaled down by a
    power of two first (exactly) and the mean scaled back.
    A NaN among the values makes the mean NaN: it is not skipped.
    """
    known = list(values)
    if not known:
        return None
    try:
        return math.fsum(known) / len(known)
    except OverflowError:  # the sum is too large for a double; the mean of doubles never is
        shift = len(known).bit_length()  # scaling by a power of two loses no digit
        scaled = math.fsum(math.ldexp(x, -shift) for x in known) / len(known)
        return math.ldexp(scaled, shift)


def exact_sum(values: Iterable[float]) -> float | None:
    """The exactly rounded sum (`math.fsum`), or None when it is too large to represent: an
    infinity among the values, or a sum past the largest double (fsum raises there)."""
    try:
        total = math.fsum(values)
    except (OverflowError, ValueError):  # ValueError: both infinities, whose sum is no number
        return None
    return total if math.isfinite(total) or math.isnan(total) else None


def proportion(hits: int, total: int) -> float | None:
    """The sample proportion p̂ = k / n (k `hits` out of n `total`), or None when n = 0.

    A pass rate is one: passed items over the items with a verdict. ValueError when the counts
    cannot describe a sample (negative, or more hits than trials): that is a caller's bug.
    """
    if total < 0 or not 0 <= hits <= total:
        raise ValueError(f"a proportion needs 0 <= hits <= total, got {hits} of {total}")
    return hits / total if total else None


class Interval(NamedTuple):
    """A two-sided confidence interval, both ends inside [0, 1] for a proportion."""

    low: float
    high: float


def wilson_interval(hits: int, total: int, *, confidence: float = 0.95) -> Interval | None:
    """The Wilson score interval for k `hits` out of n `total` (Wilson 1927), or None when n = 0.

    statsmodels' `proportion_confint(k, n, alpha=1 - confidence, method="wilson")`, identical to
    SciPy's `binomtest(k, n).proportion_ci(confidence, method="wilson")`. With p̂ = k/n and
    z = z₁₋α/₂ the centre is (p̂ + z²/2n)/(1 + z²/n) and the half-width
    z/(1 + z²/n)·√(p̂(1−p̂)/n + z²/4n²); unlike the Wald interval it does not collapse at k = 0 or
    k = n. At k = 0 the lower end is exactly 0 and at k = n the upper end exactly 1 (the
    library's floating point leaves about 2e-19 at k = 0); the ends are clamped to [0, 1].

    n = 0 is no data: None, never an interval around 0% (statsmodels would return NaNs and warn;
    SciPy raises). Trials must be independent: one per item, never an item's pooled repeats.
    """
    if total < 0 or not 0 <= hits <= total:
        raise ValueError(f"an interval needs 0 <= hits <= total, got {hits} of {total}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 exclusive, got {confidence}")
    if total == 0:
        return None
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(hits, total, alpha=1 - confidence, method="wilson")
    return Interval(
        0.0 if hits == 0 else min(max(float(low), 0.0), 1.0),
        1.0 if hits == total else min(max(float(high), 0.0), 1.0),
    )


def mcnemar_exact(b: int, c: int, n11: int, n00: int) -> float:
    """The two-sided p-value of the exact McNemar test on a paired 2×2 table (McNemar 1947).

    Items judged by both sides: n11 both pass, b only the first (reference) side passes, c only
    the second passes, n00 both fail. statsmodels'
    `contingency_tables.mcnemar([[n11, b], [c, n00]], exact=True).pvalue`, which is
    min(1, 2·Binom.cdf(min(b, c); b + c, ½)), the same as SciPy's `binomtest(c, b + c, 0.5)`.
    Only the discordant cells b and c carry information; with none (b = c = 0) the two sides
    agree on every item and the p-value is 1 (SciPy's binomtest would raise). The exact
    conditional test is conservative (Fagerland, Lydersen & Laake 2013).
    """
    if min(b, c, n11, n00) < 0:
        raise ValueError(f"a 2x2 table has no negative cell, got b={b} c={c} n11={n11} n00={n00}")
    from statsmodels.stats.contingency_tables import mcnemar

    return float(mcnemar([[n11, b], [c, n00]], exact=True).pvalue)


class SignTest(NamedTuple):
    """The exact sign test of paired differences d = B − A against a median of 0."""

    positive: int
    """Pairs with d > 0."""
    negative: int
    """Pairs with d < 0."""
    ties: int
    """Pairs with d = 0, left out of the test (the classic rule)."""
    p: float
    """Two-sided p-value; 1 when every pair is a tie."""


def sign_test(diffs: Iterable[float]) -> SignTest:
    """The exact two-sided sign test of paired differences (ties dropped).

    SciPy's `binomtest(n₊, n₊ + n₋, 0.5).pvalue`, the same p as statsmodels'
    `descriptivestats.sign_test(d, mu0=0)`. At 11 pairs it needs 10 in one direction for
    p < 0.05 (10 of 11 gives 0.0117, 9 of 11 gives 0.065). With only ties there is no evidence
    either way: p = 1 (SciPy would raise). A NaN difference is a caller's bug: ValueError.
    """
    values = list(diffs)
    if any(math.isnan(d) for d in values):
        raise ValueError("a sign test needs numbers, got NaN")
    positive = sum(1 for d in values if d > 0)
    negative = sum(1 for d in values if d < 0)
    ties = len(values) - positive - negative
    if positive + negative == 0:
        return SignTest(positive, negative, ties, 1.0)
    from scipy.stats import binomtest

    return SignTest(
        positive, negative, ties, float(binomtest(positive, positive + negative).pvalue)
    )


def fewest_changed_to_reject(alpha: float) -> int:
    """The fewest nonzero differences with which `sign_test` can reject at `alpha`: all of them
    one way, p = 2 · 0.5ᵐ (6 at 5%: 5 of 5 gives 0.0625). With fewer, a comparison decided by the
    test can only be inconclusive, however the cases turn out."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1 exclusive, got {alpha}")
    from scipy.stats import binomtest

    changed = 1
    while binomtest(changed, changed).pvalue >= alpha:
        changed += 1
    return changed


def median_difference_interval(
    diffs: Iterable[float], *, confidence: float = 0.95
) -> Interval | None:
    """The distribution-free interval for the median of paired differences d, or None when
    there are too few pairs for one (fewer than 6 at 95%).

    SciPy's `quantile_test(d, q=0, p=0.5).confidence_interval(confidence)`: a pair of order
    statistics [d₍ₖ₎, d₍ₙ₋ₖ₊₁₎] that inverts the sign test (ties kept), so at n = 11 it excludes 0
    only when 10 of the 11 differences fall on one side. Its coverage is at least `confidence`
    and exceeds it at small n: [d₍₂₎, d₍₁₀₎] at n = 11 covers 98.8% (an exact 95% interval is
    not attainable).
    """
    values = list(diffs)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 exclusive, got {confidence}")
    if not values:
        return None
    from scipy.stats import quantile_test

    found = quantile_test(values, q=0, p=0.5).confidence_interval(confidence)
    low, high = float(found.low), float(found.high)
    if math.isnan(low) or math.isnan(high):
        return None
    return Interval(low, high)
