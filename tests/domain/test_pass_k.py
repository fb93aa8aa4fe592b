"""pass^k against exact enumeration: the estimator C(c,k)/C(n,k) is the share of the k-subsets
of a case's n attempts that passed every one, its expectation is exactly p^k (unbiased), and the
plug-in (c/n)^k is not what is reported (the stats-methods vector n=10, c=3, k=2)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from neens.domain.decision import ArmEvidence, Bar, Repeat, compare_sweep
from neens.domain.pass_k import PassHatK, case_pass_hat_k, pass_hat_k


@pytest.mark.parametrize("attempts", range(1, 8))
def test_the_estimate_is_the_share_of_k_subsets_that_passed_every_attempt(attempts: int) -> None:
    for passed in range(attempts + 1):
        outcomes = [True] * passed + [False] * (attempts - passed)
        for k in range(1, attempts + 1):
            subsets = list(itertools.combinations(range(attempts), k))
            share = Fraction(sum(all(outcomes[i] for i in s) for s in subsets), len(subsets))
            assert case_pass_hat_k(passed, attempts, k) == float(share)


@pytest.mark.parametrize(("attempts", "k"), [(3, 3), (5, 2), (8, 3), (10, 2)])
@pytest.mark.parametrize("p", [Fraction(1, 10), Fraction(1, 2), Fraction(9, 10)])
def test_its_expectation_over_the_binomial_is_exactly_p_to_the_k(
    attempts: int, k: int, p: Fraction
) -> None:
    expectation = sum(
        math.comb(attempts, c)
        * p**c
        * (1 - p) ** (attempts - c)
        * Fraction(math.comb(c, k), math.comb(attempts, k))
        for c in range(attempts + 1)
    )
    assert expectation == p**k
    plug_in = sum(
        math.comb(attempts, c) * p**c * (1 - p) ** (attempts - c) * Fraction(c, attempts) ** k
        for c in range(attempts + 1)
    )
    assert plug_in > p**k, "the plug-in (c/n)^k is biased upwards"


def test_the_stats_methods_vector_and_never_the_plug_in() -> None:
    assert case_pass_hat_k(3, 10, 2) == pytest.approx(0.0667, abs=5e-5)
    assert case_pass_hat_k(3, 10, 2) != pytest.approx(0.3**2)


def test_cases_with_fewer_than_k_attempts_are_left_out_and_counted_never_guessed() -> None:
    found = pass_hat_k([(3, 3), (1, 3), (2, 2), (0, 0), (4, 5)], 3)
    # (3,3) -> 1, (1,3) -> 0, (4,5) -> C(4,3)/C(5,3) = 4/10; (2,2) is left out; (0,0) is nothing.
    assert found == PassHatK(3, (1 + 0 + 0.4) / 3, 3, 1)
    assert pass_hat_k([(1, 2)], 3) == PassHatK(3, None, 0, 1), "no data is not 0"
    with pytest.raises(ValueError, match="k >= 1"):
        case_pass_hat_k(1, 2, 0)
    with pytest.raises(ValueError, match="passed <= attempts"):
        case_pass_hat_k(3, 2, 1)


def _reps(*verdicts: bool) -> list[Repeat]:
    return [
        Repeat(f"ppr-{i}", f"ses-{i}", True, v, float(v), 0.01, None)
        for i, v in enumerate(verdicts)
    ]


def test_a_sweep_arm_reports_unbiased_pass_k_beside_its_strict_rate() -> None:
    repeats = {
        "all": _reps(True, True, True),  # strict pass, pass^3 = 1
        "flaky": _reps(True, False, True),  # strict fail, pass^3 = 0
        "two": _reps(True, True),  # strict pass on 2 scored repeats; too few for pass^3
    }
    arm = ArmEvidence("msa-a", "a", 0, "completed", True, 3, repeats)
    result = compare_sweep(
        [arm],
        ["all", "flaky", "two"],
        comparable=True,
        void_reason=None,
        bar=Bar(0.5, "query"),
        baseline_arm_id=None,
    )
    (only,) = result.arms
    assert only.rate == pytest.approx(2 / 3), "the strict rate counts the item scored twice"
    assert (only.pass_hat_k, only.pass_hat_k_items) == (0.5, 2)
    (group,) = result.agents
    assert (group.arms[0].pass_hat_k, group.arms[0].pass_hat_k_items) == (0.5, 2)
