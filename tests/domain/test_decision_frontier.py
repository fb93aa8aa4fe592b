"""The cost–quality frontier of a sweep comparison, on hand-built evidence with known answers,
and against a brute-force reading of "no other eligible arm is as cheap and as good"."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from neens.domain.decision import compare_sweep
from neens.domain.decision_frontier import cost_quality_frontier
from neens.domain.decision_types import (
    ArmComparison,
    ArmEvidence,
    Bar,
    SweepComparison,
    Verdict,
)
from tests.domain.test_decision import arm, items, passing, reps


def _compare(
    arms: list[ArmEvidence], item_ids: list[str], *, comparable: bool = True
) -> SweepComparison:
    return compare_sweep(
        arms,
        item_ids,
        comparable=comparable,
        void_reason=None if comparable else "judge set differs",
        bar=Bar(0.9, "query"),
        baseline_arm_id=None,
    )


def test_each_arm_is_placed_by_its_cost_and_rate_and_the_dominated_ones_are_off_the_frontier() -> (
    None
):
    c = _compare(
        [
            arm("msa-base", 0, passing(19, of=20, cost=0.10)),  # 95%, expensive
            arm("msa-mini", 1, passing(19, of=20, cost=0.02)),  # 95%, cheap: dominates base
            arm("msa-tiny", 2, passing(15, of=20, cost=0.01)),  # 75%, cheapest
            arm("msa-old", 3, passing(14, of=20, cost=0.05)),  # 70% at 0.05: dominated by mini
        ],
        items(20),
    )
    f = c.frontier
    assert f is not None
    assert [p.label for p in f.points] == ["tiny", "mini", "old", "base"]  # cheapest first
    on = {p.label for p in f.points if p.on_frontier}
    assert on == {"tiny", "mini"}
    assert f.highlighted_arm_id == "msa-mini" == c.verdict.recommended_arm_id
    assert [p.label for p in f.points if p.highlighted] == ["mini"]
    by_label = {p.label: p for p in f.points}
    assert by_label["tiny"].rate == 0.75 and by_label["tiny"].cost_per_case_usd == 0.01
    assert by_label["base"].wilson_low == c.arms[0].wilson_low


def test_unpriced_arms_are_listed_beside_never_plotted_as_free() -> None:
    c = _compare(
        [
            arm("msa-base", 0, passing(18, of=20, cost=0.10)),
            arm("msa-local", 1, passing(20, of=20, cost=None)),
        ],
        items(20),
    )
    f = c.frontier
    assert f is not None
    assert [p.arm_id for p in f.points] == ["msa-base"]
    assert f.unpriced_arm_ids == ("msa-local",)
    # Plotted at 0 USD, the unpriced arm would dominate the base; it must not.
    assert f.points[0].on_frontier is True


def test_an_arm_with_no_data_is_listed_never_plotted_at_zero() -> None:
    c = _compare(
        [
            arm("msa-base", 0, passing(18, of=20, cost=0.10)),
            arm("msa-dead", 1, {}, status="failed", passed=None),
        ],
        items(20),
    )
    assert c.frontier is not None
    assert c.frontier.no_data_arm_ids == ("msa-dead",)
    assert [p.arm_id for p in c.frontier.points] == ["msa-base"]


def test_an_excluded_arm_is_plotted_and_never_on_the_frontier() -> None:
    flaky = {f"i{i}": reps(True, True, True, cost=0.01) for i in range(20)}
    c = _compare(
        [
            arm("msa-base", 0, passing(18, of=20, cost=0.10)),
            arm("msa-cheap", 1, flaky, passed=False),  # 100% and cheapest, but not pass^k
        ],
        items(20),
    )
    f = c.frontier
    assert f is not None
    cheap = next(p for p in f.points if p.arm_id == "msa-cheap")
    assert cheap.excluded == "not_pass_k" and cheap.on_frontier is False
    base = next(p for p in f.points if p.arm_id == "msa-base")
    assert base.on_frontier is True, "an excluded arm dominates nothing"


def test_a_void_sweep_has_no_frontier() -> None:
    c = _compare(
        [
            arm("msa-base", 0, passing(18, of=20, cost=0.10)),
            arm("msa-mini", 1, passing(19, of=20, cost=0.02)),
        ],
        items(20),
        comparable=False,
    )
    assert c.frontier is None


def _brute_force(arms: list[ArmComparison]) -> set[str]:
    """Eligible priced arms with data such that no eligible priced arm with data is <= in cost
    and >= in rate and differs in at least one."""
    pts = [
        (a.arm_id, a.cost_per_case_usd, a.rate)
        for a in arms
        if a.excluded is None and a.rate is not None and a.cost_per_case_usd is not None
    ]
    out = set()
    for arm_id, cost, rate in pts:
        beaten = any(
            c2 <= cost and r2 >= rate and (c2, r2) != (cost, rate)
            for other, c2, r2 in pts
            if other != arm_id
        )
        if not beaten:
            out.add(arm_id)
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, 0.01, 0.02, 0.05, 0.1]),  # cost per case (None: unpriced)
            st.integers(min_value=0, max_value=5),  # items passed of 5 (0 still has data)
            st.booleans(),  # passed pass^k
        ),
        min_size=1,
        max_size=6,
    )
)
def test_the_frontier_is_what_brute_force_says(spec: list[tuple[float | None, int, bool]]) -> None:
    arms = [
        arm(f"msa-{i}", i, passing(ok, of=5, cost=cost), passed=green)
        for i, (cost, ok, green) in enumerate(spec)
    ]
    c = _compare(arms, items(5))
    f = c.frontier
    assert f is not None
    assert {p.arm_id for p in f.points if p.on_frontier} == _brute_force(list(c.arms))
    plotted = {a.arm_id for a in c.arms if a.cost_per_case_usd is not None and a.rate is not None}
    assert {p.arm_id for p in f.points} == plotted
    assert set(f.unpriced_arm_ids) == {a.arm_id for a in c.arms if a.cost_per_case_usd is None}
    costs = [p.cost_per_case_usd for p in f.points]
    assert costs == sorted(costs)


def test_the_highlight_follows_the_verdict_even_when_it_is_unpriced() -> None:
    verdict = Verdict("recommended", "msa-x", "x", None, None, None, "point", "x it is")
    assert cost_quality_frontier((), verdict, comparable=True) is not None
    f = cost_quality_frontier((), verdict, comparable=True)
    assert f is not None and f.highlighted_arm_id == "msa-x" and f.points == ()
