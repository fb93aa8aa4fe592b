"""Statistics of a paired comparison: two runs of the same cases, B − A.

Conventions (as in McNemar 1947): of the n paired cases, n11 pass on both sides, b = n10 pass
on A only, c = n01 pass on B only, n00 fail on both; the difference in pass rate is
B − A = (c − b) / n.

- `paired_bootstrap`: the percentile bootstrap interval of the mean per-case difference,
  resampling cases with both sides kept together. Resampling n cases whose differences take m
  distinct values is the same as one multinomial draw of n over those values, with the observed
  frequencies as probabilities, so each replicate costs m numbers instead of n: the same
  distribution as `scipy.stats.bootstrap((a, b), ..., paired=True, method="percentile")`, which
  the tests use as the oracle, at a fraction of the cost (binary cases have m ≤ 3).
- `mcnemar_power`, `mcnemar_ceiling`, `mcnemar_mde`: the power of the exact McNemar test by
  exact enumeration (no Python library has it; R's `exact2x2::powerPaired2x2`, strict=FALSE).
- `prob_b_beats_a`: P(B > A) from the Beta(1 + c, 1 + b) posterior on the discordant pairs.
- `cluster_bootstrap`: the percentile interval resampling whole groups of related cases.
- `tango_interval`: Tango's (1998) score interval for B − A, the one the non-inferiority margin
  rests on (its lower end above −M is Tango's one-sided score test of B − A ≤ −M at 2.5%).
- `ppi_mean`: an LLM judge's B − A corrected with a few human labels (PPI++, `ppi_py`).

The exact McNemar p-value itself is `neens.domain.stats.mcnemar_exact`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, NamedTuple

from neens.domain.stats import Interval

ALPHA: Final = 0.05
"""Two-sided level of every test here, and 1 − the confidence of every interval."""
POWER_TARGET: Final = 0.8
BOOTSTRAP_RESAMPLES: Final = 10_000
_MDE_GRID: Final = 200
_MDE_TOLERANCE: Final = 1e-6


def paired_bootstrap(
    diffs: Sequence[float],
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = 1 - ALPHA,
) -> Interval | None:
    """The percentile bootstrap interval of mean(`diffs`), or None when there are none.

    `diffs` are the per-case differences B − A (for one trial per case, −1, 0 or +1). A
    replicate resamples the n cases with replacement; it is drawn as counts over the distinct
    differences, `numpy.random.Generator.multinomial(n, frequencies)`, whose mean is the
    replicate's mean. The interval's ends are the α/2 and 1 − α/2 quantiles of the replicates
    (linear interpolation, as `scipy.stats.quantile` computes them for SciPy's bootstrap).
    Seeded (`numpy.random.default_rng(seed)`): the same data and seed give the same interval.

    When every difference is equal the interval is that value at both ends; for all zeros the
    caller should say "A and B agree on every case", not show 0 ± 0.
    """
    import numpy as np

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 exclusive, got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    n = len(diffs)
    if n == 0:
        return None
    values, counts = np.unique(np.asarray(diffs, dtype=float), return_counts=True)
    if len(values) == 1:
        return Interval(float(values[0]), float(values[0]))
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, counts / n, size=resamples)
    means = draws @ values / n
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Interval(float(low), float(high))


def _rejection_bound(d: object, alpha: float) -> object:
    """For d discordant pairs, the largest k with 2·Binom.cdf(k; d, ½) ≤ α (−1 when none):
    the exact McNemar test rejects exactly when min(b, c) ≤ k."""
    import numpy as np
    from scipy.stats import binom

    k = binom.ppf(alpha / 2, d, 0.5)
    k = np.where(2 * binom.cdf(k, d, 0.5) <= alpha, k, k - 1)
    return np.where(np.asarray(d) > 0, k, -1)


def mcnemar_power(n: int, p10: float, p01: float, *, alpha: float = ALPHA) -> float:
    """The power of the two-sided exact McNemar test at level `alpha` for n paired cases.

    With q = p10 + p01 (the chance a case is discordant) and θ = p01 / q (that a discordant
    case favours B), by exact enumeration:

        power = Σ_{d=0..n} Binom(d; n, q) · Σ_{c=0..d} Binom(c; d, θ) · 1[the test rejects, in
        the true direction]

    as R's `exact2x2::powerPaired2x2(pb=p01, pc=p10, npairs=n, strict=FALSE)`. With p10 = p01
    (no effect) both directions count, and the result is the test's actual size.
    """
    import numpy as np
    from scipy.stats import binom

    if n < 0 or min(p10, p01) < 0 or p10 + p01 > 1 + 1e-12:
        raise ValueError(f"power needs n >= 0 and cell chances summing to at most 1, got {n}")
    q = min(p10 + p01, 1.0)
    if n == 0 or q == 0:
        return 0.0
    theta = p01 / q
    # Only the discordant counts with any weight matter; the tails beyond 1e-15 are dropped.
    lowest = int(max(binom.ppf(1e-15, n, q) - 1, 0))
    highest = int(min(binom.isf(1e-15, n, q) + 1, n))
    d = np.arange(lowest, highest + 1)
    k = np.asarray(_rejection_bound(d, alpha))
    weight = binom.pmf(d, n, q)
    # B better: b ≤ k, i.e. c ≥ d − k; A better: c ≤ k.
    b_side = np.where(k >= 0, binom.sf(d - k - 1, d, theta), 0.0)
    a_side = np.where(k >= 0, binom.cdf(k, d, theta), 0.0)
    if p01 > p10:
        rejects = b_side
    elif p10 > p01:
        rejects = a_side
    else:
        rejects = b_side + a_side
    return float(min(max(math.fsum(weight * rejects), 0.0), 1.0))


def mcnemar_ceiling(n: int, discordance: float, *, alpha: float = ALPHA) -> float:
    """The best power the exact McNemar test can have with n cases of which a share
    `discordance` (q) flip: every flip in B's favour (p10 = 0, p01 = q)."""
    return mcnemar_power(n, 0.0, discordance, alpha=alpha)


def mcnemar_mde(
    n: int, discordance: float, *, alpha: float = ALPHA, power: float = POWER_TARGET
) -> float | None:
    """The exact minimum detectable effect: the smallest δ = p01 − p10 with
    `mcnemar_power(n, (q − δ)/2, (q + δ)/2) ≥ power`, the discordance q held fixed; None when
    even δ = q (the ceiling) falls short.

    Exact power is saw-toothed in δ, not monotone, so a grid over (0, q] finds the first δ that
    reaches the target and bisection then narrows the step before it to 1e-6.
    """
    q = discordance
    if n <= 0 or q <= 0 or mcnemar_ceiling(n, q, alpha=alpha) < power:
        return None

    def enough(delta: float) -> bool:
        return mcnemar_power(n, (q - delta) / 2, (q + delta) / 2, alpha=alpha) >= power

    previous = 0.0
    for step in range(1, _MDE_GRID + 1):
        delta = q * step / _MDE_GRID
        if enough(delta):
            low, high = previous, delta
            while high - low > _MDE_TOLERANCE:
                middle = (low + high) / 2
                if enough(middle):
                    high = middle
                else:
                    low = middle
            return high
        previous = delta
    return None  # unreachable: the ceiling (δ = q) is the grid's last point


def prob_b_beats_a(b: int, c: int) -> float:
    """P(B > A) from the discordant pairs: θ = P(B passes | the pair is discordant) has the
    posterior Beta(1 + c, 1 + b) under the uniform Beta(1, 1) prior, and P(B > A) = P(θ > ½) =
    `scipy.stats.beta.sf(0.5, 1 + c, 1 + b)`. Equal to P(p01 > p10) under a Dirichlet(1,1,1,1)
    prior on the four cells. With no discordant pair it is ½."""
    from scipy.stats import beta

    if min(b, c) < 0:
        raise ValueError(f"discordant counts cannot be negative, got b={b} c={c}")
    return float(beta.sf(0.5, 1 + c, 1 + b))


def cluster_bootstrap(
    totals: Sequence[float],
    sizes: Sequence[int],
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = 1 - ALPHA,
) -> Interval | None:
    """The percentile bootstrap interval of Σ totals / Σ sizes, resampling whole groups.

    Group g holds `sizes[g]` paired cases whose differences B − A add up to `totals[g]`; a
    replicate draws G groups with replacement and takes the ratio of the sums (a ratio, so
    groups of unequal size weigh by their cases). As `scipy.stats.bootstrap((totals, sizes),
    lambda t, z, axis: t.sum(axis) / z.sum(axis), paired=True, method="percentile")`, drawn as
    multinomial counts over the distinct (total, size) pairs. None without groups.
    """
    import numpy as np

    if len(totals) != len(sizes):
        raise ValueError("one total per group, and one size")
    if not totals:
        return None
    pairs, counts = np.unique(
        np.column_stack([np.asarray(totals, dtype=float), np.asarray(sizes, dtype=float)]),
        axis=0,
        return_counts=True,
    )
    if len(pairs) == 1:
        ratio = float(pairs[0, 0] / pairs[0, 1])
        return Interval(ratio, ratio)
    groups = len(totals)
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples)
    chunk = max(1, 2_000_000 // len(pairs))
    for start in range(0, resamples, chunk):
        stop = min(start + chunk, resamples)
        draws = rng.multinomial(groups, counts / groups, size=stop - start)
        ratios[start:stop] = (draws @ pairs[:, 0]) / (draws @ pairs[:, 1])
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return Interval(float(low), float(high))


def tango_interval(
    down: float, up: float, n: int, *, confidence: float = 1 - ALPHA
) -> Interval | None:
    """Tango's score interval for the paired difference B − A = p01 − p10 (Tango 1998,
    "Equivalence test and confidence interval for the difference in proportions for the
    paired-sample design", Stat. Med. 17:891–908), or None when n = 0.

    `down` is b = n10 (cases that went pass → fail) and `up` is c = n01 (fail → pass) of n
    paired cases. For a hypothesised difference δ the score statistic is

        T(δ) = (c − b − nδ) / √(n·(2·p̃ + δ·(1 − δ)))

    with p̃ the maximum likelihood estimate of p10 under B − A = δ, the root
    (√(B² − 8n·C) − B) / 4n of 2n·p² + B·p + C = 0 where B = −b − c + (2n − c + b)·δ and
    C = −b·δ·(1 − δ). The interval is every δ with |T(δ)| ≤ z₁₋α/₂ (`scipy.optimize.brentq` on
    T(δ) = ±z; T falls as δ rises). It is the score test inverted, so its lower end is above −M
    exactly when Tango's one-sided test rejects B − A ≤ −M at α/2. It does not collapse when A
    and B agree (b = c = 0 at n = 2 gives about [−66pp, +66pp]; at n = 400 about ±1pp) and does
    not need any discordant pair to be wide. Fagerland, Lydersen & Laake (2014, Stat. Med.
    33:2850–2875) recommend it for paired proportions; Newcombe's square-and-add interval
    (1998, method 10) is the other candidate, but by exact enumeration it declares
    non-inferiority far too often when the discordant pairs all go one way (up to 9% instead
    of 2.5% at n = 10–20), where Tango stays within about 2.7%.

    `down` and `up` may be fractional: with several trials per case they are the sums of the
    negative and positive parts of the per-case differences (a case at 1/3 in A and 2/3 in B
    adds 1/3 to `up`). A difference in [−1, 1] with those parts has at most the variance of
    the binary case, so the interval is then at least as wide as it needs to be for large n.
    """
    import math

    from scipy.optimize import brentq
    from scipy.stats import norm

    if n <= 0:
        return None
    if down < 0 or up < 0 or down + up > n:
        raise ValueError(
            f"a paired table needs 0 <= down, up and down + up <= n, got {down}, {up}, {n}"
        )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 exclusive, got {confidence}")
    z = float(norm.isf((1 - confidence) / 2))
    b, c = float(down), float(up)

    def statistic(delta: float) -> float:
        linear = -b - c + (2 * n - c + b) * delta
        constant = -b * delta * (1 - delta)
        p10 = (math.sqrt(max(linear * linear - 8 * n * constant, 0.0)) - linear) / (4 * n)
        variance = n * (2 * p10 + delta * (1 - delta))
        excess = c - b - n * delta
        if variance <= 0:
            return math.copysign(math.inf, excess) if excess else 0.0
        return excess / math.sqrt(variance)

    edge = 1e-12
    estimate = (c - b) / n
    low = (
        -1.0
        if estimate <= -1
        else brentq(lambda d: statistic(d) - z, -1 + edge, 1 - edge, xtol=1e-12)
    )
    high = (
        1.0
        if estimate >= 1
        else brentq(lambda d: statistic(d) + z, -1 + edge, 1 - edge, xtol=1e-12)
    )
    return Interval(max(float(low), -1.0), min(float(high), 1.0))


class PpiEstimate(NamedTuple):
    """A PPI++ estimate of a mean with its 95% interval and two-sided p-value against 0."""

    estimate: float
    interval: Interval
    p_value: float


def ppi_mean(
    labels: Sequence[float], judged: Sequence[float], judged_unlabeled: Sequence[float]
) -> PpiEstimate:
    """The mean of what people would say, from a few labels and many judge verdicts (PPI++,
    Angelopoulos, Duchi & Zrnic, arXiv:2311.01453), through `ppi_py`:

        θ̂ = λ·mean(Ŷ_u) + mean(Y − λŶ),  λ̂ = Cov(Y, Ŷ) / ((1 + n/N)·Var(Ŷ)) clipped to [0, 1]

    where Y are the n labels, Ŷ the judge's verdicts on those same cases and Ŷ_u its verdicts
    on N other cases; the interval is the normal one with SE² = Var(λŶ_u)/N + Var(Y − λŶ)/n
    (`ppi_mean_ci(..., alpha=0.05)`: ppi_py's default is 90%). Needs n ≥ 2 and N ≥ 1.

    ppi_py switches every warning off when imported; it is imported inside
    `warnings.catch_warnings()` so that this stays its own business.
    """
    import warnings

    import numpy as np

    if len(labels) != len(judged):
        raise ValueError("one judge verdict per label")
    if len(labels) < 2 or not judged_unlabeled:
        raise ValueError("PPI++ needs at least 2 labeled cases and 1 judged-only case")
    with warnings.catch_warnings():
        import ppi_py

        y = np.asarray(labels, dtype=float)
        yhat = np.asarray(judged, dtype=float)
        yhat_u = np.asarray(judged_unlabeled, dtype=float)
        estimate = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u)
        low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=ALPHA)
        p_value = ppi_py.ppi_mean_pval(y, yhat, yhat_u, null=0, alternative="two-sided")
    return PpiEstimate(
        float(np.ravel(estimate)[0]),
        Interval(float(np.ravel(low)[0]), float(np.ravel(high)[0])),
        float(np.ravel(p_value)[0]),
    )
