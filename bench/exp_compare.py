"""The paired bootstrap of `exp compare` against SciPy's, on the same data.

100,000 paired binary cases (A passes 70%, B 72%, the two correlated as real runs are), 10,000
resamples: `neens.domain.paired.paired_bootstrap` (one multinomial draw over the 2x2 cells per
replicate) against `scipy.stats.bootstrap((a, b), ..., paired=True, method="percentile")`
(resampling case indices, in batches so it fits in memory). Interleaved rounds; prints the
median and spread of the paired time ratios, and both intervals with their Monte-Carlo spread:
the target is >= 50x faster with the same interval to Monte-Carlo error.

    .venv/bin/python bench/exp_compare.py            # 100,000 cases, 10,000 resamples, 3 rounds
    .venv/bin/python bench/exp_compare.py --quick    # 10,000 cases, 2,000 resamples, 2 rounds
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy import stats

from neens.domain.paired import paired_bootstrap

TARGET_SPEEDUP = 50.0


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.random(n) < 0.70
    # B agrees with A on most cases: it loses 6% of A's passes and wins 20% of A's fails.
    flip = rng.random(n)
    b = np.where(a, flip >= 0.06, flip < 0.20)
    return a.astype(float), b.astype(float)


def _scipy(
    a: np.ndarray, b: np.ndarray, resamples: int, seed: int, batch: int
) -> tuple[float, ...]:
    result = stats.bootstrap(
        (a, b),
        lambda x, y, axis: y.mean(axis=axis) - x.mean(axis=axis),
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=resamples,
        batch=batch,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=100, help="SciPy's resamples per batch")
    parser.add_argument("--quick", action="store_true", help="10,000 cases, 2,000 resamples")
    args = parser.parse_args()
    if args.quick:
        args.cases, args.resamples, args.rounds = 10_000, 2_000, 2
    a, b = _data(args.cases, seed=1)
    diffs = list(b - a)
    print(
        f"{args.cases:,} paired cases, {args.resamples:,} resamples, {args.rounds} rounds; "
        f"B − A = {np.mean(b - a) * 100:+.2f}pp"
    )
    ratios, ours_all, theirs_all = [], [], []
    for round_number in range(args.rounds):
        seed = 100 + round_number
        order = ["neens", "scipy"] if round_number % 2 == 0 else ["scipy", "neens"]
        timings: dict[str, float] = {}
        for who in order:
            started = time.perf_counter()
            if who == "neens":
                interval = paired_bootstrap(diffs, seed=seed, resamples=args.resamples)
                assert interval is not None
                ours_all.append((interval.low, interval.high))
            else:
                theirs_all.append(_scipy(a, b, args.resamples, seed, args.batch))
            timings[who] = time.perf_counter() - started
        ratios.append(timings["scipy"] / timings["neens"])
        print(
            f"round {round_number + 1}: neens {timings['neens'] * 1000:.1f} ms, "
            f"scipy {timings['scipy'] * 1000:.0f} ms, {ratios[-1]:.0f}x"
        )
    spread = f"{min(ratios):.0f}x–{max(ratios):.0f}x" if len(ratios) > 1 else ""
    median = statistics.median(ratios)
    verdict = "meets" if median >= TARGET_SPEEDUP else "misses"
    print(f"speed-up median {median:.0f}x {spread} ({verdict} the >= {TARGET_SPEEDUP:.0f}x target)")
    for who, intervals in (("neens", ours_all), ("scipy", theirs_all)):
        lows, highs = zip(*intervals, strict=True)
        print(
            f"{who}: [{statistics.mean(lows) * 100:+.3f}pp, {statistics.mean(highs) * 100:+.3f}pp]"
            f" (ends vary by up to {max(np.ptp(lows), np.ptp(highs)) * 100:.3f}pp across rounds)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
