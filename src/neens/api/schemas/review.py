"""Bodies of a run's review routes: gate, comparison, metrics."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from neens.api.schemas.base import ResponseBody


class CostRuleOut(ResponseBody):
    rule: str = Field(description="max_avg_usd, max_delta_usd or max_delta_pct.")
    status: str = Field(description="pass, fail or skipped (never pass when unpriced).")
    observed: float | None = Field(description="The measured value; null when unknown.")
    threshold: float = Field(description="The declared limit.")
    reason: str = Field(description="The verdict in plain English.")


class GateOut(ResponseBody):
    passed: bool = Field(description="Whether the run passed its gate.")
    reasons: list[str] = Field(description="Why it failed; empty when it passed.")
    regressions: int = Field(description="Items the baseline passed and the candidate failed.")
    pass_rate: float | None = Field(description="Passed / (scored + error); null with no data.")
    gate: dict[str, Any] = Field(description="The stored gate policy.")
    cost_rules: list[CostRuleOut] | None = Field(
        default=None,
        description="One row per declared cost rule; the key is absent without a cost family.",
    )


class CohortOut(ResponseBody):
    avg_cost_usd: float | None = Field(description="Mean over priced sessions; null if none.")
    priced_sessions: int = Field(description="Sessions with a known cost.")
    sessions: int = Field(description="Sessions in the cohort.")
    avg_latency_ms: float | None = Field(description="Mean latency; null if unknown.")
    avg_step_count: float | None = Field(description="Mean LLM + tool steps; null if unknown.")


class ComparisonRowOut(ResponseBody):
    item_id: str = Field(description="The frozen item.")
    position: int = Field(description="Frozen order.")
    input: str = Field(description="The golden prompt.")
    expected_output: str | None = Field(description="The reference answer.")
    output: str | None = Field(description="The candidate's answer; null when none was captured.")
    status: str = Field(description="The item's status.")
    candidate_passed: bool | None = Field(description="The candidate's verdict.")
    baseline_passed: bool | None = Field(description="The baseline's verdict; null when none.")
    regression: bool = Field(description="The baseline passed and the candidate failed.")
    new_pass: bool = Field(description="The baseline failed and the candidate passed.")
    score: float | None = Field(description="The item's score.")
    error: str | None = Field(description="Why the item errored.")


class ComparisonOut(ResponseBody):
    rows: list[ComparisonRowOut] = Field(description="One per item, in frozen order.")
    regressions: list[str] = Field(description="Item ids that regressed.")
    new_passes: list[str] = Field(description="Item ids the candidate fixed.")
    cost_usd_delta: float | None = Field(
        description="Candidate minus baseline average cost over priced sessions; null when a "
        "side has no priced session."
    )
    latency_ms_delta: float | None = Field(description="Average latency difference.")
    step_count_delta: float | None = Field(description="Average step-count difference.")
    candidate: CohortOut = Field(description="The candidate's captured sessions.")
    baseline: CohortOut | None = Field(description="The baseline cohort; null when none.")


class MetricOut(ResponseBody):
    metric: str = Field(description="The judge's name.")
    judge_id: str = Field(description="The judge.")
    avg_score: float | None = Field(description="Mean normalized score; null if none.")
    pass_rate: float | None = Field(description="Share of sessions passing; null if none.")
    sessions_scored: int = Field(description="Sessions the judge scored.")
    sessions_unscored: int = Field(description="Sessions the judge could not score.")


class MetricsOut(ResponseBody):
    metrics: list[MetricOut] = Field(description="One row per judge metric; empty if none.")
