"""Cohort averages, a run against its baseline, and N versions of the agent side by side."""

from __future__ import annotations

import random
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neens.domain.comparison import RunColumn, compare_run, compare_versions
from neens.domain.preprod import CohortStats, ItemOutcome, ItemStatus, cohort_stats, items_cohort
from neens.errors import Unprocessable


def item(
    item_id: str,
    *,
    position: int = 0,
    status: ItemStatus = "scored",
    passed: bool | None = True,
    baseline: bool | None = None,
    output: str | None = None,
    cost: float | None = None,
    latency: float | None = None,
    steps: int | None = None,
    session: bool = True,
) -> ItemOutcome:
    return ItemOutcome(
        item_id=item_id,
        position=position,
        input=f"prompt {item_id}",
        expected_output=f"expected {item_id}",
        status=status,
        score=(0.9 if passed else 0.1) if status == "scored" else None,
        passed=passed if status == "scored" else None,
        baseline_passed=baseline,
        error="HTTP 502 from the agent" if status == "error" else None,
        output=output,
        cost_usd=cost,
        latency_ms=latency,
        step_count=steps,
        session_id=f"s-{item_id}" if session else None,
    )


def stats(
    cost: float | None, latency: float | None = None, steps: float | None = None
) -> CohortStats:
    return CohortStats(
        avg_cost_usd=cost,
        priced_sessions=0 if cost is None else 2,
        sessions=2,
        avg_latency_ms=latency,
        avg_step_count=steps,
    )


# --- cohort averages ----------------------------------------------------------------------------


def test_a_cohort_averages_each_value_over_the_sessions_that_know_it() -> None:
    cohort = cohort_stats([0.002, None, 0.004], [100.0, 300.0, None], [None, 3, 6])

    assert cohort.avg_cost_usd == pytest.approx(0.003)
    assert (cohort.priced_sessions, cohort.sessions) == (2, 3)
    assert (cohort.avg_latency_ms, cohort.avg_step_count) == (200.0, 4.5)


def test_an_unpriced_cohort_has_no_average_cost_never_zero() -> None:
    cohort = cohort_stats([None, None], [None, None], [None, None])

    assert cohort.avg_cost_usd is None
    assert cohort.avg_latency_ms is None
    assert cohort.avg_step_count is None
    assert (cohort.priced_sessions, cohort.sessions) == (0, 2)


def test_a_session_that_cost_nothing_is_priced_at_zero() -> None:
    cohort = cohort_stats([0.0, 0.004], [None, None], [None, None])

    assert cohort.avg_cost_usd == 0.002
    assert cohort.priced_sessions == 2


def test_an_empty_cohort_knows_nothing() -> None:
    assert cohort_stats([], [], []) == CohortStats(None, 0, 0, None, None)


def test_a_cohort_needs_one_entry_per_session_in_every_list() -> None:
    with pytest.raises(ValueError, match="one entry per session"):
        cohort_stats([0.1, 0.2], [1.0], [1, 2])


def test_a_run_cohort_is_its_captured_sessions() -> None:
    run = [
        item("a", cost=0.002, latency=100.0, steps=2),
        item("b", cost=None, latency=300.0, steps=4),
        item("c", status="pending", session=False),
    ]

    assert items_cohort(run) == CohortStats(0.002, 1, 2, 200.0, 3.0)


@given(
    st.lists(
        st.tuples(
            st.none() | st.floats(0, 10),
            st.none() | st.floats(0, 1e6),
            st.none() | st.integers(0, 50),
        ),
        max_size=20,
    )
)
def test_a_cohort_average_lies_within_its_known_values(
    sessions: list[tuple[float | None, float | None, int | None]],
) -> None:
    costs = [cost for cost, _, _ in sessions]
    cohort = cohort_stats(costs, [lat for _, lat, _ in sessions], [n for _, _, n in sessions])
    known = [cost for cost in costs if cost is not None]

    assert cohort.sessions == len(sessions)
    assert cohort.priced_sessions == len(known)
    if known:
        assert cohort.avg_cost_usd is not None
        assert min(known) - 1e-9 <= cohort.avg_cost_usd <= max(known) + 1e-9
    else:
        assert cohort.avg_cost_usd is None


# --- one run against its baseline ---------------------------------------------------------------


def test_a_comparison_lists_every_item_in_frozen_order() -> None:
    run = [item("c", position=2), item("a", position=0), item("b", position=1)]

    comparison = compare_run(run, stats(None), None)

    assert [row.item_id for row in comparison.rows] == ["a", "b", "c"]
    assert [row.position for row in comparison.rows] == [0, 1, 2]


