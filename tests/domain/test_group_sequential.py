"""O'Brien–Fleming group-sequential boundaries and the looks of an A/B run, checked against the
published constants, SciPy's multivariate normal and statsmodels' McNemar statistic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm
from statsmodels.stats.contingency_tables import mcnemar

from neens.domain.group_sequential import (
    Look,
    design,
    discordant_z,
    exit_probabilities,
    first_crossing,
    lan_demets_bounds,
    look_cases,
    obrien_fleming_bounds,
    spent,
    take_look,
)


def test_classic_four_look_obrien_fleming_boundaries_are_the_published_constants() -> None:
    # Jennison & Turnbull (2000), table 2.3: C_B(4) = 2.024, c_k = C_B·√(4/k).
    found = obrien_fleming_bounds(4)
    assert [round(c, 3) for c in found] == [4.049, 2.863, 2.337, 2.024]
    assert found == pytest.approx([4.0486, 2.8628, 2.3375, 2.0243], abs=6e-5)


@pytest.mark.parametrize(
    ("looks", "expected"),
    [
        (2, [2.7965, 1.9774]),
        (3, [3.4711, 2.4544, 2.0040]),
        (5, [4.5617, 3.2256, 2.6337, 2.2809, 2.0401]),
    ],
)
def test_classic_obrien_fleming_matches_rpact_for_other_look_counts(
    looks: int, expected: list[float]
) -> None:
    # rpact::getDesignGroupSequential(kMax=K, alpha=0.05, sided=2, typeOfDesign="OF")
    assert obrien_fleming_bounds(looks) == pytest.approx(expected, abs=6e-5)


@pytest.mark.parametrize(
    ("looks", "expected"),
    [
        (2, [2.9626, 1.9686]),
        (3, [3.7103, 2.5114, 1.9930]),
        (4, [4.3326, 2.9631, 2.3590, 2.0141]),
        (5, [4.8769, 3.3570, 2.6803, 2.2898, 2.0310]),
    ],
)
def test_lan_demets_obrien_fleming_spending_matches_rpact(
    looks: int, expected: list[float]
) -> None:
    # rpact::getDesignGroupSequential(kMax=K, alpha=0.05, sided=2, typeOfDesign="asOF")
    times = [k / looks for k in range(1, looks + 1)]
    assert lan_demets_bounds(times) == pytest.approx(expected, abs=6e-5)


@pytest.mark.parametrize("t", [0.05, 0.2, 0.25, 0.5, 0.6, 0.75, 1.0])
def test_spending_is_the_ldbounds_convention_on_each_side(t: float) -> None:
    # α₁(t) = 2 − 2Φ(Φ⁻¹(1 − α/4)/√t) on each side (ldbounds iuse=1, gsDesign sfLDOF).
    one_side = 2 * norm.sf(norm.isf(0.05 / 4) / math.sqrt(t))
    assert spent(t) == pytest.approx(2 * one_side, rel=1e-12)


def test_spending_values_at_published_points() -> None:
    assert spent(0) == 0.0
    assert spent(1) == pytest.approx(0.05, rel=1e-12)
    # The first of five equally spaced looks spends what a lone test at 4.877 would.
    assert spent(0.2) == pytest.approx(2 * norm.sf(4.8769), rel=2e-3)
    # Reading 2 − 2Φ(z_α/2/√t) as the two-sided total would give 4.383 instead: not ours.
    assert lan_demets_bounds([0.2, 0.4, 0.6, 0.8, 1.0])[0] == pytest.approx(4.877, abs=1e-3)
    assert spent(0.5) == pytest.approx(0.003051, abs=1e-6)


def _crossed_by(times: list[float], bounds: list[float]) -> list[float]:
    """P(|Z_j| ≥ c_j for some j ≤ k) under H0, from SciPy's multivariate normal CDF of
    (Z_1, …, Z_k) with corr(Z_i, Z_j) = √(t_i/t_j): the oracle for the recursion."""
    found = []
    for k in range(1, len(times) + 1):
        t = np.array(times[:k])
        cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
        c = np.array(bounds[:k])
        inside = multivariate_normal(
            mean=np.zeros(k), cov=cov, abseps=1e-7, releps=1e-7, maxpts=500_000
        ).cdf(c, lower_limit=-c)
        found.append(1 - float(inside))
    return found


@pytest.mark.parametrize("times", [[0.25, 0.6, 1.0], [0.2, 0.5, 1.0], [0.3, 0.45, 0.8, 1.0]])
def test_unequally_spaced_boundaries_spend_exactly_the_planned_alpha(times: list[float]) -> None:
    bounds = lan_demets_bounds(times)
    oracle = _crossed_by(times, bounds)
    assert oracle == pytest.approx([spent(t) for t in times], abs=2e-6)
    assert oracle[-1] == pytest.approx(0.05, abs=2e-6)
    recursion = np.cumsum(exit_probabilities(times, bounds))
    assert list(recursion) == pytest.approx(oracle, abs=2e-6)


def test_look_cases_never_fall_before_twenty_cases() -> None:
    assert look_cases(200) == [50, 100, 150, 200]
    assert look_cases(50) == [20, 25, 38, 50]
    assert look_cases(60) == [20, 30, 45, 60]
    assert look_cases(40) == [20, 30, 40]
    assert look_cases(21, 4) == [20, 21]
    assert look_cases(12) == [12]
    assert look_cases(100, 10)[:3] == [20, 30, 40]


def test_a_run_too_short_to_look_early_has_one_fixed_look_at_its_end() -> None:
    (only,) = design(12)
    assert only.cases == 12 and only.time == 1.0
    assert only.boundary == pytest.approx(norm.isf(0.025), abs=1e-9)


def test_a_moved_first_look_is_spent_at_its_actual_fraction() -> None:
    looks = design(50)
    assert [look.cases for look in looks] == [20, 25, 38, 50]
    times = [0.4, 0.5, 0.76, 1.0]
    assert [look.time for look in looks] == times
    assert [look.boundary for look in looks] == pytest.approx(lan_demets_bounds(times), abs=1e-12)
    assert _crossed_by(times, [look.boundary for look in looks])[-1] == pytest.approx(
        0.05, abs=2e-6
    )


@pytest.mark.parametrize(("n01", "n10"), [(1, 0), (5, 2), (2, 9), (30, 12), (0, 7), (13, 14)])
def test_the_statistic_is_mcnemars_corrected_chi_square_with_a_sign(n01: int, n10: int) -> None:
    table = [[10, n10], [n01, 10]]
    chi2 = mcnemar(table, exact=False, correction=True).statistic
    z = discordant_z(n01, n10)
    assert z**2 == pytest.approx(chi2, rel=1e-12)
    assert z >= 0 if n01 >= n10 else z <= 0


def test_the_statistic_is_zero_with_no_evidence_either_way() -> None:
    assert discordant_z(0, 0) == 0.0
    assert discordant_z(4, 4) == 0.0
    assert discordant_z(5, 4) == 0.0  # a gap of one is within the continuity correction
    with pytest.raises(ValueError):
        discordant_z(-1, 2)


def test_the_walk_stops_at_the_first_crossed_look_and_skips_unpaired_cases() -> None:
    looks = [Look(1, 3, 0.5, 1.0, 0.01), Look(2, 5, 0.8, 0.5, 0.03), Look(3, 6, 1.0, 0.1, 0.05)]
    outcomes: list[tuple[bool, bool] | None] = [
        (False, True),
        None,
        (False, True),
        (False, True),
        (True, True),
        (True, False),
    ]
    taken = first_crossing(looks, outcomes)
    assert len(taken) == 2
    assert (taken[0].paired, taken[0].n01, taken[0].z, taken[0].crossed) == (
        2,
        2,
        pytest.approx(1 / math.sqrt(2)),
        False,
    )
    assert (taken[1].paired, taken[1].n01, taken[1].n10) == (4, 3, 0)
    assert taken[1].crossed and taken[1].direction == "better"
    inside = take_look(Look(1, 10, 1.0, 2.0, 0.05), 10, 3, 1)
    assert inside.z == 0.5 and not inside.crossed and inside.direction is None
    worse = take_look(Look(1, 10, 1.0, 1.0, 0.05), 10, 0, 6)
    assert worse.crossed and worse.direction == "worse"


def test_bad_information_fractions_are_refused() -> None:
    with pytest.raises(ValueError):
        lan_demets_bounds([0.5, 0.5, 1.0])
    with pytest.raises(ValueError):
        lan_demets_bounds([])
    with pytest.raises(ValueError):
        spent(1.5)
    with pytest.raises(ValueError):
        look_cases(0)


def _simulate(runs: int, cases: int, looks: int, seed: int, gain: float = 0.0) -> tuple[int, int]:
    """Seeded runs of the whole procedure on paired binary outcomes: each case has its own pass
    rate p, arm A passes with p and arm B with min(p + gain, 1). How many runs crossed, and how
    many of those stopped before the last look."""
    plan = design(cases, looks)
    rng = np.random.default_rng(seed)
    crossed = early = 0
    for _ in range(runs):
        p = rng.uniform(0.2, 0.9, cases)
        a = rng.random(cases) < p
        b = rng.random(cases) < np.minimum(p + gain, 1.0)
        taken = first_crossing(plan, list(zip(a.tolist(), b.tolist(), strict=True)))
        crossed += taken[-1].crossed
        early += taken[-1].crossed and taken[-1].look.number < len(plan)
    return crossed, early


def test_early_stopping_keeps_the_false_positive_rate_at_or_under_five_percent() -> None:
    # 2,000 seeded A/A runs: both arms the same config, 200 cases, 4 looks.
    crossed, _ = _simulate(2000, 200, 4, seed=0)
    assert crossed / 2000 <= 0.05
    assert crossed / 2000 >= 0.02  # the test still rejects: it is not vacuously conservative


def test_a_real_gain_is_found_and_usually_before_the_last_look() -> None:
    crossed, early = _simulate(200, 200, 4, seed=1, gain=0.25)
    assert crossed >= 190
    assert early >= 150
