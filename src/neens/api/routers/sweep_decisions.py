"""`/model-sweeps/{id}/comparison` and an arm's `/regressions`: the decision over a sweep's
arms, and where one breaks, rendered as computed."""

from __future__ import annotations

from fastapi import APIRouter, Query

from neens.api import paths  # noqa: F401  (the `sweep_id` path convertor)
from neens.api.deps import AnyKey, DbDep
from neens.api.schemas.decisions import (
    AgentComparisonOut,
    ArmComparisonOut,
    BarOut,
    CandidateOut,
    FailureModeCount,
    FrontierOut,
    FrontierPointOut,
    McNemarOut,
    RegressedItemOut,
    RegressionsOut,
    RunsOut,
    SignalOut,
    SweepComparisonOut,
    VerdictOut,
)
from neens.domain.decision import AgentComparison, ArmComparison, Verdict
from neens.domain.decision_frontier import Frontier
from neens.views.decisions import SweepDecision, arm_regressions, sweep_decision

router = APIRouter(prefix="/model-sweeps", tags=["model-sweeps"])


def _arm(arm: ArmComparison) -> ArmComparisonOut:
    m = arm.mcnemar
    return ArmComparisonOut(
        arm_id=arm.arm_id,
        label=arm.label,
        position=arm.position,
        status=arm.status,
        passed=arm.passed,
        runs=arm.runs,
        is_baseline=arm.is_baseline,
        n=arm.n,
        passed_items=arm.passed_items,
        flaky_items=arm.flaky_items,
        rate=arm.rate,
        pass_hat_k=arm.pass_hat_k,
        pass_hat_k_items=arm.pass_hat_k_items,
        wilson_low=arm.wilson_low,
        wilson_high=arm.wilson_high,
        cases=arm.cases,
        priced_cases=arm.priced_cases,
        cost_per_case_usd=arm.cost_per_case_usd,
        cost_delta_usd=arm.cost_delta_usd,
        cost_delta_pct=arm.cost_delta_pct,
        regressions=arm.regressions,
        new_passes=arm.new_passes,
        mcnemar=None
        if m is None
        else McNemarOut(
            b=m.b,
            c=m.c,
            n11=m.n11,
            n00=m.n00,
            discordant=m.discordant,
            shared_items=m.shared_items,
            p_value=m.p_value,
            sentence=m.sentence,
        ),
        excluded=arm.excluded,
        clears_bar=arm.clears_bar,
        rank=arm.rank,
        not_distinguishable=arm.not_distinguishable,
    )


def _verdict(verdict: Verdict) -> VerdictOut:
    return VerdictOut(
        outcome=verdict.outcome,
        recommended_arm_id=verdict.recommended_arm_id,
        recommended_label=verdict.recommended_label,
        cost_per_case_usd=verdict.cost_per_case_usd,
        savings_usd=verdict.savings_usd,
        savings_pct=verdict.savings_pct,
        clears_on=verdict.clears_on,
        sentence=verdict.sentence,
    )


def _agent(agent: AgentComparison) -> AgentComparisonOut:
    return AgentComparisonOut(
        agent_name=agent.agent_name,
        label=agent.label,
        items=agent.items,
        unnamed_items=agent.unnamed_items,
        conflicting_items=agent.conflicting_items,
        arms=[_arm(a) for a in agent.arms],
        leaderboard=list(agent.leaderboard),
        winner_arm_id=agent.winner_arm_id,
        verdict=_verdict(agent.verdict),
    )


def comparison_out(decision: SweepDecision) -> SweepComparisonOut:
    c = decision.comparison
    return SweepComparisonOut(
        sweep_id=decision.sweep.id,
        status=decision.rollup.status,
        comparable=c.comparable,
        void_reason=c.void_reason,
        bar=BarOut(value=c.bar.value, source=c.bar.source),
        baseline_arm_id=c.baseline_arm_id,
        item_count=c.item_count,
        uncaptured_items=c.uncaptured_items,
        arms=[_arm(a) for a in c.arms],
        leaderboard=list(c.leaderboard),
        winner_arm_id=c.winner_arm_id,
        verdict=_verdict(c.verdict),
        agents=[_agent(a) for a in c.agents],
        frontier=_frontier(c.frontier),
    )


