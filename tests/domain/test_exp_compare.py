"""`exp compare`'s rules, each as a sentence: the interval and the exact sign test decide
together (a "borderline" flag when they disagree), McNemar is reported beside them, and what
holds the gate. Every p-value is checked against SciPy's binomtest or statsmodels' mcnemar."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar

from neens.domain.exp_compare import Side, TrialOutcome, compare
from neens.domain.paired import prob_b_beats_a

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def side(
    results: dict[str, list[bool | None | str]],
    *,
    id: str = "exp_A",
    trials: int = 1,
    graders: dict[str, str] | None = None,
    start: int = 0,
    end: int = 100,
    finished: bool = True,
    failing_of: str | None = None,
) -> Side:
    """A run from {case: [outcome per trial]}; an outcome "infra"/"agent" is an error."""
    outcomes = [
        TrialOutcome(case, None, value) if isinstance(value, str) else TrialOutcome(case, value)
        for case, values in results.items()
        for value in values
    ]
    return Side(
        id=id,
        name=id.removeprefix("exp_").lower(),
        trials=trials,
        outcomes=outcomes,
        graders=graders if graders is not None else {"exact-1": "v1"},
        started_at=T0 + timedelta(seconds=start),
        ended_at=T0 + timedelta(seconds=end),
        planned=len(outcomes),
        finished=finished,
        failing_of=failing_of,
    )


def cells(n11: int, n10: int, n01: int, n00: int) -> tuple[Side, Side]:
    a: dict[str, list[bool | None | str]] = {}
    b: dict[str, list[bool | None | str]] = {}
    index = 0
    for count, (x, y) in (
        (n11, (True, True)),
        (n10, (True, False)),
        (n01, (False, True)),
        (n00, (False, False)),
    ):
        for _ in range(count):
            a[f"c{index:03d}"] = [x]
            b[f"c{index:03d}"] = [y]
            index += 1
    return side(a), side(b, id="exp_B")


def test_the_specs_example_is_inconclusive_with_one_regression() -> None:
    a = side({"c_756966685591eb9b": [True], "c_2": [True]})
    b = side({"c_756966685591eb9b": [False], "c_2": [True]}, id="exp_B")
    result = compare(a, b)
    assert result.diff == -0.5
    assert result.interval == (-1.0, 0.0)
    assert result.mcnemar_p == 1.0
    assert (result.n10, result.n01) == (1, 0)
    assert (result.verdict, result.verdict_reason) == ("inconclusive", "CI includes 0")
    assert [r.case_id for r in result.regressed] == ["c_756966685591eb9b"]
    assert not result.ship


def test_a_clear_gain_is_better_and_ships() -> None:
    a, b = cells(30, 1, 25, 44)
    result = compare(a, b)
    assert result.interval is not None and result.interval.low > 0
    assert result.verdict == "better" and result.ship and result.holds == []
    assert result.mcnemar_p == pytest.approx(
        mcnemar([[30, 1], [25, 44]], exact=True).pvalue, rel=1e-12
    )


def test_a_clear_loss_is_worse() -> None:
    a, b = cells(30, 25, 1, 44)
    result = compare(a, b)
    assert result.verdict == "worse"
    assert result.verdict_reason == "CI below 0, exact sign test p<0.001"
    assert result.test is not None
    assert result.test.p == pytest.approx(binomtest(1, 26, 0.5).pvalue, rel=1e-12)
    assert not result.ship and not result.borderline


def test_two_cases_that_both_flipped_are_borderline_not_better_and_hold_the_gate() -> None:
    """The percentile interval collapses to [+100pp, +100pp]; exact McNemar gives p = 0.5."""
    a, b = cells(0, 0, 2, 0)
    result = compare(a, b)
    assert result.interval == (1.0, 1.0) and result.interval_verdict == "better"
    expected = binomtest(2, 2, 0.5).pvalue
    assert result.test is not None and result.test.p == pytest.approx(expected, rel=1e-12)
    assert result.mcnemar_p == pytest.approx(
        mcnemar([[0, 0], [2, 0]], exact=True).pvalue, rel=1e-12
    )
    assert result.test.same_as_mcnemar and (result.test.up, result.test.down) == (2, 0)
    assert result.verdict == "inconclusive" and result.borderline
    assert result.verdict_reason == "CI above 0 but exact sign test p=0.500 on 2 changed cases"
    assert result.disagreement == (
        "the interval excludes 0 but the exact sign test does not reject at 5% "
        "(p=0.500 on 2 changed cases)"
    )
    assert not result.ship
    assert result.holds == [
        "B is not shown better (CI above 0 but exact sign test p=0.500 on 2 changed cases)"
    ]
    one = compare(*cells(0, 0, 1, 0))
    assert one.verdict == "inconclusive" and not one.ship
    assert one.test is not None and one.test.p == pytest.approx(binomtest(1, 1).pvalue)
    assert one.verdict_reason.endswith("on 1 changed case")
    # The same the other way: two cases that both broke are not shown worse.
    lost = compare(*cells(0, 2, 0, 0))
    assert lost.interval_verdict == "worse" and lost.verdict == "inconclusive"
    assert lost.verdict_reason.startswith("CI below 0 but exact sign test p=0.500")


def test_the_stats_methods_vector_b2_c9_n50_is_borderline_and_holds() -> None:
    """stats-methods §3 (`pboot_n10_2_n01_9_n50`): ideal percentile interval [0.02, 0.26],
    exact McNemar p = 0.065. The interval alone would say better; the test does not agree."""
    a, b = cells(20, 2, 9, 19)
    for seed in (None, 5):
        result = compare(a, b, seed=seed)
        assert result.interval is not None and result.interval.low > 0
        assert result.interval_verdict == "better"
        reference = mcnemar([[20, 2], [9, 19]], exact=True).pvalue
        assert result.mcnemar_p == pytest.approx(reference, rel=1e-12)
        assert result.test is not None
        assert result.test.p == pytest.approx(binomtest(9, 11, 0.5).pvalue, rel=1e-12)
        assert result.test.p == pytest.approx(reference, rel=1e-12)
        assert (result.test.up, result.test.down, result.test.unchanged) == (9, 2, 39)
        assert result.verdict == "inconclusive" and result.borderline
        assert "exact sign test p=0.065 on 11 changed cases" in result.verdict_reason
        assert result.disagreement is not None and "(p=0.065 on 11 changed cases)" in (
            result.disagreement
        )
        assert not result.ship
        assert any("exact sign test p=0.065" in hold for hold in result.holds)


def test_a_clear_win_of_twelve_flips_is_better_and_ships() -> None:
    result = compare(*cells(0, 0, 12, 0))
    assert result.interval == (1.0, 1.0)
    assert result.test is not None
    assert result.test.p == pytest.approx(binomtest(12, 12, 0.5).pvalue, rel=1e-12)
    assert result.verdict == "better" and result.ship and not result.borderline
    assert result.verdict_reason == "CI above 0, exact sign test p<0.001"
    # Six flips all one way is the fewest an exact test at 5% can call: p = 2 / 64.
    six = compare(*cells(3, 0, 6, 3))
    assert six.test is not None and six.test.p == pytest.approx(binomtest(6, 6).pvalue)
    assert six.verdict == "better" and six.ship
    assert six.verdict_reason == "CI above 0, exact sign test p=0.031"
    five = compare(*cells(3, 0, 5, 3))
    assert five.verdict == "inconclusive" and five.borderline and not five.ship


def test_with_several_trials_the_test_is_on_the_per_case_difference_not_on_all_passed() -> None:
    """A case that went 0/3 → 2/3 fails "every trial passed" on both sides: McNemar sees no
    change at all, the interval and the sign test see B − A = +2/3."""
    a = side({f"c{i}": [False, False, False] for i in range(8)}, trials=3)
    b = side({f"c{i}": [False, True, True] for i in range(8)}, id="exp_B", trials=3)
    result = compare(a, b)
    assert (result.n11, result.n10, result.n01, result.n00) == (0, 0, 0, 8)
    assert result.mcnemar_p == 1.0
    assert result.test is not None and not result.test.same_as_mcnemar
    assert (result.test.up, result.test.down, result.test.unchanged) == (8, 0, 0)
    assert result.test.p == pytest.approx(binomtest(8, 8, 0.5).pvalue, rel=1e-12)
    assert result.verdict == "better" and result.ship

    few = compare(
        side({f"c{i}": [False, False] for i in range(5)}, trials=2),
        side({f"c{i}": [True, False] for i in range(5)}, id="exp_B", trials=2),
    )
    assert few.interval == (0.5, 0.5)
    assert few.test is not None and few.test.p == pytest.approx(binomtest(5, 5).pvalue)
    assert few.verdict == "inconclusive" and few.borderline and not few.ship


def test_when_the_interval_and_the_test_point_different_ways_it_is_inconclusive() -> None:
    """Three trials: 200 cases lose a little (3/3 → 2/3), 100 gain a lot (0/3 → 3/3). B − A is
    +1/9 and its interval clears 0, while twice as many cases went down as up."""
    a_results: dict[str, list[bool | None | str]] = {}
    b_results: dict[str, list[bool | None | str]] = {}
    for i in range(200):
        a_results[f"d{i:03d}"], b_results[f"d{i:03d}"] = [True] * 3, [True, True, False]
    for i in range(100):
        a_results[f"u{i:03d}"], b_results[f"u{i:03d}"] = [False] * 3, [True] * 3
    result = compare(side(a_results, trials=3), side(b_results, id="exp_B", trials=3))
    assert result.diff == pytest.approx(1 / 9)
    assert result.interval is not None and result.interval.low > 0
    assert result.test is not None and (result.test.up, result.test.down) == (100, 200)
    assert result.test.p == pytest.approx(binomtest(100, 300, 0.5).pvalue, rel=1e-9)
    assert result.test.p < 0.05
    assert result.verdict == "inconclusive" and result.borderline and not result.ship
    assert "points the other way" in result.verdict_reason


def test_a_test_that_rejects_while_the_interval_includes_0_is_borderline_and_inconclusive() -> None:
    """Eight cases gain a third (2/3 → 3/3), one loses everything (3/3 → 0/3): 8 of 9 up is
    p = 0.039, while resampling the one big loss keeps the interval across 0."""
    a_results: dict[str, list[bool | None | str]] = {f"u{i}": [True, True, False] for i in range(8)}
    b_results: dict[str, list[bool | None | str]] = {f"u{i}": [True] * 3 for i in range(8)}
    a_results["down"], b_results["down"] = [True] * 3, [False] * 3
    result = compare(side(a_results, trials=3), side(b_results, id="exp_B", trials=3))
    assert result.test is not None
    assert result.test.p == pytest.approx(binomtest(8, 9, 0.5).pvalue, rel=1e-12)
    assert result.test.p < 0.05
    assert result.interval is not None and result.interval.low < 0 < result.interval.high
    assert (result.verdict, result.verdict_reason) == ("inconclusive", "CI includes 0")
    assert result.borderline and result.disagreement is not None
    assert result.disagreement.startswith("the exact sign test rejects at 5% (p=0.039")
    assert result.holds == ["B is not shown better (CI includes 0)"]


def test_identical_runs_agree_on_every_case() -> None:
    a, b = cells(10, 0, 0, 5)
    result = compare(a, b)
    assert (result.verdict, result.verdict_reason) == (
        "inconclusive",
        "A and B agree on every case",
    )
    assert result.power is None and result.disagreement is None and not result.borderline
    assert result.test is not None and result.test.p == 1.0 and result.test.changed == 0


def test_below_100_pairs_p_b_beats_a_is_reported_and_above_it_is_not() -> None:
    small = compare(*cells(40, 2, 8, 10))
    assert small.prob_b_beats_a == pytest.approx(prob_b_beats_a(2, 8))
    assert compare(*cells(80, 2, 8, 10)).prob_b_beats_a is None


def test_power_uses_the_observed_flips() -> None:
    small = compare(*cells(1, 1, 0, 0))
    assert small.power is not None and small.power.ceiling == 0.0 and small.power.mde is None
    large = compare(*cells(300, 20, 30, 50))
    assert large.power is not None and large.power.discordance == pytest.approx(0.125)
    assert large.power.mde is not None and 0 < large.power.mde < 0.125


def test_b_run_on_as_failing_cases_is_inconclusive_and_holds_the_gate() -> None:
    a = side({f"c{i}": [False] for i in range(30)})
    b = side({f"c{i}": [True] for i in range(30)}, id="exp_B", failing_of="exp_A")
    result = compare(a, b)
    assert result.interval_verdict == "better"
    assert result.verdict == "inconclusive"
    assert result.regression_to_the_mean and not result.ship
    assert any("regression to the mean" in hold for hold in result.holds)


def test_running_one_after_the_other_warns_but_does_not_hold() -> None:
    a, b = cells(30, 0, 25, 45)
    later = side({c.case_id: [c.passed] for c in b.outcomes}, id="exp_B", start=200, end=300)
    result = compare(a, later)
    assert result.ran_one_after_the_other and result.ship
    assert any("one after the other" in w for w in result.warnings)
    overlapping = side({c.case_id: [c.passed] for c in b.outcomes}, id="exp_B", start=50)
    assert not compare(a, overlapping).ran_one_after_the_other


def test_a_grader_that_changed_or_graded_one_side_warns_and_holds() -> None:
    a, b = cells(30, 0, 25, 45)
    changed = side(
        {c.case_id: [c.passed] for c in b.outcomes},
        id="exp_B",
        graders={"exact-1": "v2", "caps": "v1"},
    )
    result = compare(a, changed)
    assert result.grader_changes == [
        "grader caps graded B only",
        "grader exact-1 changed version between A and B (v1 → v2)",
    ]
    assert not result.ship and "the graders differ between A and B" in result.holds


def test_errors_are_left_out_and_an_uneven_split_warns() -> None:
    a = side({"x": [True], "y": [True], "z": ["agent"]})
    b = side({"x": [True], "y": ["infra"], "z": [False]}, id="exp_B")
    result = compare(a, b)
    assert [c.case_id for c in result.cases] == ["x"]
    assert (result.only_a, result.only_b) == (1, 1)
    assert (result.a.agent_errors, result.b.infra_errors) == (1, 1)
    assert result.uneven_errors
    assert any(w.startswith("errors are uneven") for w in result.warnings)
    even = compare(side({"x": [True], "z": ["agent"]}), side({"x": [True], "z": ["agent"]}))
    assert not even.uneven_errors


def test_a_partial_run_holds_the_gate() -> None:
    a, b = cells(30, 0, 25, 45)
    partial = side({c.case_id: [c.passed] for c in b.outcomes}, id="exp_B", finished=False)
    result = compare(a, partial)
    assert not result.ship and result.holds == ["B is partial (100/100 case runs)"]


def test_the_margin_is_a_non_inferiority_bar() -> None:
    a, b = cells(80, 3, 2, 15)  # about even
    assert not compare(a, b).ship
    within = compare(a, b, margin=0.10)
    assert within.interval is not None and within.interval.low > -0.10 and within.ship
    beyond = compare(a, b, margin=0.01)
    assert not beyond.ship and beyond.margin_held_by == ["score", "bootstrap"]
    assert beyond.holds[0].startswith("the score interval for B − A (Tango) reaches")
    assert beyond.holds[1].startswith("the interval's lower end")


def test_two_agreeing_cases_do_not_show_non_inferiority() -> None:
    """The percentile bootstrap of 2 cases that both pass in A and B is [0, 0], above any
    margin; the score interval is not fooled: about [−66pp, +66pp] at 2 cases."""
    a, b = cells(2, 0, 0, 0)
    result = compare(a, b, margin=0.03)
    assert result.interval is not None and result.interval.low > -0.03  # the bootstrap alone
    assert not result.ship and result.margin_held_by == ["score"]
    assert result.score is not None and result.score.interval.low < -0.6
    assert result.holds == [
        "the score interval for B − A (Tango) reaches -65.8pp at 2 paired cases, not above "
        "-3.0pp: too few to show B is at most 3.0pp worse (non-inferiority margin)"
    ]


def test_a_large_clean_run_is_non_inferior() -> None:
    a, b = cells(300, 4, 4, 92)
    result = compare(a, b, margin=0.03)
    assert result.ship and result.holds == [] and result.margin_held_by == []
    assert result.score is not None and result.interval is not None
    assert -0.03 < result.score.interval.low < result.interval.low < 0


def test_with_several_trials_the_score_counts_are_the_parts_of_d() -> None:
    """A case 1/3 → 2/3 adds 1/3 up; 3/3 → 2/3 adds 1/3 down; 2/3 → 0/3 adds 2/3 down."""
    a = side(
        {"p": [False, True, False], "q": [True, True, True], "r": [True, True, False]}, trials=3
    )
    b = side(
        {"p": [True, True, False], "q": [True, True, False], "r": [False, False, False]},
        id="exp_B",
        trials=3,
    )
    result = compare(a, b, margin=0.1)
    assert result.score is not None
    assert result.score.up == pytest.approx(1 / 3) and result.score.down == pytest.approx(1.0)
    assert result.score.n == 3 and not result.ship and "score" in (result.margin_held_by or [])


def test_the_sign_test_does_not_take_part_in_the_margin_gate() -> None:
    """Non-inferiority asks whether B is at most M worse, not whether it is better: a result
    the sign test does not confirm as better is still non-inferior when the interval's lower
    end clears −M, and a significant loss smaller than M does not hold it either."""
    a, b = cells(20, 2, 9, 19)  # borderline better: interval above 0, p = 0.065
    plain, margin = compare(a, b), compare(a, b, margin=0.05)
    assert plain.verdict == "inconclusive" and not plain.ship
    assert margin.verdict == "inconclusive" and margin.ship and margin.holds == []
    loss = compare(*cells(900, 60, 30, 10), margin=0.10)  # B − A = −3pp, p < 0.01
    assert loss.test is not None
    assert loss.test.p == pytest.approx(binomtest(30, 90, 0.5).pvalue, rel=1e-9)
    assert loss.test.p < 0.01 and loss.interval is not None and loss.interval.low > -0.10
    assert loss.ship


def test_several_trials_give_the_matrix_and_gained_and_lost_cases() -> None:
    a = side(
        {"p": [True, True], "q": [False, False], "r": [True, False], "s": [True, True]}, trials=2
    )
    b = side(
        {"p": [True, True], "q": [True, False], "r": [False, False], "s": [True, None]},
        id="exp_B",
        trials=2,
    )
    result = compare(a, b, with_matrix=True)
    assert result.gained == ["q"] and result.lost == ["r"]
    assert result.matrix is not None
    assert result.matrix.counts == [[0, 1, 0], [1, 0, 0], [0, 0, 1]]
    assert result.matrix.left_out == 1  # s has only one graded trial in B
    assert [c.delta for c in result.cases] == [0.0, 0.5, -0.5, 0.0]
    # McNemar on "passed every graded trial": p and s pass on both, q and r fail on both.
    assert (result.n11, result.n10, result.n01, result.n00) == (2, 0, 0, 2)
    # The sign test on d: q went up, r went down.
    assert result.test is not None and not result.test.same_as_mcnemar
    assert (result.test.up, result.test.down, result.test.unchanged) == (1, 1, 2)
    assert result.test.p == pytest.approx(binomtest(1, 2, 0.5).pvalue)


def test_the_interval_is_the_same_for_the_same_outcomes_whatever_the_runs_ids() -> None:
    a, b = cells(30, 6, 12, 52)
    renamed_a = side({c.case_id: [c.passed] for c in a.outcomes}, id="exp_OTHER_A")
    renamed_b = side({c.case_id: [c.passed] for c in b.outcomes}, id="exp_OTHER_B")
    assert compare(a, b).interval == compare(renamed_a, renamed_b).interval
    assert compare(a, b).seed == compare(renamed_a, renamed_b).seed
    assert compare(a, b, seed=1).seed == 1


def test_no_paired_case_is_no_data() -> None:
    result = compare(side({"x": ["infra"]}), side({"x": [True]}, id="exp_B"))
    assert result.interval is None and result.diff is None and result.mcnemar_p is None
    assert result.verdict_reason == "no paired cases" and "no paired cases" in result.holds


def test_clustering_widens_the_interval_when_related_cases_move_together() -> None:
    """Whole groups flip together: resampling single cases overstates the evidence."""
    a_results: dict[str, list[bool | None | str]] = {}
    b_results: dict[str, list[bool | None | str]] = {}
    groups: dict[str, str] = {}
    for g in range(12):
        flips = g < 4  # 4 of 12 repos improved, all their 8 cases at once
        for i in range(8):
            case = f"r{g}-{i}"
            a_results[case] = [False]
            b_results[case] = [flips]
            groups[case] = f"repo{g}"
    a, b = side(a_results), side(b_results, id="exp_B")
    plain = compare(a, b)
    clustered = compare(a, b, cluster_field="repo", groups=groups)
    assert plain.interval is not None and clustered.interval is not None
    assert plain.interval.low > 0.2
    assert clustered.interval.low < plain.interval.low
    assert clustered.cluster is not None and clustered.cluster.groups == 12
    assert not any("groups of repo" in w for w in clustered.warnings)
    few = compare(
        a, b, cluster_field="repo", groups={c: "one" if c < "r2" else "two" for c in groups}
    )
    assert few.cluster is not None and few.cluster.groups == 2
    assert any(w.startswith("only 2 groups of repo") for w in few.warnings)


def test_fewer_cases_than_the_sign_test_can_ever_reject_on_are_named() -> None:
    """5 of 5 cases fixed is p = 0.0625 (SciPy): no outcome of 5 cases is shown better or
    worse, and the comparison says so; at 6 the same clean win is better and nothing is said."""
    assert binomtest(5, 5).pvalue >= 0.05 > binomtest(6, 6).pvalue
    five = compare(*cells(0, 0, 5, 0))
    assert five.verdict == "inconclusive"
    assert five.warnings == [
        "only 5 paired cases: the exact sign test cannot reject at 5% with fewer than 6 changed "
        "cases, so B can be shown neither better nor worse, however the cases turn out; compare "
        "at least 6"
    ]
    one = compare(*cells(1, 0, 0, 0))
    assert one.warnings[0].startswith("only 1 paired case: ")
    six = compare(*cells(0, 0, 6, 0))
    assert six.verdict == "better" and six.warnings == []
    # Six cases that could have moved but did not (the data, not the design) say nothing.
    still = compare(*cells(3, 0, 0, 3))
    assert still.warnings == []


def test_with_clusters_the_test_counts_groups_not_cases() -> None:
    """Two repositories of ten cases each, every case fixed: the cluster interval is
    [+100pp, +100pp] and 20 cases of 20 went up, but that is 2 independent groups of 2."""
    a_results: dict[str, list[bool | None | str]] = {}
    b_results: dict[str, list[bool | None | str]] = {}
    groups: dict[str, str] = {}
    for g in range(2):
        for i in range(10):
            a_results[f"r{g}-{i}"], b_results[f"r{g}-{i}"] = [False], [True]
            groups[f"r{g}-{i}"] = f"repo{g}"
    a, b = side(a_results), side(b_results, id="exp_B")
    per_case = compare(a, b)
    assert per_case.test is not None and per_case.test.units == "cases"
    assert per_case.test.p == pytest.approx(binomtest(20, 20).pvalue) and per_case.ship
    clustered = compare(a, b, cluster_field="repo", groups=groups)
    assert clustered.interval == (1.0, 1.0)
    assert clustered.test is not None and clustered.test.units == "groups"
    assert (clustered.test.up, clustered.test.down) == (2, 0)
    assert not clustered.test.same_as_mcnemar
    assert clustered.test.p == pytest.approx(binomtest(2, 2, 0.5).pvalue, rel=1e-12)
    assert clustered.verdict == "inconclusive" and clustered.borderline
    assert clustered.verdict_reason == "CI above 0 but exact sign test p=0.500 on 2 changed groups"
    assert not clustered.ship
    assert any(w.startswith("only 2 paired groups: ") for w in clustered.warnings)


def test_case_kinds_show_pass_rates_unfixed_bad_cases_and_broken_guards() -> None:
    a = side({"b1": [False], "b2": [False], "g1": [True], "g2": [True], "k1": [True], "x": [True]})
    b = side(
        {"b1": [True], "b2": [False], "g1": [True], "g2": [False], "k1": [True], "x": [False]},
        id="exp_B",
    )
    kinds = {"b1": "bad", "b2": "bad", "g1": "guard", "g2": "guard", "k1": "control"}
    result = compare(a, b, kinds=kinds)
    assert result.kinds is not None
    assert [(k.kind, k.cases, k.a_rate, k.b_rate) for k in result.kinds.rows] == [
        ("bad", 2, 0.0, 0.5),
        ("control", 1, 1.0, 1.0),
        ("guard", 2, 1.0, 0.5),
    ]
    assert result.kinds.not_fixed == ["b2"]
    assert result.kinds.broken_guards == ["g2"]
    assert result.kinds.broken_controls == []
    assert compare(a, b).kinds is None


def test_judge_corrections_pair_labels_and_verdicts_by_case() -> None:
    from neens.domain.exp_compare import judge_corrections
    from neens.domain.paired import ppi_mean

    cases = [f"c{i}" for i in range(10)]
    judge_a = {c: float(i % 2) for i, c in enumerate(cases)}
    judge_b = dict.fromkeys(cases, 1.0)
    labels_a = {"c0": 0.0, "c1": 1.0, "c2": 1.0, "c3": 1.0}
    labels_b = {"c0": 1.0, "c1": 1.0, "c2": 0.0, "c3": 1.0, "c9": 1.0}
    [correction] = judge_corrections({"judge": judge_a}, {"judge": judge_b}, labels_a, labels_b)
    assert (correction.grader, correction.labeled, correction.unlabeled) == ("judge", 4, 6)
    assert correction.judge_diff == 0.5
    assert correction.corrected == ppi_mean(
        [1.0, 0.0, -1.0, 0.0], [1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    )
    [few] = judge_corrections({"judge": judge_a}, {"judge": judge_b}, {"c0": 1.0}, {"c0": 1.0})
    assert (
        few.corrected is None
        and few.problem is not None
        and few.problem.startswith("1 case labeled")
    )


def test_a_pairwise_judge_counts_a_preference_only_when_both_orders_agree() -> None:
    from scipy.stats import binomtest

    from neens.domain.exp_compare import PairwiseVerdict, pairwise_summary
    from neens.domain.stats import wilson_interval

    verdicts = (
        [PairwiseVerdict(f"b{i}", 0, "second", "first") for i in range(7)]
        + [PairwiseVerdict("a1", 0, "first", "second")]
        + [PairwiseVerdict("t1", 0, "tie", "tie")]
        + [PairwiseVerdict("p1", 0, "first", "first"), PairwiseVerdict("p2", 0, "tie", "first")]
        + [PairwiseVerdict("n1", 0, None, "first")]
    )
    summary = pairwise_summary("pref", verdicts)
    assert (summary.b_wins, summary.a_wins, summary.ties) == (7, 1, 1)
    assert (summary.order_dependent, summary.unjudged) == (2, 1)
    assert summary.p_value == pytest.approx(binomtest(7, 8, 0.5).pvalue, rel=1e-12)
    assert summary.b_share == 7 / 8 and summary.b_share_interval == wilson_interval(7, 8)
    empty = pairwise_summary("pref", [PairwiseVerdict("t", 0, "tie", "tie")])
    assert empty.p_value is None and empty.b_share is None and empty.b_share_interval is None