def test_a_comparison_marks_regressions_and_new_passes() -> None:
    run = [
        item("kept", position=0, passed=True, baseline=True),
        item("broke", position=1, passed=False, baseline=True),
        item("fixed", position=2, passed=True, baseline=False),
        item("crashed", position=3, status="error", baseline=True),
        item("new", position=4, passed=False, baseline=None),
        item("waiting", position=5, status="captured", baseline=True),
    ]

    comparison = compare_run(run, stats(None), None)

    assert comparison.regressions == ("broke", "crashed")
    assert comparison.new_passes == ("fixed",)
    by_id = {row.item_id: row for row in comparison.rows}
    assert by_id["crashed"].candidate_passed is False
    assert by_id["crashed"].error == "HTTP 502 from the agent"
    assert by_id["waiting"].candidate_passed is None
    assert by_id["waiting"].regression is False
    assert by_id["new"].regression is False


def test_a_comparison_row_carries_the_output_and_the_expected_output() -> None:
    (row,) = compare_run([item("a", output="42")], stats(None), None).rows

    assert (row.input, row.output, row.expected_output) == ("prompt a", "42", "expected a")
    assert row.score == 0.9


def test_a_comparison_subtracts_the_baseline_averages() -> None:
    comparison = compare_run([], stats(0.005, 1200.0, 6.0), stats(0.004, 1000.0, 4.5))

    assert comparison.cost_usd_delta == pytest.approx(0.001)
    assert comparison.latency_ms_delta == pytest.approx(200.0)
    assert comparison.step_count_delta == pytest.approx(1.5)


def test_a_cost_delta_is_none_when_the_baseline_has_no_priced_session() -> None:
    comparison = compare_run([], stats(0.005, 1200.0, 6.0), stats(None, 1000.0, 4.5))

    assert comparison.cost_usd_delta is None
    assert comparison.latency_ms_delta == pytest.approx(200.0)


def test_a_cost_delta_is_none_when_the_candidate_has_no_priced_session() -> None:
    assert compare_run([], stats(None), stats(0.004)).cost_usd_delta is None


def test_a_run_without_a_baseline_cohort_has_no_deltas() -> None:
    comparison = compare_run([], stats(0.005, 1200.0, 6.0), None)

    assert comparison.cost_usd_delta is None
    assert comparison.latency_ms_delta is None
    assert comparison.step_count_delta is None
    assert comparison.baseline is None


def test_a_free_baseline_is_still_a_priced_baseline() -> None:
    assert compare_run([], stats(0.003), stats(0.0)).cost_usd_delta == 0.003


def test_an_item_listed_twice_in_a_run_is_refused() -> None:
    with pytest.raises(ValueError, match="more than once"):
        compare_run([item("a"), item("a", position=1)], stats(None), None)


item_strategy = st.builds(
    item,
    st.uuids().map(str),
    position=st.integers(0, 100),
    status=st.sampled_from(get_args(ItemStatus)),
    passed=st.booleans(),
    baseline=st.none() | st.booleans(),
)


@given(st.lists(item_strategy, max_size=30, unique_by=lambda outcome: outcome.item_id))
def test_no_item_is_both_a_regression_and_a_new_pass(run: list[ItemOutcome]) -> None:
    comparison = compare_run(run, stats(None), None)

    assert not set(comparison.regressions) & set(comparison.new_passes)
    assert len(comparison.rows) == len(run)
    assert [row.position for row in comparison.rows] == sorted(row.position for row in run)
    for row in comparison.rows:
        assert not row.regression or row.baseline_passed is True
        assert not row.new_pass or row.baseline_passed is False


# --- N versions side by side --------------------------------------------------------------------


def column(
    run_id: str, verdicts: dict[str, bool | None], *, cost: float | None = None
) -> RunColumn:
    """A run over prompts p0..pN: True/False is a scored verdict, None an item in status error."""
    outcomes = [
        item(
            item_id,
            position=int(item_id[1:]),
            status="error" if passed is None else "scored",
            passed=passed,
            output=None if passed is None else f"{run_id} says {item_id}",
        )
        for item_id, passed in verdicts.items()
    ]
    random.Random(run_id).shuffle(outcomes)  # the store may return them in any order
    return RunColumn(
        run_id=run_id,
        version_label=f"v-{run_id}",
        model=None if run_id == "ppr_a" else f"model-{run_id}",
        items=outcomes,
        stats=stats(cost, 900.0, 3.0),
    )


RUNS = [
    column("ppr_a", {"p0": True, "p1": True, "p2": False, "p3": True}, cost=0.004),
    column("ppr_b", {"p0": True, "p1": False, "p2": True, "p3": None}, cost=None),
    column("ppr_c", {"p0": False, "p1": True, "p2": False, "p3": True}, cost=0.002),
]


def test_versions_line_up_one_row_per_prompt_in_frozen_order() -> None:
    compared = compare_versions(RUNS, "ppr_a")

    assert [row.item_id for row in compared.rows] == ["p0", "p1", "p2", "p3"]
    assert [cell.run_id for cell in compared.rows[0].cells] == ["ppr_a", "ppr_b", "ppr_c"]
    assert compared.rows[1].input == "prompt p1"
    assert compared.rows[1].expected_output == "expected p1"


