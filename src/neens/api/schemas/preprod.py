"""Bodies of the pre-prod evaluation routes. Request fields are snake_case, as the spec's curl
examples send them; responses are camelCase, except `/items`, whose shape the spec fixes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from neens.api.schemas.base import (
    LocatedValueError,
    NameStr,
    RequestBody,
    ResponseBody,
    StorableStr,
)
from neens.domain.baseline import parse_range
from neens.domain.conventions import DATASET_ITEM_ID_KEY


class Baseline(RequestBody):
    kind: Literal["prod_window", "preprod_run"]
    """`prod_window`: production sessions whose input equals an item's prompt.
    `preprod_run`: an earlier pre-prod run over the same golden version."""
    range: str | None = None
    """For `prod_window`: how far back production is read, e.g. `30m`, `24h`, `7d`."""
    value: str | None = Field(default=None, min_length=1)
    """For `preprod_run`: the earlier run's id, `ppr_…`."""

    @field_validator("range")
    @classmethod
    def _check_range(cls, value: str | None) -> str | None:
        if value is not None:
            parse_range(value)
        return value

    @model_validator(mode="after")
    def _fits_kind(self) -> Baseline:
        needed, other = ("range", "value") if self.kind == "prod_window" else ("value", "range")
        if getattr(self, needed) is None:
            raise LocatedValueError(f"is required for kind {self.kind}", (needed,))
        if getattr(self, other) is not None:
            raise LocatedValueError(f"does not apply to kind {self.kind}", (other,))
        return self

    def to_dict(self) -> dict[str, str]:
        if self.kind == "prod_window":
            assert self.range is not None
            return {"kind": self.kind, "range": self.range}
        assert self.value is not None
        return {"kind": self.kind, "value": self.value}


class PreprodCreate(RequestBody):
    name: NameStr | None = Field(default=None, max_length=500)
    """A name for the run; defaults to the version label."""
    dataset_id: str
    """The golden dataset, `ds_…`."""
    dataset_version_id: str | None = None
    """Pin a version; default: the dataset's golden version."""
    version_label: NameStr = Field(min_length=1, max_length=500)
    """What is being evaluated, e.g. a git SHA or `pr-482`."""
    runner_mode: Literal["runner", "push"] = "runner"
    """`runner`: you run the agent and send traces. `push`: Neens calls the agent connection."""
    agent_connection_id: str | None = None
    """The agent endpoint to call; required for `push`."""
    judge_deployment_ids: list[str] | None = Field(default=None, min_length=1)
    """Judges that score the run; default: the project's Primary Score."""
    baseline: Baseline | None = None
    """What regressions are measured against; none: no item can regress."""
    gate: dict[str, Any] | None = None
    """`max_regressions`, `min_pass_rate` and the `cost` family (`max_avg_usd`,
    `max_delta_usd`, `max_delta_pct`)."""


