"""The body of `POST /preprod-evals/imports`: another tool's results on a golden dataset.

Snake_case, like the other pre-prod request bodies; the answer is the run (`PreprodOut`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictBool

from neens.api.schemas.base import NameStr, RequestBody, StorableStr

MAX_IMPORT_TRIALS = 1_000
"""Repeat indexes run from 0 below this. How many items and repeats a body holds is bounded by
the request size limit (NEENS_MAX_REQUEST_BYTES), as for a dataset version."""


class ImportSource(RequestBody):
    tool: StorableStr = Field(min_length=1, max_length=100)
    """The tool that ran the evaluation, e.g. `inspect_ai`, `promptfoo`, `mlflow`,
    `openai_evals`."""
    tool_version: StorableStr | None = Field(default=None, max_length=200)
    """The tool's version, when its file records one."""
    run_id: StorableStr | None = Field(default=None, max_length=500)
    """The tool's own id of the run, when it records one."""
    task: StorableStr | None = Field(default=None, max_length=500)
    """The task or eval name the tool ran."""
    sha256: str | None = Field(default=None, pattern="^[0-9a-f]{64}$")
    """The SHA-256 of the imported file, hex."""
    created_at: StorableStr | None = Field(default=None, max_length=100)
    """When the tool ran it, as the file records it (ISO 8601)."""
    unknown: dict[str, StorableStr] = Field(default_factory=dict, max_length=100)
    """What the format cannot express, field → reason (e.g. `cost_usd`: the tool records no
    cost). Those fields are null in the run, never 0."""
    warnings: list[StorableStr] = Field(default_factory=list, max_length=100)
    """What the import noticed and kept going on."""


class ImportTrialIn(RequestBody):
    trial: int = Field(ge=0, lt=MAX_IMPORT_TRIALS)
    """The repeat index, from 0."""
    output: StorableStr | None = None
    """The answer recorded for this repeat."""
    score: float | None = Field(default=None, ge=0, le=1)
    """The repeat's score from 0 to 1, when the tool gives one."""
    passed: StrictBool | None = None
    """The tool's pass/fail verdict, when it gives one."""
    error: StorableStr | None = Field(default=None, min_length=1, max_length=10_000)
    """Why the repeat failed to run, when it did."""
    cost_usd: float | None = Field(default=None, ge=0)
    """The repeat's cost; null when the tool does not record it (never 0 for unknown)."""
    latency_ms: float | None = Field(default=None, ge=0)
    """The repeat's latency; null when not recorded."""


class ImportItemIn(RequestBody):
    item_id: str = Field(min_length=1, max_length=40)
    """The dataset item, `dsi_…`, of the replayed version."""
    trials: list[ImportTrialIn] = Field(min_length=1)
    """One result per repeat the tool ran (one when it has no repeats)."""


class PreprodImportCreate(RequestBody):
    name: NameStr | None = Field(default=None, max_length=500)
    """A name for the run; defaults to the version label."""
    dataset_id: str
    """The golden dataset the results are for, `ds_…`."""
    dataset_version_id: str | None = None
    """Pin a version; default: the dataset's golden version. Every one of its items needs a
    result."""
    version_label: NameStr = Field(min_length=1, max_length=500)
    """What was evaluated, e.g. `promptfoo:gpt-4o-mini`."""
    model: NameStr | None = Field(default=None, max_length=500)
    """The model the tool evaluated, when it records one."""
    gate: dict[str, Any] | None = None
    """The gate policy, as for `POST /preprod-evals` (the cost thresholds fail when no cost was
    recorded)."""
    source: ImportSource
    """Where the results came from."""
    items: list[ImportItemIn] = Field(min_length=1)
    """One entry per item of the dataset version."""
