"""The statistics every number of a run is computed with, written once.

One rule runs through them: no data is never 0. The mean of nothing and the proportion of
nothing are None, so "no item was scored" is never shown, averaged or gated on as a score of 0
or a pass rate of 0%. Callers pass only the values that are known (an unpriced session has no
cost, not a cost of 0) and so decide what "known" means; these functions decide nothing else.

Sums use `math.fsum` (Shewchuk's exactly rounded summation), so a mean does not depend on the
order of its values and many small costs do not lose their tail to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def mean(values: Iterable[float]) -> float | None:
    """The arithmetic mean x̄ = (x₁ + … + xₙ) / n, or None when n = 0.

    The sum is exactly rounded (`math.fsum`) before the one division, as `statistics.fmean`
    computes it. A NaN among the values makes the mean NaN: it is not skipped.
    """
    known = list(values)
    return math.fsum(known) / len(known) if known else None


def proportion(hits: int, total: int) -> float | None:
    """The sample proportion p̂ = k / n (k `hits` out of n `total`), or None when n = 0.

    A pass rate is one: passed items over the items with a verdict. ValueError when the counts
    cannot describe a sample (negative, or more hits than trials): that is a caller's bug.
    """
    if total < 0 or not 0 <= hits <= total:
        raise ValueError(f"a proportion needs 0 <= hits <= total, got {hits} of {total}")
    return hits / total if total else None
