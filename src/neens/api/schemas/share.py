"""Bodies of the share-link routes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field, StrictBool, StrictInt
from pydantic.alias_generators import to_camel

from neens.api.schemas.base import RequestBody, ResponseBody


class _CamelRequest(RequestBody):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, alias_generator=to_camel
    )


class ShareSettingsIn(_CamelRequest):
    enabled: StrictBool
    """Whether this agent's results may be shared by public link."""


class ShareSettingsOut(ResponseBody):
    enabled: bool = Field(description="Whether results may be shared by public link.")


class ShareLinkIn(_CamelRequest):
    resource_type: Literal["sweep_decision"]
    """What is shared: `sweep_decision`, the comparison of a model sweep."""
    resource_id: str = Field(min_length=1, max_length=200)
    """The sweep, `msw-…`."""
    ttl_hours: StrictInt = Field(default=168, ge=1, le=8760)
    """How long the link works, in hours (default a week, at most a year)."""


class ShareLinkOut(ResponseBody):
    id: str = Field(description="Link id, `shl_…` (to list and revoke it).")
    resource_type: str = Field(description="What it shows.")
    resource_id: str = Field(description="Which one.")
    url: str | None = Field(
        description="The public URL; only in the answer that made the link (it is not stored)."
    )
    created_at: datetime = Field(description="Made (UTC).")
    expires_at: datetime = Field(description="Stops working (UTC).")
    revoked_at: datetime | None = Field(description="Revoked (UTC), if it was.")


class ShareLinkList(ResponseBody):
    links: list[ShareLinkOut] = Field(description="Newest first, expired and revoked included.")
