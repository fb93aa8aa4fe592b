"""The plateau decision over a series' rounds: the gain each round is judged on, the gates,
stopping and staying stopped, and the average run length to a false alarm by simulation."""

from __future__ import annotations

import random
import statistics
from fractions import Fraction

import pytest

from neens.domain.exp_compare import TrialOutcome
from neens.domain.plateau import Gain, SeriesDecision, decide, paired_gain


def _decide(gains: dict[int, float | None], rounds: int, **kw: object) -> SeriesDecision:
    """Rounds whose gain depends only on the candidate (whatever it is compared with)."""

    def gain_of(base: int, candidate: int) -> Gain | None:
        g = gains.get(candidate, 0.0)
        return None if g is None else Gain(g, 20)

    options: dict[object, object] = {"eps": 0.05, "delta": 0.05, "gate": "greedy", **kw}
    return decide(rounds, gain_of, **options)  # type: ignore[arg-type]


def _mixture_by_definition(xs: list[int]) -> Fraction:
    """Mean over λ ∈ {1/2, 1, 3/2} of Σ_k ∏_{i=k}^t (1 + λ(1/2 − x_i)), exactly."""
    total = Fraction(0)
    for lam in (Fraction(1, 2), Fraction(1), Fraction(3, 2)):
        for k in range(len(xs)):
            p = Fraction(1)
            for x in xs[k:]:
                p *= 1 + lam * (Fraction(1, 2) - x)
            total += p
    return total / 3


def test_the_gain_is_the_mean_paired_difference_over_shared_graded_cases() -> None:
    base = [
        TrialOutcome("a", True),
        TrialOutcome("a", False),
        TrialOutcome("b", False),
        TrialOutcome("c", True),  # not in the candidate
        TrialOutcome("d", None, "agent"),  # errored: not graded in the base
    ]
    candidate = [
        TrialOutcome("a", True),
        TrialOutcome("a", True),
        TrialOutcome("b", True),
        TrialOutcome("d", True),
        TrialOutcome("e", False),
    ]
    # Shared graded cases: a (½ → 1) and b (0 → 1): gain (½ + 1)/2.
    assert paired_gain(base, candidate) == Gain(0.75, 2)
    assert paired_gain(base, [TrialOutcome("z", True)]) is None


def test_a_loop_that_improves_then_plateaus_stops_and_ships_the_version_before_it() -> None:
    decision = _decide({2: 0.25}, 7)
    assert decision.action == "stop"
    assert (decision.version, decision.plateau_start, decision.stopped_at) == (2, 3, 7)
    observed = [r.observation for r in decision.rows[1:]]
    assert observed == [1, 0, 0, 0, 0, 0]
    for t in range(2, 8):
        expected = _mixture_by_definition(observed[: t - 1])  # type: ignore[arg-type]
        assert decision.rows[t - 1].detector == pytest.approx(float(expected), rel=1e-12)
    # Hand computation (stats-methods §12 formulas): 25.3976… ≥ 20 at round 7, 15.217… < 20
    # at round 6.
    assert decision.rows[5].detector == pytest.approx(15.217447916666666, rel=1e-12)
    assert decision.rows[6].detector == pytest.approx(25.397623697916668, rel=1e-12)
    assert [r.state for r in decision.rows] == ["first"] + ["running"] * 5 + ["stop"]


def test_greedy_keeps_only_a_candidate_that_beats_the_incumbent() -> None:
    seen: list[tuple[int, int]] = []
    gains = {2: 0.2, 3: -0.1, 4: 0.02, 5: 0.0}

    def gain_of(base: int, candidate: int) -> Gain:
        seen.append((base, candidate))
        return Gain(gains[candidate], 10)

    decision = decide(5, gain_of, eps=0.05, delta=0.05, gate="greedy")
    assert seen == [(1, 2), (2, 3), (2, 4), (4, 5)]
    assert [r.kept for r in decision.rows] == [True, True, False, True, False]
    # A +2pp round is kept but is no improvement of more than ε.
    assert [r.observation for r in decision.rows] == [None, 1, 0, 0, 0]
    assert (decision.action, decision.version) == ("continue", 4)