class ItemCounts(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    pending: int
    """Items not captured yet."""
    captured: int
    """Items with a captured session, not scored yet."""
    scored: int
    """Items scored."""
    error: int
    """Items whose invocation or scoring failed."""


class RunWaiting(ResponseBody):
    on: Literal["worker", "retry", "traces"] = Field(
        description="`worker`: a job of the run is queued (or lost its worker) and no worker "
        "holds it; `retry`: a job failed and waits to be retried; `traces`: a runner-mode run "
        "waits for your runner's traces."
    )
    job: Literal["push", "scoring"] | None = Field(
        description="The job waited on; null for `traces`, or when the run has no job at all."
    )
    since: datetime | None = Field(
        description="Since when it waits (UTC); for `retry`, when the retry is due."
    )
    message: str = Field(description="What is happening, with the seconds waited so far.")


class PreprodOut(ResponseBody):
    id: str = Field(description="Run id, `ppr_…`.")
    name: str = Field(description="The run's name.")
    dataset_id: str = Field(description="The dataset replayed.")
    dataset_version_id: str = Field(description="The frozen version replayed.")
    version_label: str = Field(description="What was evaluated.")
    runner_mode: str = Field(
        description="`runner`, `push`, or `import` for a run imported from another tool's "
        "results (read-only)."
    )
    agent_connection_id: str | None = Field(description="The connection called (push mode).")
    model: str | None = Field(
        description="The connection's model, copied at create; null when nothing honest can be "
        "recorded (Model not recorded)."
    )
    model_provider: str | None = Field(description="The connection's provider, e.g. agent_http.")
    judge_deployment_ids: list[str] = Field(description="The judges scoring the run.")
    baseline: dict[str, Any] | None = Field(description="The baseline, as given.")
    gate: dict[str, Any] = Field(description="The stored gate policy.")
    status: str = Field(
        description="awaiting_traces, running, completed, completed_with_regressions, failed "
        "or cancelled."
    )
    error: str | None = Field(description="Why the run failed, when it did.")
    item_count: int = Field(description="Frozen prompts in the run.")
    counts: ItemCounts = Field(description="Items by status.")
    created_at: datetime = Field(description="Created (UTC).")
    started_at: datetime | None = Field(description="First capture, or the push start (UTC).")
    completed_at: datetime | None = Field(description="Finished or cancelled (UTC).")
    waiting_for: RunWaiting | None = Field(
        description="Why an unfinished run is not progressing right now; null while a worker "
        "works on it, and once the run has ended."
    )
    imported: dict[str, Any] | None = Field(
        default=None,
        description="An imported run's source (tool, toolVersion, runId, task, sha256, "
        "createdAt, repeats) and `unknown`: each field its format cannot express, with the "
        "reason; null on a run Neens or your runner drove.",
    )


class PreprodList(ResponseBody):
    runs: list[PreprodOut] = Field(description="Newest first.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` (with the same filters) for the next page; null on the last."
    )


class ImportedTrialOut(BaseModel):
    """One repeat of an imported item, as the tool recorded it."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    trial: int
    """The repeat index, from 0."""
    output: str | None
    """The answer recorded."""
    score: float | None
    """The score from 0 to 1; null when the tool gave none."""
    passed: bool | None
    """The tool's verdict; null when it gave none."""
    error: str | None
    """Why the repeat failed to run."""
    cost_usd: float | None
    """null when the tool records no cost: unknown, not free."""
    latency_ms: float | None
    """null when not recorded."""


class PreprodItemOut(BaseModel):
    """One frozen prompt, in the snake_case shape the correlation contract documents."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    item_id: str = Field(
        description=f"The dataset item id: tag traces with it as `{DATASET_ITEM_ID_KEY}`."
    )
    position: int
    """0-based frozen order."""
    input: str
    """The golden prompt to run."""
    expected_output: str | None
    """The reference answer, or null."""
    status: str
    """pending, captured, scored or error."""
    session_id: str | None
    """The captured session (trace id), or null."""
    score: float | None
    """Mean of the judges' scores; null until scored."""
    passed: bool | None
    """Score ≥ 0.7; null until scored."""
    baseline_passed: bool | None
    """The baseline's verdict; null when the baseline has none."""
    error: str | None
    """Why the item errored."""
    output: str | None = None
    """An imported item's recorded answer (its first repeat's); null on a driven run, whose
    answer is in its session."""
    trials: list[ImportedTrialOut] | None = None
    """An imported item's result per repeat; null on a driven run. The item passed when every
    repeat that gave a verdict passed (a repeat that errored counts as failed), and its score is
    the repeats' mean."""


class PreprodItemList(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    items: list[PreprodItemOut]
    """The frozen prompts, in order."""
    next_cursor: str | None
    """Pass as `cursor` for the next page; null on the last page, and when `limit` was not
    given (every item is then in `items`)."""


class ItemErrorIn(RequestBody):
    reason: StorableStr = Field(min_length=1, max_length=10_000)
    """Why the item could not be run, e.g. `agent command exited with status 1`."""
