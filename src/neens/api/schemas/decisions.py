"""The body of `GET /model-sweeps/{id}/comparison`: `domain.decision.SweepComparison`, camelCase."""

from __future__ import annotations

from pydantic import Field

from neens.api.schemas.base import ResponseBody


class BarOut(ResponseBody):
    value: float = Field(description="The pass rate an arm has to clear, 0 to 1.")
    source: str = Field(
        description="Where it came from: `query` (?bar=), `gate` (the sweep's pinned "
        "min_pass_rate) or `default` (0.9)."
    )


class McNemarOut(ResponseBody):
    b: int = Field(description="Items the baseline passed and this arm did not.")
    c: int = Field(description="Items this arm passed and the baseline did not.")
    n11: int = Field(description="Items both passed.")
    n00: int = Field(description="Items neither passed.")
    discordant: int = Field(description="b + c; 0: they agree on every shared item.")
    shared_items: int = Field(description="Items both arms scored.")
    p_value: float = Field(description="Exact McNemar two-sided p-value.")
    sentence: str = Field(description="The paired test in words: a second line, not the ranking.")


class ArmComparisonOut(ResponseBody):
    arm_id: str = Field(description="`msa-…`.")
    label: str = Field(description="The arm's label.")
    position: int = Field(description="Its place in the sweep's arms (0: the declared incumbent).")
    status: str = Field(description="The arm's status.")
    passed: bool | None = Field(description="pass^k (null: fewer than k runs finished).")
    runs: int = Field(description="k.")
    is_baseline: bool = Field(description="Whether this is the baseline arm.")
    n: int = Field(description="Items with at least one scored repeat.")
    passed_items: int = Field(description="Items every scored repeat of which passed.")
    flaky_items: int = Field(
        description="Items with passed and failed repeats: in n, never counted as passes."
    )
    rate: float | None = Field(
        description="passedItems / n, the strict rate (an item counts only when every scored "
        "repeat passed); null: no data (never 0%)."
    )
    pass_hat_k: float | None = Field(
        description="Unbiased pass^k at this arm's k: the mean over items with at least k scored "
        "repeats of C(c,k)/C(n,k), never (c/n)^k; null when no item has k scored repeats."
    )
    pass_hat_k_items: int = Field(description="Items with at least k scored repeats.")
    wilson_low: float | None = Field(description="95% Wilson interval over items, low end.")
    wilson_high: float | None = Field(description="95% Wilson interval over items, high end.")
    cases: int = Field(description="Captured answers (sessions).")
    priced_cases: int = Field(description="Of those, the priced ones.")
    cost_per_case_usd: float | None = Field(
        description="Mean cost over priced cases; null: unpriced (never free)."
    )
    cost_delta_usd: float | None = Field(description="Cost per case minus the baseline's.")
    cost_delta_pct: float | None = Field(description="The same in percent of the baseline's.")
    regressions: int | None = Field(
        description="Items the baseline passed on all k runs that this arm, scored, did not "
        "pass; null on a void sweep."
    )
    new_passes: int | None = Field(description="The inverse of regressions.")
    mcnemar: McNemarOut | None = Field(description="Exact McNemar against the baseline.")
    excluded: str | None = Field(
        description="Why the arm is not ranked: not_terminal, failed or not_pass_k."
    )
    clears_bar: str = Field(description="`lower_bound`, `point` (estimate only) or `no`.")
    rank: int | None = Field(description="1-based place on the leaderboard; null unranked.")
    not_distinguishable: str | None = Field(
        description='"not distinguishable from <winner> at n=…" when the intervals overlap.'
    )


class VerdictOut(ResponseBody):
    outcome: str = Field(
        description="`recommended`, `no_arm_clears`, `not_finished` or `unavailable` (void)."
    )
    recommended_arm_id: str | None = Field(description="The arm to ship, if any.")
    recommended_label: str | None = Field(description="Its label.")
    cost_per_case_usd: float | None = Field(description="Its cost per case; null unpriced.")
    savings_usd: float | None = Field(description="Saved per case against the baseline.")
    savings_pct: float | None = Field(description="The same in percent.")
    clears_on: str | None = Field(description="`lower_bound` or `point` (estimate only).")
    sentence: str = Field(description="The verdict, said out loud.")


class AgentComparisonOut(ResponseBody):
    agent_name: str | None = Field(description="The agent name; null for Unattributed.")
    label: str = Field(description="The name, or `Unattributed`.")
    items: int = Field(description="Dataset items of this agent.")
    unnamed_items: int = Field(description="Unattributed: items whose sessions named no agent.")
    conflicting_items: int = Field(
        description="Unattributed: items whose sessions named different agents."
    )
    arms: list[ArmComparisonOut] = Field(description="Each arm over this agent's items.")
    leaderboard: list[str] = Field(description="Arm ids, best first.")
    winner_arm_id: str | None = Field(description="The top-ranked arm with data.")
    verdict: VerdictOut = Field(description="The verdict for this agent.")


