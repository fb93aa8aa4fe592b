"""The cost–quality frontier of a sweep's comparison: each arm by cost per case against pass rate.

Only what the comparison already says is placed; nothing is re-derived:

- An arm is **plotted** when it has a rate (n > 0) and a cost per case. An unpriced arm is
  listed beside the chart, never plotted at 0 (unpriced is not free); an arm with no scored item
  is listed as having no data, never plotted at 0%.
- An arm is **on the frontier** when it is eligible (not excluded from the ranking: it finished
  and passed pass^k) and no other eligible plotted arm is at least as cheap and at least as good,
  and strictly one of the two. Excluded arms are plotted, marked, and never on the frontier: an
  arm that was not green on every run is not a choice.
- The **highlighted** arm is the verdict's recommended arm, the cheapest one that passed pass^k
  and clears the bar; when that arm is unpriced it is highlighted in the unpriced list.
- A void sweep has no frontier (None): its arms cannot be compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from neens.domain.decision_types import ArmComparison, Excluded, Verdict

__all__ = ["Frontier", "FrontierPoint", "cost_quality_frontier"]


@dataclass(frozen=True, slots=True)
class FrontierPoint:
    arm_id: str
    label: str
    cost_per_case_usd: float
    rate: float
    wilson_low: float
    wilson_high: float
    n: int
    excluded: Excluded | None
    on_frontier: bool
    highlighted: bool


@dataclass(frozen=True, slots=True)
class Frontier:
    points: tuple[FrontierPoint, ...]
    """Plotted arms, cheapest first (then by rate, best first, then position)."""
    unpriced_arm_ids: tuple[str, ...]
    """Arms with data and no price: listed beside the chart, in position order."""
    no_data_arm_ids: tuple[str, ...]
    """Arms no item of which was scored, in position order."""
    highlighted_arm_id: str | None
    """The recommended arm, wherever it is listed; None when nothing is recommended."""


def cost_quality_frontier(
    arms: Sequence[ArmComparison], verdict: Verdict, *, comparable: bool
) -> Frontier | None:
    """The frontier of the comparison's arms (in position order); None for a void sweep."""
    if not comparable:
        return None
    highlighted = verdict.recommended_arm_id
    placed = [arm for arm in arms if arm.rate is not None and arm.cost_per_case_usd is not None]
    eligible = [arm for arm in placed if arm.excluded is None]

    def dominated(arm: ArmComparison) -> bool:
        assert arm.rate is not None and arm.cost_per_case_usd is not None
        for other in eligible:
            assert other.rate is not None and other.cost_per_case_usd is not None
            if other is arm:
                continue
            cheaper_or_same = other.cost_per_case_usd <= arm.cost_per_case_usd
            better_or_same = other.rate >= arm.rate
            strictly = other.cost_per_case_usd < arm.cost_per_case_usd or other.rate > arm.rate
            if cheaper_or_same and better_or_same and strictly:
                return True
        return False

    points = []
    for arm in placed:
        assert arm.rate is not None and arm.cost_per_case_usd is not None
        assert arm.wilson_low is not None and arm.wilson_high is not None
        points.append(
            FrontierPoint(
                arm_id=arm.arm_id,
                label=arm.label,
                cost_per_case_usd=arm.cost_per_case_usd,
                rate=arm.rate,
                wilson_low=arm.wilson_low,
                wilson_high=arm.wilson_high,
                n=arm.n,
                excluded=arm.excluded,
                on_frontier=arm.excluded is None and not dominated(arm),
                highlighted=arm.arm_id == highlighted,
            )
        )
    points.sort(key=lambda p: (p.cost_per_case_usd, -p.rate, _position(arms, p.arm_id)))
    return Frontier(
        points=tuple(points),
        unpriced_arm_ids=tuple(
            arm.arm_id for arm in arms if arm.rate is not None and arm.cost_per_case_usd is None
        ),
        no_data_arm_ids=tuple(arm.arm_id for arm in arms if arm.rate is None),
        highlighted_arm_id=highlighted,
    )


def _position(arms: Sequence[ArmComparison], arm_id: str) -> int:
    return next(arm.position for arm in arms if arm.arm_id == arm_id)
