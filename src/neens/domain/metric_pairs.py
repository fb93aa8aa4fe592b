"""Two commands' numeric metrics compared over interleaved pairs (`neens exp metrics`).

For each metric, d_i = B_i − A_i over the pairs. The estimate is median(d), the paired
estimand the sign test is about (not median(B) − median(A), which can differ). Its 95% interval
is the distribution-free order-statistic interval that inverts the sign test (SciPy's
`quantile_test(d).confidence_interval()`), and the test is the exact sign test with ties
dropped (`binomtest`). A change counts only when both agree: the interval excludes 0 and the
sign test rejects at 0.05 in the same direction. So an A/A comparison stays quiet: at 11 pairs
a false verdict needs 10 of 11 pairs in one direction (p = 0.0117).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from neens.domain.stats import Interval, SignTest, median_difference_interval, sign_test

ALPHA: Final = 0.05
MIN_PAIRS: Final = 6
"""Below 6 pairs no sign test reaches p < 0.05 (5 of 5 gives 0.0625) and there is no 95%
order-statistic interval: every verdict would be "no change"."""

Verdict = Literal["better", "worse", "no change"]


@dataclass(frozen=True, slots=True)
class MetricComparison:
    name: str
    higher_is_better: bool
    a: tuple[float, ...]
    """A's value in each pair, in pair order."""
    b: tuple[float, ...]
    median_a: float
    median_b: float
    median_difference: float
    """median(B − A) over the pairs."""
    interval: Interval | None
    """The 95% interval for median(B − A); None below `MIN_PAIRS`."""
    sign: SignTest
    verdict: Verdict


def run_order(pairs: int) -> list[tuple[int, int]]:
    """The arms' order in each pair: A then B in odd pairs, B then A in even ones (ABBA), so a
    warm-up or cache that favours the first or second run of a pair hits both arms alike."""
    return [(0, 1) if i % 2 == 0 else (1, 0) for i in range(pairs)]


def compare_metric(
    name: str, a: Sequence[float], b: Sequence[float], *, higher_is_better: bool
) -> MetricComparison:
    """Compare one metric's paired values; see the module docstring for the rule."""
    if len(a) != len(b) or not a:
        raise ValueError(f"{name}: paired values need the same, non-zero count")
    if not all(math.isfinite(v) for v in (*a, *b)):
        raise ValueError(f"{name}: values must be finite numbers")
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    interval = median_difference_interval(diffs)
    sign = sign_test(diffs)
    direction = 0
    if interval is not None and interval.high < 0 and sign.negative > sign.positive:
        direction = -1
    elif interval is not None and interval.low > 0 and sign.positive > sign.negative:
        direction = 1
    verdict: Verdict = "no change"
    if direction and sign.p < ALPHA:
        verdict = "better" if (direction > 0) == higher_is_better else "worse"
    return MetricComparison(
        name=name,
        higher_is_better=higher_is_better,
        a=tuple(a),
        b=tuple(b),
        median_a=statistics.median(a),
        median_b=statistics.median(b),
        median_difference=statistics.median(diffs),
        interval=interval,
        sign=sign,
        verdict=verdict,
    )
