"""The sweep decision on hand-built evidence with known answers.

Every statistic is checked against statsmodels or SciPy called here, never against the
function under test. Each test runs three times: with the repeats as item id -> `Repeat`s, as
columns of one row per answer (`RepeatColumns.from_rows`), and as the server gives them: each
run's answers as arrays (`RunAnswers`), added up per item with `ItemArrays.add_up`. That the
server reads the same answers from the database is tests/api/test_sweep_decision_evidence.py.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.proportion import proportion_confint

from neens.domain.decision import (
    DEFAULT_BAR,
    UNATTRIBUTED,
    ArmEvidence,
    Bar,
    ItemArrays,
    Repeat,
    RepeatColumns,
    SweepComparison,
    compare_sweep,
)
from neens.domain.decision_types import FAILED, NO_VERDICT, NOT_SCORED, PASSED, RunAnswers
from neens.domain.sweeps import ArmStatus
from neens.errors import Unprocessable

RUNS = ("ppr-1", "ppr-2", "ppr-3")


def reps(
    *verdicts: bool | None,
    cost: float | None | Sequence[float | None] = 0.01,
    agent: str | None | Sequence[str | None] = "refund",
    runs: Sequence[str] = RUNS,
) -> list[Repeat]:
    """One repeat per run; a verdict of None is captured but not scored."""
    out = []
    for i, verdict in enumerate(verdicts):
        each_cost = cost[i] if isinstance(cost, Sequence) else cost
        each_agent = agent if agent is None or isinstance(agent, str) else agent[i]
        out.append(
            Repeat(
                run_id=runs[i],
                session_id=f"ses-{i}",
                scored=verdict is not None,
                passed=verdict,
                score=None if verdict is None else float(verdict),
                cost_usd=each_cost,
                agent_name=each_agent,
            )
        )
    return out


def arm(
    arm_id: str,
    position: int,
    repeats: Mapping[str, Sequence[Repeat]],
    *,
    status: ArmStatus = "completed",
    passed: bool | None = True,
    runs: int = 3,
) -> ArmEvidence:
    return ArmEvidence(arm_id, arm_id.removeprefix("msa-"), position, status, passed, runs, repeats)


def passing(count: int, *, of: int, cost: float | None = 0.01, prefix: str = "i") -> dict:
    """`count` items passed on every run and `of - count` failed on every run."""
    return {f"{prefix}{i}": reps(*([i < count] * 3), cost=cost) for i in range(of)}


def items(count: int, prefix: str = "i") -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


Compare = Callable[..., SweepComparison]


def by_run(repeats: Mapping[str, Sequence[Repeat]], item_ids: Sequence[str]) -> ItemArrays:
    """The repeats as the server gives them: each run's answers as arrays, added up. An item
    outside `item_ids` gets the position after the last, as an unknown item would."""
    index = {item_id: i for i, item_id in enumerate(item_ids)}
    answers: dict[str, list[tuple[int, int, float, str | None]]] = {}
    for item_id, reps_of_item in repeats.items():
        for r in reps_of_item:
            verdict = (
                NOT_SCORED
                if not r.scored
                else NO_VERDICT
                if r.passed is None
                else PASSED
                if r.passed
                else FAILED
            )
            cost = np.nan if r.cost_usd is None else r.cost_usd
            answers.setdefault(r.run_id, []).append(
                (index.get(item_id, len(item_ids)), verdict, cost, r.agent_name or None)
            )
    runs = []
    for rows in answers.values():
        names = sorted({name for *_, name in rows if name is not None})
        runs.append(
            RunAnswers(
                item=np.array([row[0] for row in rows], dtype=np.int32),
                verdict=np.array([row[1] for row in rows], dtype=np.uint8),
                cost=np.array([row[2] for row in rows], dtype=np.float64),
                agent=np.array(
                    [-1 if row[3] is None else names.index(row[3]) for row in rows],
                    dtype=np.int32,
                ),
                names=tuple(names),
            )
        )
    return ItemArrays.add_up(runs, len(item_ids))


@pytest.fixture(params=["mapping", "columns", "runs"])
def compare(request: pytest.FixtureRequest) -> Compare:
    def run(
        arms: Sequence[ArmEvidence],
        item_ids: Sequence[str],
        *,
        bar: float = DEFAULT_BAR,
        comparable: bool = True,
        void_reason: str | None = None,
        baseline: str | None = None,
    ) -> SweepComparison:
        if request.param == "columns":
            arms = [
                dataclasses.replace(
                    a,
                    repeats=RepeatColumns.from_rows(
                        [
                            (item, r.run_id, r.scored, r.passed, r.cost_usd, r.agent_name)
                            for item, rs in a.repeats.items()  # type: ignore[union-attr]
                            for r in rs
                        ]
                    ),
                )
                for a in arms
            ]
        if request.param == "runs":
            if any(
                len({r.run_id for r in rs}) < len(rs)
                for a in arms
                for rs in a.repeats.values()  # type: ignore[union-attr]
            ):
                pytest.skip("a run answers an item at most once in what the server reads")
            arms = [
                dataclasses.replace(a, repeats=by_run(a.repeats, item_ids))  # type: ignore[arg-type]
                for a in arms
            ]
        return compare_sweep(
            arms,
            item_ids,
            comparable=comparable,
            void_reason=void_reason,
            bar=Bar(bar, "query"),
            baseline_arm_id=baseline,
        )

    return run


def wilson(k: int, n: int) -> tuple[float, float]:
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    return float(low), float(high)


# --- the item rule, n and the interval ------------------------------------------------------------


def test_a_flaky_item_is_counted_and_is_not_a_pass(compare: Compare) -> None:
    evidence = {
        "a": reps(True, True, True),
        "b": reps(True, False, True),  # flaky: 2 of 3
        "c": reps(False, False, False),
        "d": reps(True, True, True),
    }
    result = compare([arm("msa-x", 0, evidence)], ["a", "b", "c", "d"])
    (row,) = result.arms

    assert (row.n, row.passed_items, row.flaky_items) == (4, 2, 1)
    assert row.rate == 0.5  # a flaky item counted as a pass would make it 0.75


def test_the_interval_is_over_items_never_over_pooled_repeats(compare: Compare) -> None:
    evidence = {
        "a": reps(True, True, True),
        "b": reps(True, False, True),
        "c": reps(False, False, False),
        "d": reps(True, True, True),
    }
    (row,) = compare([arm("msa-x", 0, evidence)], ["a", "b", "c", "d"]).arms
    scipy_ci = binomtest(2, 4).proportion_ci(confidence_level=0.95, method="wilson")

    assert (row.wilson_low, row.wilson_high) == pytest.approx(wilson(2, 4), rel=1e-12)
    assert (row.wilson_low, row.wilson_high) == pytest.approx(
        (scipy_ci.low, scipy_ci.high), rel=1e-9
    )
    assert row.wilson_low != pytest.approx(wilson(8, 12)[0])  # 8 of 12 pooled repeats


def test_an_arm_with_nothing_scored_has_no_rate_not_zero(compare: Compare) -> None:
    evidence = {"a": reps(None, None, None), "b": reps(None)}
    result = compare([arm("msa-x", 0, evidence)], ["a", "b", "c"])
    (row,) = result.arms

    assert row.n == 0
    assert row.rate is None
    assert row.wilson_low is None and row.wilson_high is None
    assert row.clears_bar == "no"
    assert row.cases == 4
    assert result.verdict.outcome == "no_arm_clears"
    assert "x has no scored item" in result.verdict.sentence


def test_an_item_no_repeat_of_which_was_scored_is_not_in_n(compare: Compare) -> None:
    evidence = {"a": reps(True, True, True), "b": reps(None, None), "c": reps(False, None)}
    (row,) = compare([arm("msa-x", 0, evidence)], ["a", "b", "c", "d"]).arms

    assert (row.n, row.passed_items, row.rate) == (2, 1, 0.5)


def test_a_scored_repeat_without_a_verdict_is_refused(compare: Compare) -> None:
    broken = Repeat("ppr-1", "ses-1", True, None, 0.4, 0.01, "refund")

    with pytest.raises(ValueError, match="no verdict"):
        compare([arm("msa-x", 0, {"a": [broken]})], ["a"])


def test_repeats_of_an_item_outside_the_frozen_items_are_refused(compare: Compare) -> None:
    with pytest.raises(ValueError, match="not in item_ids|outside the sweep's 1 items"):
        compare([arm("msa-x", 0, {"zz": reps(True)})], ["a"])


# --- cost -----------------------------------------------------------------------------------------


def test_a_partly_priced_arm_averages_over_its_priced_cases_only(compare: Compare) -> None:
    evidence = {"a": reps(True, True, True, cost=[0.01, None, 0.03])}
    (row,) = compare([arm("msa-x", 0, evidence)], ["a"], bar=0.0).arms

    assert (row.cases, row.priced_cases) == (3, 2)
    assert row.cost_per_case_usd == pytest.approx(0.02)  # counting None as 0 gives 0.0133


def test_an_unpriced_arm_has_no_cost_and_is_never_recommended_over_a_priced_one(
    compare: Compare,
) -> None:
    priced = arm("msa-sonnet", 0, passing(40, of=40, cost=0.05))
    unpriced = arm("msa-mystery", 1, passing(40, of=40, cost=None))
    result = compare([priced, unpriced], items(40))
    mystery = result.arms[1]

    assert mystery.cost_per_case_usd is None and mystery.priced_cases == 0
    assert mystery.cost_delta_usd is None and mystery.cost_delta_pct is None
    assert mystery.clears_bar == "lower_bound"
    assert result.verdict.recommended_arm_id == "msa-sonnet"  # None read as $0 would win


def test_an_unpriced_arm_is_recommended_only_when_no_priced_arm_clears(compare: Compare) -> None:
    below = arm("msa-sonnet", 0, passing(20, of=40, cost=0.05))
    unpriced = arm("msa-mystery", 1, passing(40, of=40, cost=None))
    verdict = compare([below, unpriced], items(40)).verdict

    assert verdict.outcome == "recommended"
    assert verdict.recommended_arm_id == "msa-mystery"
    assert verdict.cost_per_case_usd is None
    assert verdict.savings_usd is None and verdict.savings_pct is None
    assert "cost per case is unknown" in verdict.sentence
    assert "no priced arm clears the bar" in verdict.sentence


def test_a_cost_delta_against_a_free_baseline_has_no_percentage(compare: Compare) -> None:
    free = arm("msa-free", 0, passing(1, of=1, cost=0.0))
    paid = arm("msa-paid", 1, passing(1, of=1, cost=0.02))
    row = compare([free, paid], items(1)).arms[1]

    assert row.cost_delta_usd == pytest.approx(0.02)
    assert row.cost_delta_pct is None


# --- the baseline ---------------------------------------------------------------------------------


def test_the_baseline_is_the_first_listed_arm_never_the_best(compare: Compare) -> None:
    best = arm("msa-best", 1, passing(40, of=40))
    incumbent = arm("msa-incumbent", 0, passing(30, of=40))
    result = compare([best, incumbent], items(40))  # given out of order on purpose

    assert result.baseline_arm_id == "msa-incumbent"
    assert result.winner_arm_id == "msa-best"
    assert [row.arm_id for row in result.arms] == ["msa-incumbent", "msa-best"]
    assert result.arms[0].is_baseline and not result.arms[1].is_baseline
    assert result.arms[1].new_passes == 10


def test_the_baseline_can_be_overridden(compare: Compare) -> None:
    first = arm("msa-a", 0, passing(30, of=40, cost=0.01))
    second = arm("msa-b", 1, passing(40, of=40, cost=0.04))
    result = compare([first, second], items(40), baseline="msa-b")

    assert result.baseline_arm_id == "msa-b"
    assert result.arms[1].regressions == 0 and result.arms[1].mcnemar is None
    assert result.arms[0].regressions == 10
    assert result.arms[0].cost_delta_pct == pytest.approx(-75.0)


def test_an_unknown_baseline_arm_is_a_422_on_baseline_arm(compare: Compare) -> None:
    with pytest.raises(Unprocessable) as caught:
        compare([arm("msa-a", 0, passing(1, of=1))], items(1), baseline="msa-nope")

    assert caught.value.field == "baselineArm"
    assert caught.value.status_code == 422


# --- regressions and new passes -------------------------------------------------------------------


def test_regressions_and_new_passes_by_their_exact_definition(compare: Compare) -> None:
    baseline = {
        "regressed": reps(True, True, True),
        "flaky_in_candidate": reps(True, True, True),
        "baseline_short": reps(True, True),  # passed, but on 2 of its 3 runs only
        "never_captured": reps(True, True, True),
        "never_scored": reps(True, True, True),
        "one_run_thrice": reps(True, True, True, runs=("ppr-1", "ppr-1", "ppr-1")),
        "fixed": reps(False, False, False),
        "fixed_on_two": reps(False, False, False),
        "baseline_unscored": reps(None, None, None),
    }
    candidate = {
        "regressed": reps(False, False, False),
        "flaky_in_candidate": reps(True, False, True),
        "baseline_short": reps(False, False, False),
        "never_scored": reps(None, None, None),
        "one_run_thrice": reps(False, False, False),
        "fixed": reps(True, True, True),
        "fixed_on_two": reps(True, True),
        "baseline_unscored": reps(True, True, True),
    }
    result = compare([arm("msa-base", 0, baseline), arm("msa-cand", 1, candidate)], list(baseline))
    base_row, cand_row = result.arms

    assert cand_row.regressions == 2  # regressed, flaky_in_candidate
    assert cand_row.new_passes == 1  # fixed
    assert (base_row.regressions, base_row.new_passes) == (0, 0)


# --- exclusion, ranking and the verdict -----------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "passed", "reason"),
    [
        ("running", None, "not_terminal"),
        ("pending", None, "not_terminal"),
        ("failed", False, "failed"),
        ("cancelled", None, "failed"),
        ("completed", False, "not_pass_k"),
        ("completed", None, "not_pass_k"),
        ("completed", True, None),
    ],
)
def test_exclusion_reasons_in_their_order(
    compare: Compare, status: ArmStatus, passed: bool | None, reason: str | None
) -> None:
    row = compare(
        [
            arm("msa-a", 0, passing(4, of=4)),
            arm("msa-b", 1, passing(4, of=4), status=status, passed=passed),
        ],
        items(4),
    ).arms[1]

    assert row.excluded == reason
    assert (row.rank is None) == (reason is not None)


def test_an_arm_still_running_blocks_the_recommendation(compare: Compare) -> None:
    done = arm("msa-done", 0, passing(40, of=40))
    running = arm("msa-busy", 1, passing(10, of=40), status="running", passed=None)
    result = compare([done, running], items(40))

    assert result.arms[1].excluded == "not_terminal"
    assert result.verdict.outcome == "not_finished"
    assert result.verdict.recommended_arm_id is None
    assert "busy (running)" in result.verdict.sentence
    assert result.leaderboard == ("msa-done",)
    # No winner either: the running arm may take first place when it finishes.
    assert result.winner_arm_id is None
    assert result.arms[0].not_distinguishable_from_winner is False


def test_savings_are_not_measured_against_a_baseline_that_was_cancelled(
    compare: Compare,
) -> None:
    """The cancelled baseline's cost is that of the answers it got before the cancel: savings
    against it were measured on part of its evidence (and looked like 94%)."""
    baseline = arm("msa-base", 0, passing(10, of=10, cost=0.05), status="cancelled", passed=None)
    cheap = arm("msa-cheap", 1, passing(40, of=40, cost=0.002))
    result = compare([baseline, cheap], items(40))
    chosen = result.arms[1]

    assert result.verdict.outcome == "recommended"
    assert result.verdict.recommended_arm_id == "msa-cheap"
    assert (chosen.cost_delta_usd, chosen.cost_delta_pct) == (None, None)
    assert (result.verdict.savings_usd, result.verdict.savings_pct) == (None, None)
    assert chosen.cost_per_case_usd == pytest.approx(0.002)
    assert (
        "base (the baseline) was cancelled before its runs finished, so what it saves is not "
        "measured" in result.verdict.sentence
    )


def test_an_arm_not_green_on_all_k_runs_is_never_recommended(compare: Compare) -> None:
    baseline = arm("msa-base", 0, passing(40, of=40, cost=0.05))
    cheap_but_not_pass_k = arm("msa-cheap", 1, passing(40, of=40, cost=0.001), passed=False)
    result = compare([baseline, cheap_but_not_pass_k], items(40))

    assert result.verdict.recommended_arm_id == "msa-base"
    assert result.leaderboard == ("msa-base",)


def test_the_cheapest_arm_that_clears_is_recommended_not_the_top_rate(compare: Compare) -> None:
    sonnet = arm("msa-sonnet", 0, passing(40, of=40, cost=0.0125))
    mini = arm("msa-mini", 1, passing(37, of=40, cost=0.002))
    result = compare([sonnet, mini], items(40))
    verdict = result.verdict

    assert result.winner_arm_id == "msa-sonnet"
    assert verdict.outcome == "recommended"
    assert verdict.recommended_arm_id == "msa-mini"
    assert verdict.cost_per_case_usd == pytest.approx(0.002)
    assert verdict.savings_usd == pytest.approx(0.0105)
    assert verdict.savings_pct == pytest.approx(84.0)
    assert "84% less than sonnet (the baseline)" in verdict.sentence


def test_no_savings_is_zero_never_negative_zero(compare: Compare) -> None:
    """The baseline itself recommended: its cost delta is 0, so its savings are 0 — written
    `0.0` in JSON, where negating the delta gave `-0.0`."""
    only = arm("msa-only", 0, passing(40, of=40, cost=0.01))
    other = arm("msa-other", 1, passing(10, of=40, cost=0.001))
    verdict = compare([only, other], items(40)).verdict

    assert verdict.recommended_arm_id == "msa-only"
    assert verdict.savings_usd == 0.0 and math.copysign(1.0, verdict.savings_usd) == 1.0
    assert verdict.savings_pct == 0.0 and math.copysign(1.0, verdict.savings_pct) == 1.0


def test_clearing_on_the_point_estimate_only_is_said_out_loud(compare: Compare) -> None:
    mini = arm("msa-mini", 0, passing(37, of=40))  # 92.5%, Wilson low about 0.80
    result = compare([mini], items(40))
    row, verdict = result.arms[0], result.verdict
    low = wilson(37, 40)[0]

    assert low < 0.9 <= row.rate  # type: ignore[operator]
    assert row.clears_bar == "point"
    assert verdict.clears_on == "point"
    assert verdict.sentence.startswith(
        f"mini clears the 90% bar on the point estimate (92%, n=40) but not on the lower "
        f"bound ({low:.0%}): add golden items to be sure"
    )


def test_clearing_on_the_lower_bound(compare: Compare) -> None:
    big = arm("msa-big", 0, passing(100, of=100))
    result = compare([big], items(100))
    low = wilson(100, 100)[0]

    assert low >= 0.9
    assert result.arms[0].clears_bar == "lower_bound"
    assert result.verdict.clears_on == "lower_bound"
    assert "on the lower bound" in result.verdict.sentence
    assert "not on the lower bound" not in result.verdict.sentence


@pytest.mark.parametrize(("passed", "clears"), [(9, "point"), (8, "no")])
def test_a_rate_at_the_bar_clears_it_and_below_it_does_not(
    compare: Compare, passed: int, clears: str
) -> None:
    row = compare([arm("msa-a", 0, passing(passed, of=10))], items(10)).arms[0]

    assert row.clears_bar == clears


def test_no_arm_clears_names_why_for_each_arm(compare: Compare) -> None:
    result = compare(
        [
            arm("msa-low", 0, passing(20, of=40)),
            arm("msa-flaky", 1, passing(40, of=40), passed=False),
            arm("msa-dead", 2, passing(40, of=40), status="failed", passed=False),
        ],
        items(40),
    )

    assert result.verdict.outcome == "no_arm_clears"
    sentence = result.verdict.sentence
    assert "low is below it (50%, n=40)" in sentence
    assert "flaky is excluded, not green on all 3 of its runs" in sentence
    assert "dead failed" in sentence


def test_the_leaderboard_orders_by_rate_then_cost_then_position(compare: Compare) -> None:
    arms = [
        arm("msa-a", 0, passing(30, of=40, cost=0.01)),
        arm("msa-b", 1, passing(38, of=40, cost=0.03)),
        arm("msa-c", 2, passing(38, of=40, cost=0.02)),
        arm("msa-d", 3, passing(38, of=40, cost=None)),
        arm("msa-e", 4, passing(38, of=40, cost=0.02)),
        arm("msa-f", 5, {"i0": reps(None)}),  # no data: last
    ]
    result = compare(arms, items(40))

    assert result.leaderboard == ("msa-c", "msa-e", "msa-b", "msa-d", "msa-a", "msa-f")
    assert [row.rank for row in result.arms] == [5, 3, 1, 4, 2, 6]


def test_an_arm_the_sample_cannot_separate_from_the_winner_is_annotated(
    compare: Compare,
) -> None:
    arms = [
        arm("msa-top", 0, passing(38, of=40)),
        arm("msa-close", 1, passing(36, of=40)),
        arm("msa-far", 2, passing(10, of=40)),
        arm("msa-out", 3, passing(37, of=40), passed=False),
    ]
    result = compare(arms, items(40))
    top, close, far, out = result.arms
    top_low, top_high = wilson(38, 40)
    close_low, close_high = wilson(36, 40)
    far_low, far_high = wilson(10, 40)

    assert close_high >= top_low and far_high < top_low  # the library's intervals
    assert result.winner_arm_id == "msa-top"
    assert not top.not_distinguishable_from_winner and top.not_distinguishable is None
    assert close.not_distinguishable_from_winner
    assert close.not_distinguishable == "not distinguishable from top at n=40"
    assert not far.not_distinguishable_from_winner
    assert not out.not_distinguishable_from_winner  # excluded arms are not ranked


# --- the paired test ------------------------------------------------------------------------------


def test_exact_mcnemar_is_reported_against_the_baseline_as_a_second_line(
    compare: Compare,
) -> None:
    # baseline passes i0..i29; candidate passes i4..i35: b = 4 (i0-i3), c = 6 (i30-i35)
    baseline = passing(30, of=40)
    candidate = {f"i{i}": reps(*([4 <= i < 36] * 3)) for i in range(40)}
    result = compare([arm("msa-base", 0, baseline), arm("msa-cand", 1, candidate)], items(40))
    test = result.arms[1].mcnemar

    assert result.arms[0].mcnemar is None
    assert test is not None
    assert (test.b, test.c, test.n11, test.n00, test.discordant) == (4, 6, 26, 4, 10)
    assert test.p_value == pytest.approx(binomtest(6, 10, 0.5).pvalue, rel=1e-12)
    assert "not the ranking rule" in test.sentence


def test_mcnemar_with_no_discordant_item_says_so(compare: Compare) -> None:
    result = compare(
        [arm("msa-a", 0, passing(30, of=40)), arm("msa-b", 1, passing(30, of=40))], items(40)
    )
    test = result.arms[1].mcnemar

    assert test is not None
    assert (test.b, test.c, test.discordant, test.p_value) == (0, 0, 0, 1.0)


def test_mcnemar_with_no_item_scored_by_both_is_no_data(compare: Compare) -> None:
    result = compare(
        [arm("msa-a", 0, passing(4, of=4)), arm("msa-b", 1, {"i0": reps(None)})], items(4)
    )

    assert result.arms[1].mcnemar is None


# --- a void sweep ---------------------------------------------------------------------------------


def test_a_void_sweep_names_no_winner_but_keeps_each_arms_own_numbers(compare: Compare) -> None:
    arms = [arm("msa-a", 0, passing(30, of=40, cost=0.02)), arm("msa-b", 1, passing(40, of=40))]
    result = compare(arms, items(40), comparable=False, void_reason="arm 'b' ran judge set [jdg-2]")

    assert result.verdict.outcome == "unavailable"
    assert result.verdict.recommended_arm_id is None
    assert result.leaderboard == () and result.winner_arm_id is None
    assert "void" in result.verdict.sentence
    assert "arm 'b' ran judge set [jdg-2]" in result.verdict.sentence
    first, second = result.arms
    assert (first.rate, first.n, first.cost_per_case_usd) == (0.75, 40, pytest.approx(0.02))
    assert second.rate == 1.0 and second.wilson_low == pytest.approx(wilson(40, 40)[0])
    assert second.rank is None
    assert second.regressions is None and second.new_passes is None
    assert second.cost_delta_usd is None and second.mcnemar is None
    assert not second.not_distinguishable_from_winner
    assert all(agent.verdict.outcome == "unavailable" for agent in result.agents)
    assert all(agent.leaderboard == () for agent in result.agents)


# --- agents ---------------------------------------------------------------------------------------


def test_items_split_by_agent_with_unnamed_and_conflicting_items_unattributed(
    compare: Compare,
) -> None:
    cheap = {
        "r1": reps(True, True, True, agent="refund"),
        "r2": reps(True, True, True, agent=["refund", None, "refund"]),  # None does not vote
        "e1": reps(False, False, False, agent="escalation"),
        "u1": reps(True, True, True, agent=None),
        "c1": reps(True, True, True, agent="refund"),
        "n1": reps(True, True, True, agent="Unattributed"),  # a name like any other
    }
    pricey = {
        "r1": reps(True, True, True, cost=0.05, agent="refund"),
        "r2": reps(True, True, True, cost=0.05, agent=None),
        "e1": reps(True, True, True, cost=0.05, agent="escalation"),
        "u1": reps(True, True, True, cost=0.05, agent=""),
        "c1": reps(True, True, True, cost=0.05, agent="escalation"),  # conflicts with cheap's
        "n1": reps(True, True, True, cost=0.05, agent="Unattributed"),
    }
    result = compare(
        [arm("msa-pricey", 0, pricey), arm("msa-cheap", 1, cheap)],
        ["r1", "r2", "e1", "u1", "c1", "n1", "never"],
        bar=0.5,
    )
    by_label = {agent.label: agent for agent in result.agents}

    assert [(a.agent_name, a.label) for a in result.agents] == [
        ("escalation", "escalation"),
        ("refund", "refund"),
        ("Unattributed", "Unattributed"),
        (None, UNATTRIBUTED),
    ]
    assert result.uncaptured_items == 1
    assert by_label["refund"].items == 2  # r1, r2; c1 is never folded in
    unattributed = result.agents[-1]
    assert (unattributed.items, unattributed.unnamed_items, unattributed.conflicting_items) == (
        2,
        1,
        1,
    )
    refund_cheap = by_label["refund"].arms[1]
    escalation_cheap = by_label["escalation"].arms[1]
    assert (refund_cheap.n, refund_cheap.rate) == (2, 1.0)
    assert (escalation_cheap.n, escalation_cheap.rate) == (1, 0.0)
    assert by_label["refund"].verdict.recommended_arm_id == "msa-cheap"
    assert by_label["escalation"].verdict.recommended_arm_id == "msa-pricey"
    assert by_label["escalation"].verdict.sentence.startswith("escalation: ")
    assert escalation_cheap.regressions == 1
    assert refund_cheap.cases == 6  # its items' sessions, whatever name each one carried


def test_per_agent_arms_keep_the_arms_own_pass_k_and_exclusion(compare: Compare) -> None:
    result = compare(
        [
            arm("msa-a", 0, passing(4, of=4)),
            arm("msa-b", 1, passing(4, of=4), passed=False),
        ],
        items(4),
    )
    (agent,) = result.agents

    assert agent.arms[1].excluded == "not_pass_k" and agent.arms[1].passed is False
    assert agent.leaderboard == ("msa-a",)


def test_a_bar_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(Unprocessable) as caught:
        Bar(90, "query")

    assert caught.value.field == "bar"


def test_rows_with_the_wrong_number_of_columns_are_refused() -> None:
    row: tuple[Any, ...] = ("i0", "ppr-1", True, True, 0.01)
    with pytest.raises(ValueError, match="columns"):
        RepeatColumns.from_rows([row])


def test_a_run_that_answers_an_item_twice_is_refused() -> None:
    twice = RunAnswers(
        item=np.array([0, 0], dtype=np.int32),
        verdict=np.array([PASSED, PASSED], dtype=np.uint8),
        cost=np.array([np.nan, np.nan]),
        agent=np.array([-1, -1], dtype=np.int32),
        names=(),
    )
    with pytest.raises(ValueError, match="more than once"):
        ItemArrays.add_up([twice], 1)


def test_arrays_over_another_number_of_items_are_refused() -> None:
    arrays = ItemArrays.add_up([], 2)
    with pytest.raises(ValueError, match="arrays over 2 items, not 3"):
        compare_sweep(
            [ArmEvidence("msa-x", "x", 0, "completed", True, 3, arrays)],
            ["a", "b", "c"],
            comparable=True,
            void_reason=None,
            bar=Bar(0.9, "query"),
            baseline_arm_id=None,
        )
