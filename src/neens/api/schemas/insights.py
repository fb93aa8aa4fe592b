"""Bodies of the insight and notification-sink routes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field, HttpUrl

from neens.api.schemas.base import NameStr, RequestBody, ResponseBody
from neens.api.schemas.headers import Headers


class InsightOut(ResponseBody):
    id: str = Field(description="Insight id, `ins_…`.")
    kind: str = Field(description="What happened, e.g. `preprod_regression`.")
    title: str = Field(description="One line for a feed.")
    run_id: str | None = Field(description="The run it is about.")
    details: dict[str, Any] = Field(description="The facts behind it.")
    created_at: datetime = Field(description="When it was raised (UTC).")


class InsightList(ResponseBody):
    insights: list[InsightOut] = Field(description="Newest first.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` (with the same filters) for the next page; null on the last."
    )


class SinkCreate(RequestBody):
    name: NameStr = Field(min_length=1, max_length=200)
    """A name unique within the project (`409` when it is taken)."""
    url: HttpUrl
    """The webhook insights are POSTed to as JSON."""
    headers: Headers = Field(default_factory=dict)
    """Headers sent with each delivery (e.g. a token). Stored encrypted, never returned."""


class SinkOut(ResponseBody):
    id: str = Field(description="Sink id, `sink_…`.")
    name: str = Field(description="The sink's name.")
    url: str = Field(description="The webhook URL.")
    header_names: list[str] = Field(description="Names of the stored headers.")
    created_at: datetime = Field(description="Created (UTC).")


class SinkList(ResponseBody):
    notification_sinks: list[SinkOut] = Field(description="Sinks, oldest first.")


class DeliveryOut(ResponseBody):
    insight_id: str = Field(description="The insight delivered.")
    status: str = Field(description="pending, delivered or failed.")
    attempts: int = Field(description="Attempts made.")
    last_status_code: int | None = Field(description="The sink's last HTTP status.")
    last_error: str | None = Field(description="Why the last attempt failed.")
    delivered_at: datetime | None = Field(description="When it was delivered (UTC).")


class DeliveryList(ResponseBody):
    deliveries: list[DeliveryOut] = Field(description="Oldest first.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last."
    )
