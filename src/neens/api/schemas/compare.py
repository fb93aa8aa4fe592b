"""Bodies of Compare Versions and the trajectory diff."""

from __future__ import annotations

from pydantic import Field

from neens.api.schemas.base import ResponseBody


class VersionSummaryOut(ResponseBody):
    run_id: str = Field(description="The run.")
    version_label: str = Field(description="What it evaluated.")
    model: str | None = Field(description="Its frozen model; null when not recorded.")
    is_baseline: bool = Field(description="Whether others are measured against this run.")
    pass_rate: float | None = Field(description="Passed / (scored + error); null with no data.")
    avg_cost_usd: float | None = Field(description="Mean over priced sessions; null if none.")
    priced_sessions: int = Field(description="Sessions with a known cost.")
    sessions: int = Field(description="Captured sessions.")
    avg_latency_ms: float | None = Field(description="Mean latency.")
    avg_step_count: float | None = Field(description="Mean steps.")
    regressions_vs_baseline: int | None = Field(
        description="Prompts the baseline passed and this run failed; null for the baseline."
    )
    new_passes_vs_baseline: int | None = Field(
        description="Prompts this run fixed; null for the baseline."
    )


class VersionCellOut(ResponseBody):
    run_id: str = Field(description="The run.")
    status: str = Field(description="The item's status in that run.")
    passed: bool | None = Field(description="The run's verdict.")
    score: float | None = Field(description="The item's score.")
    output: str | None = Field(description="What the version answered; null: no output captured.")
    regressed_vs_baseline: bool = Field(description="Baseline passed, this run failed.")
    new_pass_vs_baseline: bool = Field(description="Baseline failed, this run passed.")


class VersionRowOut(ResponseBody):
    item_id: str = Field(description="The frozen item.")
    position: int = Field(description="Frozen order.")
    input: str = Field(description="The golden prompt.")
    expected_output: str | None = Field(description="The reference answer.")
    cells: list[VersionCellOut] = Field(description="One per run, in the order asked.")


class VersionsOut(ResponseBody):
    baseline_run_id: str = Field(description="The baseline run.")
    runs: list[VersionSummaryOut] = Field(description="Per-run summary, in the order asked.")
    rows: list[VersionRowOut] = Field(description="One per prompt, in frozen order.")


class StepOut(ResponseBody):
    kind: str = Field(description="llm, tool, retriever or agent.")
    name: str = Field(description="The span's name, e.g. the tool called.")
    input: str | None = Field(description="The step's input.")
    output: str | None = Field(description="The step's output.")


class StepDiffOut(ResponseBody):
    status: str = Field(description="added, removed, changed or same.")
    baseline: StepOut | None = Field(description="The baseline's step; null when added.")
    candidate: StepOut | None = Field(description="The candidate's step; null when removed.")
    baseline_index: int | None = Field(description="Position in the baseline's steps.")
    candidate_index: int | None = Field(description="Position in the candidate's steps.")


class TrajectoryOut(ResponseBody):
    run_id: str = Field(description="The candidate run.")
    baseline_run_id: str = Field(description="The baseline run.")
    item_id: str = Field(description="The frozen item.")
    candidate_captured: bool = Field(description="Whether the candidate captured a session.")
    baseline_captured: bool = Field(description="Whether the baseline captured a session.")
    steps: list[StepDiffOut] = Field(description="Aligned steps; empty when a side has none.")