def test_each_version_is_measured_against_the_chosen_baseline() -> None:
    compared = compare_versions(RUNS, "ppr_a")

    regressed = {
        (cell.run_id, row.item_id)
        for row in compared.rows
        for cell in row.cells
        if cell.regressed_vs_baseline
    }
    fixed = {
        (cell.run_id, row.item_id)
        for row in compared.rows
        for cell in row.cells
        if cell.new_pass_vs_baseline
    }
    assert regressed == {("ppr_b", "p1"), ("ppr_b", "p3"), ("ppr_c", "p0")}
    assert fixed == {("ppr_b", "p2")}


def test_the_version_summaries_are_computed_by_hand() -> None:
    a, b, c = compare_versions(RUNS, "ppr_a").runs

    assert (a.is_baseline, a.pass_rate, a.avg_cost_usd, a.model) == (True, 0.75, 0.004, None)
    assert (a.regressions_vs_baseline, a.new_passes_vs_baseline) == (None, None)
    assert (b.pass_rate, b.avg_cost_usd, b.priced_sessions, b.sessions) == (0.5, None, 0, 2)
    assert (b.regressions_vs_baseline, b.new_passes_vs_baseline) == (2, 1)
    assert (c.pass_rate, c.regressions_vs_baseline, c.new_passes_vs_baseline) == (0.5, 1, 0)
    assert (c.version_label, c.model, c.avg_latency_ms, c.avg_step_count) == (
        "v-ppr_c",
        "model-ppr_c",
        900.0,
        3.0,
    )


def test_a_version_with_nothing_captured_for_a_prompt_keeps_its_output_empty() -> None:
    compared = compare_versions(RUNS, "ppr_a")

    crashed = compared.rows[3].cells[1]
    assert (crashed.status, crashed.passed, crashed.output) == ("error", False, None)
    assert compared.rows[3].cells[0].output == "ppr_a says p3"


def test_the_baseline_never_regresses_against_itself() -> None:
    compared = compare_versions(RUNS, "ppr_b")

    baseline_cells = [row.cells[1] for row in compared.rows]
    assert not any(cell.regressed_vs_baseline for cell in baseline_cells)
    assert not any(cell.new_pass_vs_baseline for cell in baseline_cells)
    assert compared.baseline_run_id == "ppr_b"
    assert [run.is_baseline for run in compared.runs] == [False, True, False]


def test_a_prompt_the_baseline_errored_on_cannot_regress() -> None:
    compared = compare_versions(RUNS, "ppr_b")

    p3 = compared.rows[3]
    assert not any(cell.regressed_vs_baseline for cell in p3.cells)
    assert [cell.new_pass_vs_baseline for cell in p3.cells] == [True, False, True]


def test_versions_with_different_prompts_are_refused() -> None:
    other = column("ppr_d", {"p0": True, "p1": True, "p9": True, "p3": True})

    with pytest.raises(Unprocessable, match="ppr_d") as refused:
        compare_versions([*RUNS, other], "ppr_a")

    assert refused.value.field == "runs"


def test_a_version_missing_a_prompt_is_refused() -> None:
    short = column("ppr_d", {"p0": True, "p1": True, "p2": True})

    with pytest.raises(Unprocessable) as refused:
        compare_versions([*RUNS, short], "ppr_a")

    assert refused.value.field == "runs"


def test_a_baseline_that_is_not_among_the_runs_is_refused() -> None:
    with pytest.raises(Unprocessable) as refused:
        compare_versions(RUNS, "ppr_z")

    assert refused.value.field == "baseline"


def test_a_run_listed_twice_is_refused() -> None:
    with pytest.raises(Unprocessable, match="ppr_a") as refused:
        compare_versions([*RUNS, RUNS[0]], "ppr_a")

    assert refused.value.field == "runs"


def test_a_comparison_of_no_runs_is_refused() -> None:
    with pytest.raises(Unprocessable) as refused:
        compare_versions([], "ppr_a")

    assert refused.value.field == "runs"


@given(
    st.lists(st.lists(st.none() | st.booleans(), min_size=4, max_size=4), min_size=1, max_size=4),
    st.data(),
)
def test_a_cell_never_both_regresses_and_newly_passes(
    grid: list[list[bool | None]], data: st.DataObject
) -> None:
    runs = [
        column(f"ppr_{n}", {f"p{i}": passed for i, passed in enumerate(verdicts)})
        for n, verdicts in enumerate(grid)
    ]
    baseline = data.draw(st.sampled_from([run.run_id for run in runs]))

    compared = compare_versions(runs, baseline)

    assert len(compared.rows) == 4
    for summary in compared.runs:
        assert summary.pass_rate is None or 0 <= summary.pass_rate <= 1
    for row in compared.rows:
        for cell in row.cells:
            assert not (cell.regressed_vs_baseline and cell.new_pass_vs_baseline)
