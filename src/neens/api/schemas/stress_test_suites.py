"""Bodies of the stress-test suite routes: camelCase both ways."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from neens.api.schemas.base import NameStr, ResponseBody
from neens.api.schemas.failure_modes import CamelRequest


class SuiteCreate(CamelRequest):
    name: NameStr = Field(min_length=1, max_length=200)
    """The suite's name; also the new dataset's, unless `datasetId` is given."""
    failure_mode_ids: list[str] = Field(min_length=1, max_length=200)
    """The failure modes whose confirmed sessions become the suite's items."""
    dataset_id: str | None = Field(default=None, min_length=1, max_length=200)
    """Add the suite as the next (golden) version of this dataset instead of a new one."""


class SkippedSessionOut(ResponseBody):
    session_id: str = Field(description="A session confirmed in one of the modes.")
    reason: str = Field(description="Why it could not become an item.")


class SuiteOut(ResponseBody):
    id: str = Field(description="Suite id, `sts_…`.")
    name: str = Field(description="The suite's name.")
    failure_mode_ids: list[str] = Field(description="The failure modes it was built from.")
    dataset_id: str = Field(description="The dataset holding the suite's version.")
    dataset_version_id: str = Field(
        description="The frozen version: one item per confirmed session. Sweeps given this "
        "suite's id replay exactly this version."
    )
    item_count: int = Field(description="How many items the version holds.")
    skipped_sessions: list[SkippedSessionOut] = Field(
        description="Confirmed sessions left out, each with why (none is dropped silently)."
    )
    created_at: datetime = Field(description="When the suite was built (UTC).")
