"""Bodies of the model sweep routes: camelCase both ways, as the spec's curl examples send them."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import ConfigDict, Field, StrictInt, field_validator
from pydantic.alias_generators import to_camel

from neens.api.schemas.base import NameStr, RequestBody, ResponseBody


class _CamelRequest(RequestBody):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, alias_generator=to_camel
    )


class SweepArmIn(_CamelRequest):
    label: NameStr = Field(min_length=1, max_length=200)
    """What the arm is called in every result, e.g. `sonnet`."""
    agent_connection_id: str = Field(min_length=1, max_length=200)
    """The agent endpoint connection this arm calls, `conn_…`: one connection per arm."""


class SweepIn(_CamelRequest):
    name: NameStr | None = Field(default=None, min_length=1, max_length=500)
    """A name for the sweep; defaults to the version label."""
    version_label: NameStr | None = Field(default=None, min_length=1, max_length=500)
    """What is being evaluated, e.g. a git SHA; required to create, optional to preview."""
    dataset_id: str | None = Field(default=None, min_length=1, max_length=200)
    """The golden dataset, `ds_…`; its golden version is replayed unless one is pinned."""
    dataset_version_id: str | None = Field(default=None, min_length=1, max_length=200)
    """Pin a version of the dataset instead of its golden one."""
    suite_id: str | None = Field(default=None, min_length=1, max_length=200)
    """Replay a stress-test suite, `sts_…`: its frozen dataset version, instead of naming a
    dataset."""
    pass_k: StrictInt = Field(default=3, ge=1)
    """Runs per arm; an arm passes only when all k are green."""
    budget_usd: float | None = Field(default=None, ge=0)
    """Refuse the sweep when its priced estimate is over this, and stop it when its spend
    crosses it."""
    judge_deployment_ids: list[str] | None = Field(default=None, min_length=1)
    """Judges that score every run; default: the project's Primary Score."""
    gate: dict[str, Any] | None = None
    """The gate every run is held to, e.g. `{"min_pass_rate": 0.9}`."""
    arms: list[SweepArmIn] = Field(min_length=1, max_length=256)
    """One per model: `{label, agentConnectionId}`."""

    @field_validator("budget_usd")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class ArmEstimateOut(ResponseBody):
    label: str = Field(description="The arm.")
    agent_connection_id: str = Field(description="Its connection.")
    model: str | None = Field(description="The connection's model; null when not recorded.")
    calls: int = Field(description="Agent calls the arm makes: k × items.")
    estimated_usd: float | None = Field(
        description="Estimated cost in USD; null when the model is unpriced (never 0)."
    )
    basis: str = Field(description="`history`, `prompts` or `unpriced`: what it rests on.")
    basis_detail: str = Field(description="The estimate's basis, in words.")


class SweepPreviewOut(ResponseBody):
    dataset_id: str = Field(description="The dataset replayed.")
    dataset_version_id: str = Field(description="The frozen version replayed.")
    item_count: int = Field(description="Items in that version.")
    pass_k: int = Field(description="Runs per arm.")
    arms: list[ArmEstimateOut] = Field(description="Per arm: calls and estimated cost.")
    total_calls: int = Field(description="Agent calls over every arm.")
    estimated_usd: float | None = Field(
        description="Sum over the priced arms; null when no arm is priced."
    )
    partial: bool = Field(description="True when at least one arm is unpriced.")
    budget_usd: float | None = Field(description="The budget given, if any.")
    would_refuse: bool | None = Field(
        description="Whether create would refuse on the budget; null without a budget."
    )
    refusal: str | None = Field(description="Why create would refuse; null when it would not.")


class ArmProgress(ResponseBody):
    runs_finished: int = Field(description="Child runs finished.")
    runs: int = Field(description="k: child runs the arm needs.")
    items_done: int = Field(description="Items scored or errored over its runs.")
    items_total: int = Field(description="k × items.")


class SweepArmOut(ResponseBody):
    id: str = Field(description="Arm id, `msa-…`.")
    label: str = Field(description="The arm's label.")
    agent_connection_id: str = Field(description="The connection it calls.")
    model: str | None = Field(description="The connection's model, copied at create.")
    model_provider: str | None = Field(
        description="The connection's provider, copied at create with the model (e.g. "
        "`agent_http`, `openai`, `simulated`); null when not recorded."
    )
    status: str = Field(description="pending, running, completed, failed or cancelled.")
    progress: ArmProgress = Field(description="Runs and items done.")
    green_runs: int = Field(
        description="Finished runs that are green: completed, gate passed, zero regressions."
    )
    passed: bool | None = Field(
        description="pass^k: true only when k runs finished, all green; false when k finished "
        "and not all green; null while fewer than k finished."
    )
    error: str | None = Field(description="Why the arm failed.")
    run_ids: list[str] = Field(description="Its child pre-prod runs launched so far, in order.")


class SweepOut(ResponseBody):
    id: str = Field(description="Sweep id, `msw-…`.")
    name: str = Field(description="The sweep's name.")
    version_label: str = Field(description="What was evaluated.")
    dataset_id: str = Field(description="The dataset replayed.")
    dataset_version_id: str = Field(description="The frozen version replayed.")
    item_count: int = Field(description="Items in that version.")
    pass_k: int = Field(description="Runs per arm.")
    budget_usd: float | None = Field(description="The budget ceiling, if one was set.")
    spent_usd: float = Field(description="USD spent on priced calls of the child runs so far.")
    unpriced_calls: int = Field(
        description="Answered calls whose cost is unknown (not in spentUsd)."
    )
    judge_deployment_ids: list[str] = Field(description="The judges pinned for every run.")
    gate: dict[str, Any] = Field(description="The gate pinned for every run.")
    fingerprint: str = Field(
        description="The pinned conditions (dataset version, sorted judges, k, version label, "
        "gate), hashed."
    )
    status: str = Field(
        description="pending, running, completed, completed_with_failures, failed, cancelled "
        "or void."
    )
    void_reason: str | None = Field(description="Why the sweep is void; null unless it is.")
    diverged_arms: list[str] = Field(description="Labels of the arms that diverged (void).")
    reason: str | None = Field(description="Why the sweep was cancelled or failed.")
    created_at: datetime = Field(description="Created (UTC).")
    completed_at: datetime | None = Field(description="Ended (UTC).")
    arms: list[SweepArmOut] = Field(description="Each arm's own state and progress.")


class SweepList(ResponseBody):
    sweeps: list[SweepOut] = Field(description="Newest first.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last."
    )
