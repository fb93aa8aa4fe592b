"""The body of `GET /model-sweeps/{id}/evidence`: every captured answer, camelCase."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from neens.api.schemas.base import ResponseBody


class EvidenceAnswerOut(ResponseBody):
    arm_id: str = Field(description="The arm (`msa-…`) whose run captured the answer.")
    item_id: str = Field(description="The golden item answered.")
    run_id: str = Field(description="The child run (`ppr_…`).")
    session_id: str = Field(description="The captured session (trace id).")
    status: str = Field(description="The item's status in that run: `captured`, `scored`, …")
    scored: bool = Field(description="Whether the answer has a verdict (status `scored`).")
    passed: bool | None = Field(description="The verdict; null unless scored.")
    score: float | None = Field(description="The judges' score; null when none.")
    cost_usd: float | None = Field(description="The session's cost; null: unpriced, never 0.")
    agent_name: str | None = Field(description="The agent name the session reported; null none.")
    latency_ms: float | None = Field(description="The session's latency; null when unknown.")
    output: str | None = Field(description="The answer the agent gave; null when none.")


class EvidenceArmOut(ResponseBody):
    arm_id: str = Field(description="`msa-…`.")
    label: str = Field(description="The arm's label.")
    position: int = Field(description="Its place in the sweep's arms (0: the declared incumbent).")
    runs: int = Field(description="k.")
    run_ids: list[str] = Field(description="Its launched child runs, in launch order.")


class EvidenceCaseOut(ResponseBody):
    item_id: str = Field(description="The golden item.")
    position: int = Field(description="Its place in the frozen dataset version.")
    input: str = Field(description="The frozen input.")
    expected_output: str | None = Field(description="The frozen expected output; null none.")
    metadata: dict[str, Any] = Field(description="The item's metadata.")


class SweepEvidenceOut(ResponseBody):
    sweep_id: str = Field(description="`msw-…`.")
    status: str = Field(description="The sweep's status; `void` sweeps have evidence too.")
    dataset_version_id: str = Field(description="The frozen dataset version the arms ran.")
    arms: list[EvidenceArmOut] = Field(description="The arms, in position order.")
    cases: list[EvidenceCaseOut] = Field(description="The frozen items, in order.")
    answers: list[EvidenceAnswerOut] = Field(
        description="Every captured answer of every arm, by arm position, item position, run."
    )
