"""`exp sweep`: sequential halving over configs, and the plausibly best set.

**Sequential halving** is Algorithm 1 of Karnin, Koren & Somekh, "Almost optimal exploration in
multi-armed bandits" (ICML 2013), with a fixed budget of T pulls over n arms:

- R = ⌈log₂ n⌉ rounds; S₀ is every arm.
- Round r pulls each arm of S_r t_r = ⌊T / (|S_r| · R)⌋ times and keeps the ⌈|S_r| / 2⌉ arms with
  the highest empirical mean of that round's pulls (the paper's estimate: earlier rounds' pulls
  are not pooled in). With ceiling halving, R rounds leave exactly one arm.
- The pulls add up to at most T; the floors leave the rest unused (n = 5, T = 100: 5×6, 3×11,
  2×16, 95 pulls).

Here an arm is a config and a pull is one case run (a case-trial). With k trials per case, a
round gives each config ⌊t_r / k⌋ cases, k case runs each; every surviving config runs the same
fresh cases of the round (common cases pair the configs, which cuts the variance of their
differences). Ties go to the config given first, so the start keeps its place on a tie.

**The plausibly best set** is Hsu's multiple comparisons with the best (Hsu 1996, *Multiple
Comparisons*, ch. 4) with Bonferroni's inequality for its critical values, on paired pass/fail
outcomes: config i is dropped when some other config j beats it significantly, by the exact
one-sided McNemar test (the binomial test of j's wins among the cases where exactly one of i and
j passed, `scipy.stats.binomtest(wins_j, discordant, 0.5, alternative="greater")`) at level
α / (m − 1). The truly best config b is dropped only if one of its m − 1 comparisons rejects a
null that holds for b ("j is not better than b"), so with probability at most (m − 1) · α/(m − 1)
= α, under any dependence between the comparisons: the set holds the truly best config with
probability at least 1 − α. It is computed on cases every config ran (the race's first round),
whose outcomes no selection has touched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

PLAUSIBLE_ALPHA: Final = 0.05
EXACT_SUM_UP_TO: Final = 1000
"""Up to this many flipped cases the one-sided McNemar p is summed exactly in integers (fast at
small n); above, SciPy's binomial survival function."""


@dataclass(frozen=True, slots=True)
class HalvingRound:
    """One round of the schedule."""

    index: int
    """0-based; printed 1-based."""
    arms: int
    """Configs racing in this round, |S_r|."""
    pulls: int
    """Karnin's t_r = ⌊T / (|S_r| · R)⌋: case runs each config may make in this round."""
    cases: int
    """Cases each config runs: ⌊t_r / k⌋ for k trials per case."""
    trials: int
    kept: int
    """Configs kept for the next round, ⌈|S_r| / 2⌉."""

    @property
    def case_runs(self) -> int:
        """Case runs the round makes: every config, every case, every trial."""
        return self.arms * self.cases * self.trials


def rounds_needed(arms: int) -> int:
    """R = ⌈log₂ n⌉, computed on integers (n ≥ 1; one arm needs no round)."""
    if arms < 1:
        raise ValueError(f"sequential halving needs at least one arm, got {arms}")
    return (arms - 1).bit_length()


