"""A pre-prod run's gate: the policy, the run summary, the verdict and the per-metric rollup."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neens.domain.gate import (
    CostPolicy,
    GatePolicy,
    JudgeScore,
    evaluate_gate,
    metrics_rollup,
    parse_gate_policy,
    run_summary,
)
from neens.domain.preprod import CohortStats, ItemOutcome, ItemStatus, RunStatus
from neens.errors import Unprocessable


def item(
    item_id: str = "i1",
    *,
    status: ItemStatus = "scored",
    passed: bool | None = True,
    baseline: bool | None = None,
    score: float | None = None,
    position: int = 0,
) -> ItemOutcome:
    if score is None and status == "scored":
        score = 0.9 if passed else 0.2
    return ItemOutcome(
        item_id=item_id,
        position=position,
        input=f"prompt {item_id}",
        expected_output=None,
        status=status,
        score=score,
        passed=passed if status == "scored" else None,
        baseline_passed=baseline,
        error="agent timed out" if status == "error" else None,
        output="answer" if status == "scored" else None,
        cost_usd=None,
        latency_ms=None,
        step_count=None,
        session_id=f"s-{item_id}" if status in ("captured", "scored") else None,
    )


def items(*verdicts: bool, baseline: bool | None = None) -> list[ItemOutcome]:
    """Scored items with the given verdicts."""
    return [
        item(f"i{n}", passed=passed, baseline=baseline, position=n)
        for n, passed in enumerate(verdicts)
    ]


def cohort(avg: float | None, *, priced: int | None = None, sessions: int = 4) -> CohortStats:
    if priced is None:
        priced = 0 if avg is None else sessions
    return CohortStats(
        avg_cost_usd=avg,
        priced_sessions=priced,
        sessions=sessions,
        avg_latency_ms=None,
        avg_step_count=None,
    )


UNPRICED = cohort(None)
STRICT = GatePolicy(max_regressions=0, min_pass_rate=0.0)
NOT_EVALUATED: list[tuple[RunStatus, str]] = [
    ("awaiting_traces", "run is still awaiting traces"),
    ("running", "run is still running"),
    ("failed", "run failed"),
    ("cancelled", "run was cancelled"),
]


# --- parsing the policy -------------------------------------------------------------------------


def test_a_gate_policy_echoes_exactly_the_declared_keys_in_a_fixed_order() -> None:
    policy = parse_gate_policy(
        {"cost": {"max_delta_pct": -50, "max_avg_usd": 0.004}, "min_pass_rate": 0.9}
    )

    assert policy == GatePolicy(
        min_pass_rate=0.9, cost=CostPolicy(max_avg_usd=0.004, max_delta_pct=-50)
    )
    echoed = policy.to_dict()
    assert echoed == {"min_pass_rate": 0.9, "cost": {"max_avg_usd": 0.004, "max_delta_pct": -50}}
    assert list(echoed) == ["min_pass_rate", "cost"]
    assert list(echoed["cost"]) == ["max_avg_usd", "max_delta_pct"]  # type: ignore[call-overload]


def test_the_same_policy_echoes_the_same_whatever_order_its_keys_came_in() -> None:
    one = parse_gate_policy({"max_regressions": 0, "min_pass_rate": 0.9})
    other = parse_gate_policy({"min_pass_rate": 0.9, "max_regressions": 0})

    assert list(one.to_dict().items()) == list(other.to_dict().items())


def test_an_empty_gate_is_a_policy_with_no_thresholds() -> None:
    assert parse_gate_policy({}) == GatePolicy()
    assert GatePolicy().to_dict() == {}


def test_a_whole_number_pass_rate_is_read_as_a_float() -> None:
    policy = parse_gate_policy({"min_pass_rate": 1})

    assert policy.min_pass_rate == 1.0
    assert isinstance(policy.min_pass_rate, float)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"max_regression": 0}, "gate.max_regression"),
        ({"cost": {"max_avg": 0.1}}, "gate.cost.max_avg"),
        ({"max_regressions": -1}, "gate.max_regressions"),
        ({"max_regressions": 1.5}, "gate.max_regressions"),
        ({"max_regressions": 1.0}, "gate.max_regressions"),
        ({"max_regressions": True}, "gate.max_regressions"),
        ({"max_regressions": "0"}, "gate.max_regressions"),
        ({"min_pass_rate": 1.01}, "gate.min_pass_rate"),
        ({"min_pass_rate": -0.1}, "gate.min_pass_rate"),
        ({"min_pass_rate": "0.9"}, "gate.min_pass_rate"),
        ({"min_pass_rate": False}, "gate.min_pass_rate"),
        ({"min_pass_rate": float("nan")}, "gate.min_pass_rate"),
        ({"cost": 0.004}, "gate.cost"),
        ({"cost": {}}, "gate.cost"),
        ({"cost": {"max_avg_usd": -0.001}}, "gate.cost.max_avg_usd"),
        ({"cost": {"max_avg_usd": "0.004"}}, "gate.cost.max_avg_usd"),
        ({"cost": {"max_delta_usd": float("inf")}}, "gate.cost.max_delta_usd"),
        ({"cost": {"max_delta_usd": True}}, "gate.cost.max_delta_usd"),
        ({"cost": {"max_delta_pct": -101}}, "gate.cost.max_delta_pct"),
        ({"cost": {"max_delta_pct": 10**400}}, "gate.cost.max_delta_pct"),
    ],
)
def test_a_malformed_gate_is_refused_naming_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(Unprocessable) as refused:
        parse_gate_policy(raw)

    assert refused.value.field == field
    assert refused.value.status_code == 422


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"max_regressions": None}, "gate.max_regressions"),
        ({"min_pass_rate": None}, "gate.min_pass_rate"),
        ({"cost": None}, "gate.cost"),
        ({"cost": {"max_avg_usd": None}}, "gate.cost.max_avg_usd"),
    ],
)
def test_a_null_threshold_is_refused_with_a_hint_to_omit_it(
    raw: dict[str, Any], field: str
) -> None:
    with pytest.raises(Unprocessable, match="omit the key") as refused:
        parse_gate_policy(raw)

    assert refused.value.field == field


def test_a_gate_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(Unprocessable) as refused:
        parse_gate_policy([0.9])

    assert refused.value.field == "gate"


def test_a_negative_pct_delta_and_a_negative_usd_delta_are_valid_budgets() -> None:
    policy = parse_gate_policy({"cost": {"max_delta_usd": -0.001, "max_delta_pct": -100}})

    assert policy.cost == CostPolicy(max_delta_usd=-0.001, max_delta_pct=-100.0)


def test_a_cost_policy_that_declares_no_rule_cannot_be_built() -> None:
    # It would report `costRules: []`, which reads as "no cost family".
    with pytest.raises(ValueError, match="at least one rule"):
        CostPolicy()


# --- the run summary ----------------------------------------------------------------------------


def test_a_run_summary_counts_every_status_and_verdict() -> None:
    run = [
        item("a", passed=True, baseline=True, score=0.9),  # kept
        item("b", passed=False, baseline=True, score=0.4),  # regression
        item("c", passed=True, baseline=False, score=0.8),  # new pass
        item("d", status="error", baseline=True),  # regression: an error is a failure
        item("e", status="pending", baseline=True),  # not judged yet
        item("f", status="captured"),  # not judged yet
        item("g", passed=False, score=0.1),  # failed, no baseline verdict
    ]

    summary = run_summary(run)

    assert (summary.total, summary.pending, summary.captured) == (7, 1, 1)
    assert (summary.scored, summary.error, summary.evaluated) == (4, 1, 5)
    assert (summary.passed, summary.failed) == (2, 3)
    assert (summary.regressions, summary.new_passes) == (2, 1)
    assert summary.pass_rate == pytest.approx(2 / 5)
    assert summary.avg_score == pytest.approx((0.9 + 0.4 + 0.8 + 0.1) / 4)


def test_an_errored_item_counts_against_the_pass_rate() -> None:
    summary = run_summary([item("a"), item("b", status="error")])

    assert summary.pass_rate == 0.5
    assert summary.failed == 1


def test_pending_and_captured_items_are_not_in_the_pass_rate() -> None:
    summary = run_summary([item("a"), item("b", status="pending"), item("c", status="captured")])

    assert summary.pass_rate == 1.0


def test_the_pass_rate_of_a_run_with_nothing_evaluated_is_none_not_zero() -> None:
    summary = run_summary([item("a", status="pending"), item("b", status="captured")])

    assert summary.pass_rate is None
    assert summary.avg_score is None
    assert run_summary([]).pass_rate is None


def test_a_run_where_every_item_errored_has_a_pass_rate_of_zero() -> None:
    # Errors are evaluated failures, not missing data.
    assert run_summary([item("a", status="error")]).pass_rate == 0.0


def test_only_items_the_baseline_passed_can_regress() -> None:
    summary = run_summary(
        [
            item("no-baseline", passed=False, baseline=None),
            item("baseline-failed", passed=False, baseline=False),
            item("baseline-passed", passed=False, baseline=True),
        ]
    )

    assert summary.regressions == 1


def test_an_errored_item_the_baseline_passed_is_a_regression() -> None:
    assert run_summary([item("a", status="error", baseline=True)]).regressions == 1


def test_an_item_not_judged_yet_is_not_a_regression_yet() -> None:
    run = [item("a", status="pending", baseline=True), item("b", status="captured", baseline=True)]

    assert run_summary(run).regressions == 0


def test_an_errored_item_is_never_a_new_pass() -> None:
    assert run_summary([item("a", status="error", baseline=False)]).new_passes == 0


def test_a_scored_item_without_a_verdict_is_refused() -> None:
    with pytest.raises(ValueError, match="no passed verdict"):
        ItemOutcome(
            item_id="a",
            position=0,
            input="q",
            expected_output=None,
            status="scored",
            score=0.5,
            passed=None,
            baseline_passed=None,
            error=None,
            output=None,
            cost_usd=None,
            latency_ms=None,
            step_count=None,
            session_id=None,
        )


item_strategy = st.builds(
    item,
    st.uuids().map(str),
    status=st.sampled_from(get_args(ItemStatus)),
    passed=st.booleans(),
    baseline=st.none() | st.booleans(),
    score=st.none() | st.floats(0, 1),
)


@given(st.lists(item_strategy, max_size=30))
def test_the_run_summary_is_internally_consistent(run: list[ItemOutcome]) -> None:
    summary = run_summary(run)

    assert summary.pass_rate is None or 0 <= summary.pass_rate <= 1
    assert (summary.pass_rate is None) == (summary.evaluated == 0)
    assert summary.passed + summary.failed == summary.evaluated
    assert summary.pending + summary.captured + summary.evaluated == summary.total
    assert summary.regressions <= summary.failed
    assert summary.new_passes <= summary.passed


# --- the verdict --------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "reason"), NOT_EVALUATED)
def test_the_gate_never_passes_before_the_candidate_was_evaluated(
    status: RunStatus, reason: str
) -> None:
    # Every item passed, nothing regressed, and the policy asks for nothing at all.
    result = evaluate_gate(status, items(True, True), GatePolicy(), cohort(0.001), None)

    assert result.passed is False
    assert result.reasons == (reason,)


def test_a_cancelled_run_never_passes_the_gate() -> None:
    result = evaluate_gate("cancelled", items(True), STRICT, cohort(0.001), cohort(0.002))

    assert result.passed is False
    assert result.reasons == ("run was cancelled",)


def test_a_still_running_run_reports_only_that_it_is_running() -> None:
    # The thresholds are breached, but a verdict on them would be premature.
    policy = GatePolicy(max_regressions=0, min_pass_rate=0.9)

    result = evaluate_gate("running", items(False, baseline=True), policy, UNPRICED, None)

    assert result.reasons == ("run is still running",)
    assert result.regressions == 1
    assert result.pass_rate == 0.0


@pytest.mark.parametrize("status", ["completed", "completed_with_regressions"])
def test_a_finished_run_with_no_scored_item_fails_the_gate(status: RunStatus) -> None:
    run = [item("a", status="error"), item("b", status="pending")]

    result = evaluate_gate(status, run, GatePolicy(), UNPRICED, None)

    assert result.passed is False
    assert result.reasons == ("no item was scored",)


def test_an_unknown_run_status_fails_the_gate() -> None:
    result = evaluate_gate("paused", items(True), GatePolicy(), UNPRICED, None)  # type: ignore[arg-type]

    assert result.passed is False
    assert result.reasons == ("run status 'paused' is not a finished run",)


def test_a_finished_run_within_its_thresholds_passes() -> None:
    policy = GatePolicy(max_regressions=0, min_pass_rate=0.5)

    result = evaluate_gate("completed", items(True, False), policy, UNPRICED, None)

    assert result.passed is True
    assert result.reasons == ()
    assert result.pass_rate == 0.5
    assert result.gate == {"max_regressions": 0, "min_pass_rate": 0.5}
    assert result.cost_rules is None


def test_more_regressions_than_allowed_fail_the_gate() -> None:
    run = items(False, False, True, baseline=True)

    result = evaluate_gate("completed_with_regressions", run, STRICT, UNPRICED, None)

    assert result.passed is False
    assert result.regressions == 2
    assert result.reasons == ("2 regressions exceed the maximum of 0",)


def test_one_regression_over_the_maximum_reads_in_the_singular() -> None:
    result = evaluate_gate("completed", items(False, baseline=True), STRICT, UNPRICED, None)

    assert result.reasons == ("1 regression exceeds the maximum of 0",)


def test_regressions_up_to_the_maximum_pass() -> None:
    policy = GatePolicy(max_regressions=2)

    result = evaluate_gate("completed", items(False, False, baseline=True), policy, UNPRICED, None)

    assert result.passed is True


def test_regressions_do_not_fail_a_gate_that_declares_no_maximum() -> None:
    run = items(False, True, baseline=True)

    result = evaluate_gate("completed_with_regressions", run, GatePolicy(), UNPRICED, None)

    assert result.passed is True
    assert result.regressions == 1


def test_a_pass_rate_below_the_minimum_fails_with_both_numbers() -> None:
    run = items(*([True] * 17 + [False] * 3))

    result = evaluate_gate("completed", run, GatePolicy(min_pass_rate=0.9), UNPRICED, None)

    assert result.passed is False
    assert result.pass_rate == pytest.approx(0.85)
    assert result.reasons == ("pass rate 0.85 is below the minimum 0.9",)


def test_a_pass_rate_exactly_at_the_minimum_passes() -> None:
    run = items(*([True] * 9 + [False]))

    assert evaluate_gate("completed", run, GatePolicy(min_pass_rate=0.9), UNPRICED, None).passed


def test_a_pass_rate_just_below_the_minimum_is_never_printed_as_the_minimum() -> None:
    run = items(*([True] * 89_999 + [False] * 10_001))

    result = evaluate_gate("completed", run, GatePolicy(min_pass_rate=0.9), UNPRICED, None)

    assert result.reasons == ("pass rate 0.89999 is below the minimum 0.9",)


def test_errors_count_against_the_minimum_pass_rate() -> None:
    run = [*items(True, True, True), item("x", status="error")]

    result = evaluate_gate("completed", run, GatePolicy(min_pass_rate=0.9), UNPRICED, None)

    assert result.reasons == ("pass rate 0.75 is below the minimum 0.9",)


def test_every_breached_threshold_is_a_reason() -> None:
    policy = GatePolicy(max_regressions=0, min_pass_rate=0.9, cost=CostPolicy(max_avg_usd=0.001))

    result = evaluate_gate(
        "completed", items(False, True, baseline=True), policy, cohort(0.002), None
    )

    assert result.reasons == (
        "1 regression exceeds the maximum of 0",
        "pass rate 0.5 is below the minimum 0.9",
        "cost avg 0.002 USD exceeds budget 0.001 USD",
    )


# --- the cost family ----------------------------------------------------------------------------


def test_the_spec_example_over_budget_reads_exactly_as_documented() -> None:
    policy = parse_gate_policy(
        {"max_regressions": 0, "min_pass_rate": 0.9, "cost": {"max_avg_usd": 0.004}}
    )
    run = items(*([True] * 19 + [False]))

    result = evaluate_gate("completed", run, policy, cohort(0.0062), None)

    assert result.to_dict() == {
        "passed": False,
        "reasons": ["cost avg 0.0062 USD exceeds budget 0.004 USD"],
        "regressions": 0,
        "passRate": 0.95,
        "gate": {"max_regressions": 0, "min_pass_rate": 0.9, "cost": {"max_avg_usd": 0.004}},
        "costRules": [
            {
                "rule": "max_avg_usd",
                "status": "fail",
                "observed": 0.0062,
                "threshold": 0.004,
                "reason": "cost avg 0.0062 USD exceeds budget 0.004 USD",
            }
        ],
    }


def test_cost_rules_are_absent_not_empty_without_a_cost_family() -> None:
    result = evaluate_gate("completed", items(True), GatePolicy(min_pass_rate=0.5), UNPRICED, None)

    assert result.cost_rules is None
    assert "costRules" not in result.to_dict()


def test_there_is_one_cost_row_per_declared_rule_in_a_fixed_order() -> None:
    policy = GatePolicy(cost=CostPolicy(max_delta_pct=10, max_avg_usd=1))

    result = evaluate_gate("completed", items(True), policy, cohort(0.5), cohort(0.5))

    assert result.cost_rules is not None
    assert [rule.rule for rule in result.cost_rules] == ["max_avg_usd", "max_delta_pct"]


def test_a_cost_within_budget_passes_its_rule() -> None:
    policy = GatePolicy(cost=CostPolicy(max_avg_usd=0.004))

    result = evaluate_gate("completed", items(True), policy, cohort(0.003), None)

    assert result.passed is True
    assert result.cost_rules is not None
    (rule,) = result.cost_rules
    assert (rule.status, rule.observed, rule.threshold) == ("pass", 0.003, 0.004)
    assert rule.reason == "cost avg 0.003 USD is within budget 0.004 USD"


def test_an_unpriced_candidate_skips_the_cost_rule_and_never_passes_it() -> None:
    policy = GatePolicy(cost=CostPolicy(max_avg_usd=0.004, max_delta_usd=0.001, max_delta_pct=20))

    result = evaluate_gate(
        "completed", items(True), policy, cohort(None, sessions=3), cohort(0.004)
    )

    assert result.cost_rules is not None
    assert [rule.status for rule in result.cost_rules] == ["skipped"] * 3
    assert all(rule.observed is None for rule in result.cost_rules)
    assert result.cost_rules[0].reason == (
        "cost avg unknown: none of the 3 candidate sessions was priced"
    )
    assert result.cost_rules[1].reason == (
        "cost delta unknown: none of the 3 candidate sessions was priced"
    )


def test_a_skipped_cost_rule_is_reported_but_does_not_fail_the_gate() -> None:
    policy = GatePolicy(min_pass_rate=0.5, cost=CostPolicy(max_avg_usd=0.004))

    result = evaluate_gate("completed", items(True), policy, cohort(None, sessions=1), None)

    assert result.passed is True
    assert result.reasons == ()
    assert result.cost_rules is not None
    assert result.cost_rules[0].status == "skipped"
    assert (
        result.cost_rules[0].reason
        == "cost avg unknown: the candidate's only session was not priced"
    )


def test_a_candidate_with_no_session_skips_its_cost_rule() -> None:
    policy = GatePolicy(cost=CostPolicy(max_avg_usd=0.004))

    result = evaluate_gate("completed", items(True), policy, cohort(None, sessions=0), None)

    assert result.cost_rules is not None
    assert result.cost_rules[0].reason == "cost avg unknown: the candidate has no captured session"


def test_a_partly_priced_average_says_how_many_sessions_it_covers() -> None:
    policy = GatePolicy(cost=CostPolicy(max_avg_usd=0.004))

    result = evaluate_gate(
        "completed", items(True), policy, cohort(0.005, priced=3, sessions=5), None
    )

    assert result.reasons == (
        "cost avg 0.005 USD exceeds budget 0.004 USD (3 of 5 sessions priced)",
    )


def test_cost_rules_are_skipped_not_judged_before_the_run_was_evaluated() -> None:
    policy = GatePolicy(cost=CostPolicy(max_avg_usd=1.0))

    result = evaluate_gate("running", items(True), policy, cohort(0.001), None)

    assert result.cost_rules is not None
    (rule,) = result.cost_rules
    assert (rule.status, rule.observed) == ("skipped", None)
    assert rule.reason == "not evaluated: run is still running"
    assert result.reasons == ("run is still running",)


def test_a_cost_delta_needs_a_baseline() -> None:
    policy = GatePolicy(cost=CostPolicy(max_delta_usd=0.001, max_delta_pct=10))

    result = evaluate_gate("completed", items(True), policy, cohort(0.003), None)

    assert result.passed is True
    assert result.cost_rules is not None
    assert [(rule.status, rule.observed) for rule in result.cost_rules] == [("skipped", None)] * 2
    assert result.cost_rules[0].reason == "cost delta unknown: the run has no baseline cohort"


def test_a_cost_delta_is_never_computed_against_an_unpriced_baseline() -> None:
    # Treating the baseline as free would make every candidate look more expensive.
    policy = GatePolicy(cost=CostPolicy(max_delta_usd=0.001, max_delta_pct=10))

    result = evaluate_gate(
        "completed", items(True), policy, cohort(0.003), cohort(None, sessions=6)
    )

    assert result.cost_rules is not None
    assert [(rule.status, rule.observed) for rule in result.cost_rules] == [("skipped", None)] * 2
    assert result.cost_rules[1].reason == (
        "cost delta unknown: none of the 6 baseline sessions was priced"
    )


def test_a_usd_delta_over_the_allowance_fails() -> None:
    policy = GatePolicy(cost=CostPolicy(max_delta_usd=0.0005))

    result = evaluate_gate("completed", items(True), policy, cohort(0.005), cohort(0.004))

    assert result.cost_rules is not None
    (rule,) = result.cost_rules
    assert rule.status == "fail"
    assert rule.observed == pytest.approx(0.001)
    assert rule.reason == (
        "cost avg 0.005 USD is +0.001 USD vs baseline 0.004 USD, above the allowed +0.0005 USD"
    )
    assert result.reasons == (rule.reason,)


def test_a_usd_delta_within_the_allowance_passes() -> None:
    policy = GatePolicy(cost=CostPolicy(max_delta_usd=0.0))

    result = evaluate_gate("completed", items(True), policy, cohort(0.003), cohort(0.004, priced=2))

    assert result.cost_rules is not None
    (rule,) = result.cost_rules
    assert rule.status == "pass"
    assert rule.observed == pytest.approx(-0.001)
    assert rule.reason == (
        "cost avg 0.003 USD is -0.001 USD vs baseline 0.004 USD, within the allowed 0 USD"
        " (2 of 4 baseline sessions priced)"
    )


def test_cheaper_and_still_hits_the_number_passes() -> None:
    # The spec's "cost at least 50% less than the baseline" policy.
    policy = parse_gate_policy({"min_pass_rate": 0.9, "cost": {"max_delta_pct": -50}})

    result = evaluate_gate("completed", items(True), policy, cohort(0.0018), cohort(0.004))

    assert result.passed is True
    assert result.cost_rules is not None
    (rule,) = result.cost_rules
    assert rule.status == "pass"
    assert rule.observed == pytest.approx(-55.0)
    assert rule.reason == (
        "cost avg 0.0018 USD is 55% cheaper than baseline 0.004 USD; "
        "the gate requires at least 50% cheaper"
    )


def test_cheaper_but_not_cheap_enough_fails_a_negative_pct_budget() -> None:
    policy = GatePolicy(cost=CostPolicy(max_delta_pct=-50))

    result = evaluate_gate("completed", items(True), policy, cohort(0.0028), cohort(0.004))

    assert result.passed is False
    assert result.reasons == (
        "cost avg 0.0028 USD is 30% cheaper than baseline 0.004 USD; "
        "the gate requires at least 50% cheaper",
    )


def test_a_cost_increase_over_the_allowed_pct_fails() -> None:
    policy = GatePolicy(cost=CostPolicy(max_delta_pct=20))

    result = evaluate_gate("completed", items(True), policy, cohort(0.0062), cohort(0.004))

    assert result.cost_rules is not None
    (rule,) = result.cost_rules
    assert rule.status == "fail"
    assert rule.observed == pytest.approx(55.0)
    assert rule.reason == (
        "cost avg 0.0062 USD is 55% more than baseline 0.004 USD; the gate allows at most 20% more"
    )


def test_exactly_half_the_baseline_cost_meets_a_minus_fifty_pct_budget() -> None:
    policy = GatePolicy(cost=CostPolicy(max_delta_pct=-50))

    result = evaluate_gate("completed", items(True), policy, cohort(0.002), cohort(0.004))

    assert result.passed is True


def test_a_pct_change_against_a_free_baseline_is_skipped() -> None:
    policy = GatePolicy(cost=CostPolicy(max_delta_pct=10))

    result = evaluate_gate("completed", items(True), policy, cohort(0.001), cohort(0.0))

    assert result.passed is True
    assert result.cost_rules is not None
    (rule,) = result.cost_rules
    assert (rule.status, rule.observed) == ("skipped", None)
    assert rule.reason == (
        "cost change in % is undefined: the baseline's priced sessions cost 0 USD"
    )


def test_tiny_costs_are_printed_in_plain_decimals() -> None:
    policy = GatePolicy(cost=CostPolicy(max_avg_usd=0.00001))

    result = evaluate_gate("completed", items(True), policy, cohort(0.0000123456), None)

    assert result.reasons == ("cost avg 0.00001235 USD exceeds budget 0.00001 USD",)


policy_strategy = st.builds(
    GatePolicy,
    max_regressions=st.none() | st.integers(0, 5),
    min_pass_rate=st.none() | st.floats(0, 1),
    cost=st.none() | st.builds(CostPolicy, max_avg_usd=st.floats(0, 1)),
)
cohort_strategy = st.builds(cohort, st.none() | st.floats(0, 1), sessions=st.integers(1, 5))


@given(
    status=st.sampled_from([status for status, _ in NOT_EVALUATED]),
    run=st.lists(item_strategy, max_size=20),
    policy=policy_strategy,
    candidate=cohort_strategy,
    baseline=st.none() | cohort_strategy,
)
def test_no_policy_and_no_items_make_an_unfinished_run_pass(
    status: RunStatus,
    run: list[ItemOutcome],
    policy: GatePolicy,
    candidate: CohortStats,
    baseline: CohortStats | None,
) -> None:
    result = evaluate_gate(status, run, policy, candidate, baseline)

    assert result.passed is False
    assert len(result.reasons) == 1
    assert all(rule.status == "skipped" for rule in result.cost_rules or ())


@given(
    status=st.sampled_from(["completed", "completed_with_regressions"]),
    run=st.lists(item_strategy, max_size=20),
    policy=policy_strategy,
    candidate=cohort_strategy,
)
def test_a_finished_run_passes_exactly_when_no_reason_is_given(
    status: RunStatus, run: list[ItemOutcome], policy: GatePolicy, candidate: CohortStats
) -> None:
    result = evaluate_gate(status, run, policy, candidate, None)

    assert result.passed == (result.reasons == ())
    if not any(outcome.status == "scored" for outcome in run):
        assert result.reasons == ("no item was scored",)
    assert (result.cost_rules is None) == (policy.cost is None)
    for rule in result.cost_rules or ():
        assert (rule.status == "skipped") == (rule.observed is None)
        if candidate.avg_cost_usd is None:
            assert rule.status == "skipped"


# --- the per-metric rollup ----------------------------------------------------------------------


def verdict(
    judge: str,
    session: str,
    score: float | None,
    passed: bool | None,
    *,
    name: str | None = None,
    unscored: bool = False,
) -> JudgeScore:
    return JudgeScore(
        judge_id=judge,
        judge_name=name or f"metric-{judge}",
        session_id=session,
        score=score,
        passed=passed,
        unscored=unscored,
    )


def test_a_run_with_nothing_scored_has_an_empty_metric_rollup() -> None:
    assert metrics_rollup([]) == []


def test_the_metric_rollup_averages_each_judge_over_its_scored_sessions() -> None:
    rows = metrics_rollup(
        [
            verdict("j1", "s1", 0.9, True, name="faithfulness"),
            verdict("j1", "s2", 0.5, False, name="faithfulness"),
            verdict("j1", "s3", None, None, name="faithfulness", unscored=True),
            verdict("j2", "s1", 1.0, True, name="answer_relevance"),
            verdict("j2", "s2", 0.8, True, name="answer_relevance"),
        ]
    )

    assert [(row.metric, row.judge_id) for row in rows] == [
        ("answer_relevance", "j2"),
        ("faithfulness", "j1"),
    ]
    relevance, faithfulness = rows
    assert relevance.avg_score == pytest.approx(0.9)
    assert faithfulness.avg_score == pytest.approx(0.7)
    assert (relevance.pass_rate, relevance.sessions_scored, relevance.sessions_unscored) == (
        1.0,
        2,
        0,
    )
    assert (faithfulness.pass_rate, faithfulness.sessions_scored) == (0.5, 2)
    assert faithfulness.sessions_unscored == 1


def test_an_unscored_session_is_never_averaged_in_as_zero() -> None:
    (row,) = metrics_rollup(
        [verdict("j1", "s1", 0.8, True), verdict("j1", "s2", 0.0, False, unscored=True)]
    )

    assert row.avg_score == 0.8
    assert row.pass_rate == 1.0
    assert (row.sessions_scored, row.sessions_unscored) == (1, 1)


def test_a_judge_that_scored_nothing_has_no_average_and_no_pass_rate() -> None:
    (row,) = metrics_rollup([verdict("j1", "s1", None, None, unscored=True)])

    assert (row.avg_score, row.pass_rate) == (None, None)
    assert (row.sessions_scored, row.sessions_unscored) == (0, 1)


def test_a_verdict_without_a_number_counts_as_scored_but_not_in_the_average() -> None:
    (row,) = metrics_rollup([verdict("j1", "s1", None, True), verdict("j1", "s2", 0.4, False)])

    assert row.avg_score == 0.4
    assert row.pass_rate == 0.5
    assert row.sessions_scored == 2


def test_metric_rows_are_sorted_by_metric_name() -> None:
    rows = metrics_rollup(
        [verdict("j1", "s", 1, True, name="toxicity"), verdict("j2", "s", 1, True, name="brevity")]
    )

    assert [row.metric for row in rows] == ["brevity", "toxicity"]


def test_a_session_scored_twice_by_one_judge_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        metrics_rollup([verdict("j1", "s1", 0.9, True), verdict("j1", "s1", 0.1, False)])


@given(
    st.lists(
        st.builds(
            verdict,
            st.sampled_from(["j1", "j2", "j3"]),
            st.uuids().map(str),
            st.none() | st.floats(0, 1),
            st.none() | st.booleans(),
            unscored=st.booleans(),
        ),
        max_size=30,
    )
)
def test_the_metric_rollup_accounts_for_every_verdict_once(scores: list[JudgeScore]) -> None:
    rows = metrics_rollup(scores)

    assert sum(row.sessions_scored + row.sessions_unscored for row in rows) == len(scores)
    assert len(rows) == len({score.judge_id for score in scores})
    for row in rows:
        assert row.pass_rate is None or 0 <= row.pass_rate <= 1
        assert row.avg_score is None or 0 <= row.avg_score <= 1