def _frontier(frontier: Frontier | None) -> FrontierOut | None:
    if frontier is None:
        return None
    return FrontierOut(
        points=[
            FrontierPointOut(
                arm_id=p.arm_id,
                label=p.label,
                cost_per_case_usd=p.cost_per_case_usd,
                rate=p.rate,
                wilson_low=p.wilson_low,
                wilson_high=p.wilson_high,
                n=p.n,
                excluded=p.excluded,
                on_frontier=p.on_frontier,
                highlighted=p.highlighted,
            )
            for p in frontier.points
        ],
        unpriced_arm_ids=list(frontier.unpriced_arm_ids),
        no_data_arm_ids=list(frontier.no_data_arm_ids),
        highlighted_arm_id=frontier.highlighted_arm_id,
    )


@router.get("/{sweep_id:sweep_id}/comparison", operation_id="model_sweeps-comparison")
async def get_comparison(
    sweep_id: str,
    principal: AnyKey,
    db: DbDep,
    bar: float | None = Query(
        default=None, ge=0, le=1, description="The pass-rate bar, 0 to 1; default: the sweep's."
    ),
    baseline_arm: str | None = Query(
        default=None,
        alias="baselineArm",
        description="The arm (`msa-…`) to measure savings and regressions against; default: "
        "the first arm.",
    ),
) -> SweepComparisonOut:
    """Which arm to ship, at what bar and cost per case, overall and per agent. A void sweep is
    `comparable: false` with no ranking and no winner; the arms' own numbers are still there."""
    decision = await sweep_decision(
        db, principal.project_id, sweep_id, bar=bar, baseline_arm_id=baseline_arm
    )
    return comparison_out(decision)


@router.get(
    "/{sweep_id:sweep_id}/arms/{arm_id}/regressions", operation_id="model_sweeps-regressions"
)
async def get_regressions(
    sweep_id: str,
    arm_id: str,
    principal: AnyKey,
    db: DbDep,
    limit: int = Query(default=50, ge=1, le=200, description="Regressed items to show."),
    baseline_arm: str | None = Query(
        default=None, alias="baselineArm", description="The arm to measure against."
    ),
) -> RegressionsOut:
    """Where an arm breaks: the items the baseline passed on all its k runs and this arm, scored,
    did not, grouped by one named failure signal, with prompts, answers and judges' reasons.
    409 on a void sweep (a regression is a cross-arm claim)."""
    found = await arm_regressions(
        db, principal.project_id, sweep_id, arm_id, limit=limit, baseline_arm_id=baseline_arm
    )
    return RegressionsOut(
        sweep_id=sweep_id,
        arm_id=arm_id,
        baseline_arm_id=found.decision.comparison.baseline_arm_id,
        signal=SignalOut(kind=found.signal.kind, name=found.signal.name),
        failure_modes=[
            FailureModeCount(label=label, count=n, failure_mode_id=found.mode_ids.get(label))
            for label, n in found.modes
        ],
        unclassified=found.unclassified,
        items=[
            RegressedItemOut(
                item_id=item.item_id,
                input=item.input,
                expected_output=item.expected_output,
                failure_mode=item.mode,
                baseline=RunsOut(
                    passed_runs=item.baseline_passed_runs, scored_runs=item.baseline_scored_runs
                ),
                candidate=CandidateOut(
                    passed_runs=item.passed_runs,
                    scored_runs=item.scored_runs,
                    score=item.score,
                    answer=item.answer,
                    reason=item.reason,
                    session_ids=item.session_ids,
                ),
            )
            for item in found.items
        ],
        total_regressions=found.total,
        truncated=found.total > len(found.items),
        new_passes=found.new_passes,
    )
