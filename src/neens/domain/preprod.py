"""The facts a pre-prod run's verdict is computed from: its items, its cohorts, one verdict rule.

The store reads rows into these plain values; `gate`, `comparison` and the API compute every
number from them, so the run page, the gate, the comparison and the CLI cannot disagree about
what passed, what regressed and what it cost.

One rule is decided here, once, because every view depends on it: an item's candidate verdict.
A scored item passed or failed as its judges said. An item in status error failed: the candidate
was asked and did not produce something that could be judged, and counting that as "no data"
would let a version that crashes on the hard prompts look better than one that answers them
badly. A pending or captured item has no verdict yet (None): it is neither a pass nor a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from neens.domain.run_lifecycle import ITEM_STATUSES, ItemStatus, RunStatus
from neens.domain.stats import mean

__all__ = [
    "CohortStats",
    "ItemOutcome",
    "ItemStatus",
    "RunStatus",
    "candidate_verdict",
    "cohort_stats",
    "is_new_pass",
    "is_regression",
    "items_cohort",
]

_ITEM_STATUSES: Final = frozenset(ITEM_STATUSES)


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """One frozen golden prompt of a run and what the candidate made of it."""

    item_id: str
    position: int
    """The item's place in the frozen snapshot; rows are shown in this order."""
    input: str
    expected_output: str | None
    status: ItemStatus
    score: float | None
    """The mean of the item's judge scores; None until scored."""
    passed: bool | None
    """The judges' verdict; read only for a scored item (see `candidate_verdict`)."""
    baseline_passed: bool | None
    """The baseline's verdict for the same prompt; None when the baseline has none."""
    error: str | None
    output: str | None
    """The candidate's final answer; None when nothing was captured."""
    cost_usd: float | None
    """None when the captured session is unpriced or there is no session."""
    latency_ms: float | None
    step_count: int | None
    session_id: str | None

    def __post_init__(self) -> None:
        if self.status not in _ITEM_STATUSES:
            raise ValueError(f"item {self.item_id!r} has an unknown status {self.status!r}")
        # A scored item without a verdict would sit in the pass-rate denominator as neither a
        # pass nor a failure; refuse it here rather than guess which one it was.
        if self.status == "scored" and self.passed is None:
            raise ValueError(f"item {self.item_id!r} is scored but has no passed verdict")


@dataclass(frozen=True, slots=True)
class CohortStats:
    """Averages over one side's sessions (the candidate's, or the baseline cohort's).

    Every average is over the sessions where the value is known, and None when it is known for
    none: an unpriced session is never counted as free, and no data is never 0.
    """

    avg_cost_usd: float | None
    """Over priced sessions only; None when no session was priced."""
    priced_sessions: int
    sessions: int
    avg_latency_ms: float | None
    avg_step_count: float | None


def cohort_stats(
    costs: Sequence[float | None],
    latencies: Sequence[float | None],
    steps: Sequence[int | None],
) -> CohortStats:
    """Build a cohort's stats from per-session values, where None marks an unknown value.

    The three sequences describe the same sessions, one entry each, so they must be equally
    long. A session with no recorded LLM call has an unknown cost (the agent may have called a
    model without tracing it): pass None for it, as for an unpriced one.
    """
    if not len(costs) == len(latencies) == len(steps):
        raise ValueError(
            "costs, latencies and steps must have one entry per session, got "
            f"{len(costs)}, {len(latencies)} and {len(steps)}"
        )
    priced = [cost for cost in costs if cost is not None]
    return CohortStats(
        avg_cost_usd=mean(priced),
        priced_sessions=len(priced),
        sessions=len(costs),
        avg_latency_ms=mean(latency for latency in latencies if latency is not None),
        avg_step_count=mean(float(count) for count in steps if count is not None),
    )


def items_cohort(items: Iterable[ItemOutcome]) -> CohortStats:
    """The candidate cohort of a run: the sessions its items captured (items with a session)."""
    captured = [item for item in items if item.session_id is not None]
    return cohort_stats(
        [item.cost_usd for item in captured],
        [item.latency_ms for item in captured],
        [item.step_count for item in captured],
    )


def candidate_verdict(item: ItemOutcome) -> bool | None:
    """Whether the candidate passed this item: a scored item's verdict, False for an error,
    None while the item is pending or captured (see the module docstring)."""
    if item.status == "scored":
        return item.passed
    if item.status == "error":
        return False
    return None


def is_regression(item: ItemOutcome) -> bool:
    """The baseline passed this prompt and the candidate failed it (an error is a failure).

    An item without a baseline verdict can never regress; an item the candidate has not been
    judged on yet has not regressed (yet).
    """
    return item.baseline_passed is True and candidate_verdict(item) is False


def is_new_pass(item: ItemOutcome) -> bool:
    """The baseline failed this prompt and the candidate passed it: an item the candidate fixed."""
    return item.baseline_passed is False and candidate_verdict(item) is True
