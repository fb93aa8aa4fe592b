"""Bodies of the failure-mode routes: camelCase both ways."""

from __future__ import annotations

from datetime import datetime

from pydantic import ConfigDict, Field, StrictBool
from pydantic.alias_generators import to_camel

from neens.api.schemas.base import NameStr, RequestBody, ResponseBody, StorableStr


class CamelRequest(RequestBody):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, alias_generator=to_camel
    )


class FailureModeCreate(CamelRequest):
    name: NameStr = Field(min_length=1, max_length=200)
    """Unique in the project; a classifier judge's label resolves to this mode when it equals
    the name exactly (case-sensitive)."""
    description: StorableStr | None = Field(default=None, max_length=10_000)
    """What the mode looks like, for the people who annotate sessions."""


class FailureModeOut(ResponseBody):
    id: str = Field(description="Failure mode id, `fm_…`.")
    name: str = Field(description="The name, unique in the project; the label it resolves.")
    description: str | None = Field(description="What the mode looks like, or null.")
    confirmed_sessions: int = Field(
        description="How many sessions a person has confirmed in this mode now."
    )
    created_at: datetime = Field(description="When the mode was created (UTC).")


class FailureModeList(ResponseBody):
    failure_modes: list[FailureModeOut] = Field(description="Modes, oldest first.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` to read the next page; null on the last page."
    )


class AnnotationIn(CamelRequest):
    failure_mode_id: str = Field(min_length=1, max_length=200)
    """The failure mode, `fm_…`."""
    confirmed: StrictBool
    """true: the session shows this mode; false: a person checked and it does not."""
    note: StorableStr | None = Field(default=None, max_length=10_000)
    """Why, in the annotator's words."""
    expected_output: StorableStr | None = None
    """The answer the agent should have given; a stress-test suite built from this session
    uses it as the item's expected output (null otherwise)."""


class AnnotationOut(ResponseBody):
    session_id: str = Field(description="The annotated session.")
    failure_mode_id: str = Field(description="The failure mode, `fm_…`.")
    failure_mode: str = Field(description="The failure mode's name.")
    confirmed: bool = Field(description="Whether the session shows the mode.")
    note: str | None = Field(description="The annotator's note, or null.")
    expected_output: str | None = Field(description="The answer the agent should have given.")
    created_at: datetime = Field(description="When the session was first annotated in this mode.")
    updated_at: datetime = Field(description="When the current annotation was given.")


class AnnotationList(ResponseBody):
    annotations: list[AnnotationOut] = Field(
        description="The session's annotations, one per failure mode, in the taxonomy's order."
    )