def test_chain_compares_each_round_with_the_one_before() -> None:
    seen: list[tuple[int, int]] = []

    def gain_of(base: int, candidate: int) -> Gain:
        seen.append((base, candidate))
        return Gain(-0.1, 10)

    decision = decide(4, gain_of, eps=0.05, delta=0.05, gate="chain")
    assert seen == [(1, 2), (2, 3), (3, 4)]
    assert decision.version == 4


def test_once_stopped_it_stays_stopped_until_a_round_beats_the_shipped_version_by_eps() -> None:
    compared: list[tuple[int, int]] = []
    gains = {2: 0.25, 8: 0.05, 9: 0.04, 10: 0.12, 11: 0.0}

    def gain_of(base: int, candidate: int) -> Gain:
        compared.append((base, candidate))
        return Gain(gains.get(candidate, 0.0), 20)

    decision = decide(11, gain_of, eps=0.05, delta=0.05, gate="greedy")
    assert compared[-4:] == [(2, 8), (2, 9), (2, 10), (10, 11)]
    states = [r.state for r in decision.rows]
    assert states[6:] == ["stop", "stopped", "stopped", "resumed", "running"]
    # Exactly ε is not more than ε.
    assert decision.rows[7].observation == 0 and decision.rows[7].detector is None
    assert (decision.action, decision.version) == ("continue", 10)
    assert (decision.resumed_at, decision.resumed_from) == (10, 2)
    # The detector restarted from 0 after round 10: one non-improving round since.
    assert decision.rows[9].detector == 0.0
    assert decision.detector == pytest.approx(float(_mixture_by_definition([0])), rel=1e-12)


def test_stopped_series_reports_the_shipped_version_while_no_round_beats_it() -> None:
    decision = _decide({2: 0.25, 8: 0.03}, 8)
    assert (decision.action, decision.version, decision.stopped_at) == ("stop", 2, 7)
    assert decision.detector is None


def test_a_round_sharing_no_case_with_the_incumbent_is_not_counted() -> None:
    decision = _decide({2: 0.25, 3: None}, 4)
    row = decision.rows[2]
    assert (row.state, row.observation, row.kept) == ("no-pairs", None, False)
    assert decision.rows[3].detector == pytest.approx(
        float(_mixture_by_definition([1, 0])), rel=1e-12
    )


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="delta"):
        _decide({}, 3, delta=0.0)
    with pytest.raises(ValueError, match="eps"):
        _decide({}, 3, eps=1.0)


def _first_alarm(rng: random.Random, p_improve: float, delta: float, cap: int) -> int:
    """Rounds observed until the first (false) alarm, at most `cap`."""
    gains = {t: 0.10 if rng.random() < p_improve else -0.02 for t in range(2, cap + 2)}
    decision = _decide(gains, cap + 1, delta=delta)
    for row in decision.rows:
        if row.state == "stop":
            return row.round - 1
    return cap


@pytest.mark.parametrize(("delta", "streams"), [(0.05, 800), (0.1, 800)])
def test_false_alarms_come_on_average_no_sooner_than_every_1_over_delta_rounds(
    delta: float, streams: int
) -> None:
    # A no-change stream at the edge of "still improving": each round beats the incumbent by
    # more than ε with probability exactly m0 = ½. Run lengths are capped at 150 rounds, which
    # only shortens them, so the capped mean is a lower bound of the average run length.
    rng = random.Random(7)
    lengths = [_first_alarm(rng, 0.5, delta, 150) for _ in range(streams)]
    assert statistics.fmean(lengths) >= 1 / delta
    # …and the guarantee is not vacuous: the detector does raise false alarms on such a stream.
    assert sum(length < 150 for length in lengths) > 0.9 * streams