class FrontierPointOut(ResponseBody):
    arm_id: str = Field(description="`msa-…`.")
    label: str = Field(description="The arm's label.")
    cost_per_case_usd: float = Field(description="The x axis: mean cost per priced case.")
    rate: float = Field(description="The y axis: items passed on every scored repeat / n.")
    wilson_low: float = Field(description="95% Wilson interval, low end.")
    wilson_high: float = Field(description="95% Wilson interval, high end.")
    n: int = Field(description="Items scored.")
    excluded: str | None = Field(
        description="Why the arm is not ranked; such an arm is plotted and never on the frontier."
    )
    on_frontier: bool = Field(
        description="Eligible, and no other eligible arm is as cheap and as good (one strictly)."
    )
    highlighted: bool = Field(description="The recommended arm.")


class FrontierOut(ResponseBody):
    points: list[FrontierPointOut] = Field(
        description="Arms with a rate and a price, cheapest first."
    )
    unpriced_arm_ids: list[str] = Field(
        description="Arms with data but no price: listed beside the chart, never plotted as free."
    )
    no_data_arm_ids: list[str] = Field(description="Arms no item of which was scored.")
    highlighted_arm_id: str | None = Field(description="The recommended arm, if any.")


class SweepComparisonOut(ResponseBody):
    sweep_id: str = Field(description="`msw-…`.")
    status: str = Field(description="The sweep's status.")
    comparable: bool = Field(description="False for a void sweep: no ranking, no winner.")
    void_reason: str | None = Field(description="Why the sweep is void.")
    bar: BarOut = Field(description="The bar, and where it came from.")
    baseline_arm_id: str = Field(description="The arm savings and regressions are measured to.")
    item_count: int = Field(description="Frozen items.")
    uncaptured_items: int = Field(description="Items no arm captured.")
    arms: list[ArmComparisonOut] = Field(description="Every arm, in position order.")
    leaderboard: list[str] = Field(description="Arm ids, best first; empty when not comparable.")
    winner_arm_id: str | None = Field(description="The top-ranked arm with data.")
    verdict: VerdictOut = Field(description="Which arm to ship, at what bar and cost.")
    agents: list[AgentComparisonOut] = Field(
        description="The same per agent name; Unattributed last."
    )
    frontier: FrontierOut | None = Field(
        description="The cost–quality frontier: each arm by cost per case against pass rate; "
        "null for a void sweep."
    )


class SignalOut(ResponseBody):
    kind: str = Field(
        description="The one failure signal grouping the whole response: `annotation` (failure "
        "modes people confirmed), `classifier` (a classifier judge's labels) or `none`."
    )
    name: str | None = Field(description="The classifier judge's name.")


class FailureModeCount(ResponseBody):
    label: str = Field(description="The label the signal gave.")
    count: int = Field(description="Regressed items with that label, over the whole set.")
    failure_mode_id: str | None = Field(
        description="The failure mode (`fm_…`) the label resolves to; null when it resolves to "
        "none."
    )


class RunsOut(ResponseBody):
    passed_runs: int = Field(description="Runs that passed the item.")
    scored_runs: int = Field(description="Runs that scored it.")


class CandidateOut(RunsOut):
    score: float | None = Field(description="Mean score over this arm's scored answers.")
    answer: str | None = Field(description="What this arm answered on a failing run.")
    reason: str | None = Field(description="What the judge said of that answer.")
    session_ids: list[str] = Field(description="This arm's captured sessions of the item.")


class RegressedItemOut(ResponseBody):
    item_id: str = Field(description="The dataset item.")
    input: str = Field(description="The frozen prompt.")
    expected_output: str | None = Field(description="The frozen expected answer.")
    failure_mode: str | None = Field(description="Its label under the signal; null: unclassified.")
    baseline: RunsOut = Field(description="The baseline arm on this item.")
    candidate: CandidateOut = Field(description="This arm on this item.")


class RegressionsOut(ResponseBody):
    sweep_id: str = Field(description="`msw-…`.")
    arm_id: str = Field(description="The arm drilled into.")
    baseline_arm_id: str = Field(description="The arm it is measured against.")
    signal: SignalOut = Field(description="The one signal the response groups by, named.")
    failure_modes: list[FailureModeCount] = Field(
        description="Labels with their counts over every regression, most first."
    )
    unclassified: int = Field(
        description="Regressed items the signal gave no label: never dropped."
    )
    items: list[RegressedItemOut] = Field(
        description="Up to `limit` regressed items, in item order."
    )
    total_regressions: int = Field(description="Every regressed item, not just this page.")
    truncated: bool = Field(description="True when `items` was cut to `limit`.")
    new_passes: int = Field(
        description="Items this arm passed on all k runs that the baseline did not."
    )