def schedule(arms: int, budget: int, trials: int = 1) -> list[HalvingRound]:
    """Karnin et al.'s round schedule for `arms` configs and a budget of `budget` case runs.

    Rounds may have 0 cases when the budget is too small; `case_budget_problem` says so."""
    if budget < 0 or trials < 1:
        raise ValueError("the budget is a count of case runs (≥ 0) and trials ≥ 1")
    total_rounds = rounds_needed(arms)
    rounds: list[HalvingRound] = []
    alive = arms
    for index in range(total_rounds):
        pulls = budget // (alive * total_rounds)
        kept = -(-alive // 2)
        rounds.append(HalvingRound(index, alive, pulls, pulls // trials, trials, kept))
        alive = kept
    return rounds


def cases_needed(rounds: Sequence[HalvingRound]) -> int:
    """Fresh cases the schedule draws: every round runs cases no earlier round ran."""
    return sum(r.cases for r in rounds)


def smallest_budget(arms: int, trials: int = 1) -> int:
    """The least budget whose first round gives each config one case: n · R · k (every later
    round then gets one too, having fewer configs)."""
    return arms * rounds_needed(arms) * trials


def fit_budget(arms: int, budget: int, trials: int, available_cases: int) -> int | None:
    """The largest budget T' ≤ `budget` whose schedule needs at most `available_cases` fresh
    cases, or None when no budget gives the first round a case.

    The cases a schedule needs never decrease as its budget grows (each ⌊T / (|S_r| R)⌋ is
    monotone in T), so the largest fitting T' is found by bisection."""
    low = smallest_budget(arms, trials)
    if budget < low or cases_needed(schedule(arms, low, trials)) > available_cases:
        return None
    high = budget
    while low < high:
        middle = (low + high + 1) // 2
        if cases_needed(schedule(arms, middle, trials)) <= available_cases:
            low = middle
        else:
            high = middle - 1
    return low


def survivors(scores: Sequence[float | None]) -> list[int]:
    """The indexes of the configs a round keeps, in their given order: the ⌈m / 2⌉ highest
    scores, ties to the config given first. A config without a score (no graded case-trial in
    the round) ranks below every scored one."""
    keep = -(-len(scores) // 2)
    ranked = sorted(
        range(len(scores)),
        key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i),
    )
    return sorted(ranked[:keep])


@dataclass(frozen=True, slots=True)
class BestComparison:
    """A config's hardest comparison: the config that beat it by the most evidence."""

    config: str
    against: str | None
    """None with no other config sharing a flipped case."""
    wins: int
    """Cases `against` passed and `config` failed."""
    losses: int
    """Cases `config` passed and `against` failed."""
    p_value: float
    """One-sided exact McNemar p that `against` is better (1.0 with no flipped case)."""
    dropped: bool


@dataclass(frozen=True, slots=True)
class PlausiblyBest:
    members: list[str]
    """In the given order of the configs."""
    alpha: float
    threshold: float
    """α / (m − 1): the level of each comparison."""
    cases: int
    """Cases every config graded."""
    comparisons: list[BestComparison]


def one_sided_mcnemar(wins: int, losses: int) -> float:
    """P(X ≥ wins) for X ~ Binomial(wins + losses, ½): the exact one-sided McNemar p-value that
    the side with `wins` is better; 1.0 when no case flipped."""
    discordant = wins + losses
    if discordant == 0:
        return 1.0
    if discordant <= EXACT_SUM_UP_TO:
        # Exact in integers, then one rounding: Σ_{k ≥ wins} C(d, k) / 2^d.
        tail = sum(math.comb(discordant, k) for k in range(wins, discordant + 1))
        return float(tail / 2**discordant)
    from scipy.stats import binom

    return float(binom.sf(wins - 1, discordant, 0.5))


def plausibly_best(
    outcomes: Mapping[str, Mapping[str, bool]], *, alpha: float = PLAUSIBLE_ALPHA
) -> PlausiblyBest:
    """The configs not significantly worse than the best (see the module docstring).

    `outcomes[config][case]` is whether the config passed the case (every graded case-trial
    passed); only cases every config graded count. At least two configs."""
    names = list(outcomes)
    if len(names) < 2:
        raise ValueError("the plausibly best set compares at least two configs")
    common = set.intersection(*(set(o) for o in outcomes.values()))
    threshold = alpha / (len(names) - 1)
    comparisons: list[BestComparison] = []
    for name in names:
        worst: BestComparison | None = None
        for other in names:
            if other == name:
                continue
            wins = sum(outcomes[other][c] and not outcomes[name][c] for c in common)
            losses = sum(outcomes[name][c] and not outcomes[other][c] for c in common)
            p = one_sided_mcnemar(wins, losses)
            if worst is None or (p, -wins) < (worst.p_value, -worst.wins):
                worst = BestComparison(name, other, wins, losses, p, p <= threshold)
        assert worst is not None
        if worst.wins + worst.losses == 0:
            worst = BestComparison(name, None, 0, 0, 1.0, False)
        comparisons.append(worst)
    members = [c.config for c in comparisons if not c.dropped]
    # Never empty: on one set of common cases, a config with the most passes loses no
    # comparison (its rival's wins never exceed its losses, so p ≥ ½).
    assert members
    return PlausiblyBest(members, alpha, threshold, len(common), comparisons)


def optimism_gap(train: float | None, held_out: float | None) -> float | None:
    """Train minus held-out pass rate: how much of the winner's race score was luck of the draw
    (the winner's curse). None when either is unknown."""
    if train is None or held_out is None:
        return None
    return train - held_out
