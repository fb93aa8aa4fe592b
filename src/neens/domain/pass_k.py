"""pass^k: the chance that all k independent attempts at a case succeed (Yao et al. 2024,
τ-bench, arXiv:2406.12045), estimated without bias.

With n scored attempts at a case of which c passed, the unbiased estimator of that case's pass^k
is C(c, k) / C(n, k): the share of the k-subsets of its n attempts that passed every one of
their k (τ-bench's `display_metrics`). The plug-in (c/n)^k is biased upwards (n = 10, c = 3,
k = 2: 0.0667 unbiased against 0.09) and is never used here. A case needs n >= k attempts to
say anything about k of them; cases with fewer are left out and counted, never guessed.

The strict "passed every attempt" share is a different number: C(c, n) / C(n, n) at k = n. The
two agree when every case has exactly k attempts, and the unbiased pass^k is the one that
stays comparable when cases have more attempts than k.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple


@lru_cache(maxsize=4096)
def case_pass_hat_k(passed: int, attempts: int, k: int) -> float | None:
    """C(c, k) / C(n, k) for one case with c `passed` of n `attempts` (the binomial
    coefficients exact, the one division correctly rounded); None when n < k (too few
    attempts to estimate pass^k). ValueError for counts that cannot be."""
    if k < 1:
        raise ValueError(f"pass^k needs k >= 1, got {k}")
    if not 0 <= passed <= attempts:
        raise ValueError(f"pass^k needs 0 <= passed <= attempts, got {passed} of {attempts}")
    if attempts < k:
        return None
    return math.comb(passed, k) / math.comb(attempts, k)


class PassHatK(NamedTuple):
    """pass^k over cases: the mean of each case's unbiased estimate."""

    k: int
    estimate: float | None
    """None when no case has k attempts (no data, never 0)."""
    cases: int
    """Cases with at least k scored attempts: the estimate's denominator."""
    left_out: int
    """Cases with some, but fewer than k, scored attempts."""


def pass_hat_k(counts: Iterable[tuple[int, int]], k: int) -> PassHatK:
    """The unbiased pass^k over cases given as (passed, attempts), each case weighing the same.

    Each case's estimate is one correctly rounded division, C(c, k) / C(n, k), and they are summed
    with `math.fsum` (exactly rounded) before the one division by the number of cases, so the
    result does not depend on the order of the cases. Cases with no attempt at all are neither
    counted nor left out."""
    values: list[float] = []
    left_out = 0
    for passed, attempts in counts:
        value = case_pass_hat_k(passed, attempts, k)
        if value is None:
            left_out += attempts > 0
            continue
        values.append(value)
    return PassHatK(k, math.fsum(values) / len(values) if values else None, len(values), left_out)
