"""Sequential halving's budget arithmetic (Karnin, Koren & Somekh 2013, Algorithm 1), worked by
hand, and the plausibly best set against SciPy and a seeded simulation of its coverage."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from neens.domain.halving import (
    cases_needed,
    fit_budget,
    one_sided_mcnemar,
    plausibly_best,
    rounds_needed,
    schedule,
    smallest_budget,
    survivors,
)


def _shape(arms: int, budget: int, trials: int = 1) -> list[tuple[int, int, int]]:
    return [(r.arms, r.pulls, r.cases) for r in schedule(arms, budget, trials)]


def test_five_arms_and_a_budget_of_100_pull_6_then_11_then_16_times() -> None:
    # R = ⌈log₂ 5⌉ = 3. Round 0: ⌊100 / (5·3)⌋ = 6 pulls each, keep ⌈5/2⌉ = 3; round 1:
    # ⌊100 / (3·3)⌋ = 11, keep 2; round 2: ⌊100 / (2·3)⌋ = 16, keep 1. 30 + 33 + 32 = 95.
    rounds = schedule(5, 100)
    assert _shape(5, 100) == [(5, 6, 6), (3, 11, 11), (2, 16, 16)]
    assert [r.kept for r in rounds] == [3, 2, 1]
    assert sum(r.case_runs for r in rounds) == 95


def test_three_configs_and_the_spec_budget_of_300_spend_it_all() -> None:
    # R = 2: ⌊300 / (3·2)⌋ = 50 cases for each of 3, then ⌊300 / (2·2)⌋ = 75 for each of 2.
    assert _shape(3, 300) == [(3, 50, 50), (2, 75, 75)]
    assert sum(r.case_runs for r in schedule(3, 300)) == 300
    assert cases_needed(schedule(3, 300)) == 125


def test_trials_turn_pulls_into_whole_cases() -> None:
    # 3 trials a case: 50 pulls are 16 cases (48 case runs), 75 pulls 25 cases (75 runs).
    rounds = schedule(3, 300, trials=3)
    assert [(r.pulls, r.cases) for r in rounds] == [(50, 16), (75, 25)]
    assert sum(r.case_runs for r in rounds) == 3 * 16 * 3 + 2 * 25 * 3


def test_ceiling_halving_ends_with_one_config_after_log2_rounds() -> None:
    for arms in range(2, 40):
        rounds = schedule(arms, 10_000)
        assert len(rounds) == rounds_needed(arms)
        assert rounds[-1].kept == 1
        assert 2 ** (len(rounds) - 1) < arms <= 2 ** len(rounds)


def test_a_budget_below_n_times_r_gives_the_first_round_no_case() -> None:
    assert smallest_budget(3) == 6 and smallest_budget(5, trials=2) == 30
    assert schedule(3, 5)[0].cases == 0
    assert schedule(3, 6)[0].cases == 1
    assert fit_budget(3, 5, 1, 1_000) is None


def test_the_fitted_budget_is_the_largest_the_train_cases_can_fill() -> None:
    for arms, budget, trials, available in [(3, 300, 1, 40), (5, 100, 1, 20), (4, 90, 2, 9)]:
        fitted = fit_budget(arms, budget, trials, available)
        brute = max(
            t
            for t in range(smallest_budget(arms, trials), budget + 1)
            if cases_needed(schedule(arms, t, trials)) <= available
        )
        assert fitted == brute
    assert fit_budget(3, 300, 1, 40) == 99  # ⌊99/6⌋ + ⌊99/4⌋ = 16 + 24 = 40 cases; 100: 41
    assert fit_budget(3, 300, 1, 1_000) == 300
    assert fit_budget(3, 300, 1, 1) is None  # two rounds need two fresh cases


def test_survivors_keep_the_better_half_ties_to_the_config_given_first() -> None:
    assert survivors([0.5, 0.9, 0.1]) == [0, 1]
    assert survivors([0.5, 0.5, 0.5]) == [0, 1]
    assert survivors([0.2, 0.5, 0.5, 0.9]) == [1, 3]
    assert survivors([None, 0.0, 0.0]) == [1, 2]
    assert survivors([0.3, 0.7]) == [1]


def test_the_one_sided_mcnemar_p_is_scipys_binomial_test() -> None:
    for wins, losses in [
        (6, 0),
        (5, 0),
        (9, 2),
        (3, 3),
        (0, 4),
        (12, 30),
        (700, 650),
        (1200, 1100),
    ]:
        expected = binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue
        assert one_sided_mcnemar(wins, losses) == pytest.approx(expected, rel=1e-12)
    assert one_sided_mcnemar(0, 0) == 1.0


def test_a_config_beaten_on_enough_flipped_cases_leaves_the_plausibly_best_set() -> None:
    cases = [f"c{i}" for i in range(12)]
    best = dict.fromkeys(cases, True)
    # 6 flips all one way: one-sided p = 1/64 = 0.0156 ≤ 0.05/2, dropped; 5 of 5 (p = 0.031)
    # is not below the Bonferroni level, kept.
    dropped = {c: i >= 6 for i, c in enumerate(cases)}
    close = {c: i >= 5 for i, c in enumerate(cases)}
    result = plausibly_best({"a": best, "b": dropped, "c": close})
    assert result.members == ["a", "c"]
    assert result.threshold == pytest.approx(0.025)
    assert result.cases == 12
    by = {c.config: c for c in result.comparisons}
    assert (by["b"].against, by["b"].wins, by["b"].losses) == ("a", 6, 0)
    assert by["b"].p_value == pytest.approx(1 / 64)
    assert by["c"].p_value == pytest.approx(1 / 32) and not by["c"].dropped


def test_only_cases_every_config_graded_count() -> None:
    result = plausibly_best(
        {"a": {"x": True, "y": True}, "b": {"x": False}, "c": {"x": False, "y": False}}
    )
    assert result.cases == 1


def _coverage(probabilities: list[float], n: int, runs: int, seed: int) -> float:
    """How often the truly best config (index 0) is in the set, over seeded races whose
    configs share each case's difficulty (positively correlated, as real configs are)."""
    rng = np.random.default_rng(seed)
    names = [f"cfg{i}" for i in range(len(probabilities))]
    kept = 0
    for _ in range(runs):
        difficulty = rng.normal(size=n)
        noise = rng.normal(size=(len(probabilities), n))
        outcomes = {}
        for i, p in enumerate(probabilities):
            # P(pass) is p on average: a probit of a shared difficulty and the config's own noise.
            threshold = norm.ppf(p) * np.sqrt(2)
            passed = (difficulty + noise[i]) < threshold
            outcomes[names[i]] = {f"c{j}": bool(passed[j]) for j in range(n)}
        kept += names[0] in plausibly_best(outcomes).members
    return kept / runs


def test_the_set_holds_the_truly_best_config_at_least_95_percent_of_the_time() -> None:
    # All configs equal: config 0 is (one of) the truly best, the least favourable case.
    assert _coverage([0.6, 0.6, 0.6, 0.6], n=40, runs=400, seed=1) >= 0.95
    assert _coverage([0.7, 0.65, 0.6, 0.5], n=40, runs=400, seed=2) >= 0.95
