"""When an improvement loop has reached its plateau (`neens exp plateau`, `exp run --series`).

A series is a sequence of rounds v1, v2, … (experiments). Each round t ≥ 2 is compared with the
incumbent on the cases both graded: the gain g_t is the mean over those shared cases of the
candidate's pass rate minus the incumbent's (the B − A of `exp compare`).

The plateau statistic is X_t = 1 when g_t > ε, else 0: did this round beat the incumbent by more
than ε? While the loop is still improving, at least half its rounds do: E[X_t | past] ≥ m₀ = ½.
The plateau is the change to E[X_t | past] < ½. A mixture of Shiryaev–Roberts e-detectors over
λ ∈ {0.5, 1, 1.5} (`neens.domain.edetector`) watches X_t and alarms at the first round with
M_t ≥ 1/δ, which keeps false alarms on average no sooner than every 1/δ rounds. The plateau is
then said to begin at the most likely changepoint, and the version to ship is the incumbent
just before it.

Gates: `greedy` keeps a candidate as the new incumbent only when g_t > 0; `chain` keeps every
one (each round is compared with the one before it).

Once stopped, a series stays stopped: each later round is compared with the shipped version,
and only one that beats it by more than ε resumes the series. It becomes the incumbent and the
detector restarts from M₀ = 0 with the next round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from neens.domain.edetector import MixtureDetector, changepoint
from neens.domain.exp_compare import TrialOutcome
from neens.domain.stats import mean

PLATEAU_M0: Final = 0.5
"""The pre-change floor of E[X_t | past]: a loop improves while half its rounds gain > ε."""
PLATEAU_LAMBDAS: Final = (0.5, 1.0, 1.5)
"""The λ grid of the SR mixture (the admissible range at m₀ = ½ is [0, 2])."""
MIN_ROUNDS: Final = 3
"""`exp plateau` decides from this many rounds on (two gains)."""

Gate = Literal["greedy", "chain"]
RoundState = Literal["first", "running", "no-pairs", "stop", "stopped", "resumed"]


@dataclass(frozen=True, slots=True)
class Gain:
    """A candidate's paired gain over the round it is compared with."""

    gain: float
    shared: int
    """Cases graded in both rounds."""


def paired_gain(base: Sequence[TrialOutcome], candidate: Sequence[TrialOutcome]) -> Gain | None:
    """The mean over shared cases of (candidate's pass rate − base's pass rate) on each case,
    each rate over the case's graded case-trials; None when no case is graded in both."""

    def rates(outcomes: Sequence[TrialOutcome]) -> dict[str, float]:
        per_case: dict[str, list[bool]] = {}
        for o in outcomes:
            if o.passed is not None:
                per_case.setdefault(o.case_id, []).append(o.passed)
        return {case: sum(v) / len(v) for case, v in per_case.items()}

    rates_a, rates_b = rates(base), rates(candidate)
    shared = sorted(rates_a.keys() & rates_b.keys())
    gain = mean(rates_b[c] - rates_a[c] for c in shared)
    return None if gain is None else Gain(gain, len(shared))


@dataclass(frozen=True, slots=True)
class RoundRow:
    """One round as the detector saw it."""

    round: int
    compared_with: int | None
    """The incumbent (or, once stopped, the shipped round) it was compared with."""
    gain: Gain | None
    observation: int | None
    """X_t: 1 when the gain is more than ε, 0 when not; None when not observed."""
    detector: float | None
    """M_t after this round; None while stopped."""
    kept: bool
    """It became the incumbent."""
    incumbent: int
    """The incumbent after this round."""
    state: RoundState


@dataclass(frozen=True, slots=True)
class SeriesDecision:
    action: Literal["continue", "stop"]
    version: int
    """The incumbent to continue from, or the round to ship."""
    rows: tuple[RoundRow, ...]
    threshold: float
    """1/δ."""
    detector: float | None
    """M_t after the last round; None while stopped."""
    plateau_start: int | None = None
    """With "stop": the round the plateau began at."""
    stopped_at: int | None = None
    """With "stop": the round the detector alarmed at."""
    resumed_at: int | None = None
    """The last round that beat a shipped version by more than ε and restarted the detector."""
    resumed_from: int | None = None
    """The shipped round it beat."""


def decide(
    rounds: int,
    gain_of: Callable[[int, int], Gain | None],
    *,
    eps: float,
    delta: float,
    gate: Gate,
) -> SeriesDecision:
    """Run the detector over rounds 1…`rounds`; `gain_of(base, candidate)` pairs two rounds."""
    if rounds < 1:
        raise ValueError("a series has at least one round")
    if not 0 <= eps < 1:
        raise ValueError(f"eps must be in [0, 1), got {eps}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be between 0 and 1 exclusive, got {delta}")
    threshold = 1 / delta
    detector = MixtureDetector(PLATEAU_M0, PLATEAU_LAMBDAS)
    observed: list[tuple[int, int]] = []  # (round, X_t) since the detector last started
    incumbent_after = {1: 1}
    incumbent = 1
    rows = [RoundRow(1, None, None, None, 0.0, True, 1, "first")]
    shipped: int | None = None
    plateau_start = stopped_at = resumed_at = resumed_from = None
    for t in range(2, rounds + 1):
        if shipped is not None:
            found = gain_of(shipped, t)
            if found is not None and found.gain > eps:
                resumed_at, resumed_from = t, shipped
                shipped = plateau_start = stopped_at = None
                incumbent = t
                detector = MixtureDetector(PLATEAU_M0, PLATEAU_LAMBDAS)
                observed = []
                rows.append(RoundRow(t, resumed_from, found, 1, 0.0, True, t, "resumed"))
            else:
                x = None if found is None else 0
                rows.append(RoundRow(t, shipped, found, x, None, False, shipped, "stopped"))
            incumbent_after[t] = incumbent if shipped is None else shipped
            continue
        found = gain_of(incumbent, t)
        kept = gate == "chain" or (found is not None and found.gain > 0)
        compared_with = incumbent
        if found is None:
            if kept:
                incumbent = t
            incumbent_after[t] = incumbent
            rows.append(
                RoundRow(t, compared_with, None, None, detector.value, kept, incumbent, "no-pairs")
            )
            continue
        x = 1 if found.gain > eps else 0
        value = detector.update(x)
        observed.append((t, x))
        if kept:
            incumbent = t
        incumbent_after[t] = incumbent
        state: RoundState = "running"
        if value >= threshold:
            start = observed[changepoint([o for _, o in observed], PLATEAU_M0, PLATEAU_LAMBDAS)][0]
            plateau_start, stopped_at = start, t
            shipped = incumbent = incumbent_after[start - 1]
            incumbent_after[t] = shipped
            state = "stop"
        rows.append(RoundRow(t, compared_with, found, x, value, kept, incumbent, state))
    if shipped is not None:
        return SeriesDecision(
            "stop",
            shipped,
            tuple(rows),
            threshold,
            None,
            plateau_start,
            stopped_at,
            resumed_at,
            resumed_from,
        )
    return SeriesDecision(
        "continue",
        incumbent,
        tuple(rows),
        threshold,
        detector.value,
        resumed_at=resumed_at,
        resumed_from=resumed_from,
    )
