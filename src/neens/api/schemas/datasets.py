"""Bodies of the dataset routes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field, StrictBool

from neens.api.schemas.base import NameStr, RequestBody, ResponseBody, StorableJson, StorableStr


class DatasetCreate(RequestBody):
    name: NameStr = Field(min_length=1, max_length=200)
    """The dataset's name, unique within the project."""


class DatasetItemIn(RequestBody):
    input: StorableStr
    """The frozen prompt the candidate is asked to run."""
    expected_output: StorableStr | None = None
    """The reference answer, when there is one."""
    metadata: StorableJson = Field(default_factory=dict)
    """Free-form data kept with the item (tags, source, ticket id)."""


class VersionCreate(RequestBody):
    items: list[DatasetItemIn] = Field(min_length=1)
    """The items of the new version, in the order runs will replay them."""
    golden: StrictBool = False
    """Mark the new version as the dataset's golden (reference) version."""


class DatasetOut(ResponseBody):
    id: str = Field(description="Dataset id, `ds_…`.")
    name: str = Field(description="Name, unique within the project.")
    created_at: datetime = Field(description="When the dataset was created (UTC).")
    golden_version_id: str | None = Field(description="The golden version, or null when none.")
    latest_version_id: str | None = Field(description="The newest version, or null when none.")
    version_count: int = Field(description="How many versions the dataset has.")


class DatasetList(ResponseBody):
    datasets: list[DatasetOut] = Field(description="Datasets in creation order.")


class VersionOut(ResponseBody):
    id: str = Field(description="Version id, `dsv_…`.")
    dataset_id: str = Field(description="The dataset this version belongs to.")
    number: int = Field(description="1 for the first version, then 2, 3, …")
    item_count: int = Field(description="How many items the version holds.")
    golden: bool = Field(description="Whether this is the dataset's golden version now.")
    created_at: datetime = Field(description="When the version was created (UTC).")


class VersionList(ResponseBody):
    versions: list[VersionOut] = Field(description="Versions, oldest first.")


class ItemOut(ResponseBody):
    id: str = Field(description="Item id, `dsi_…`; the stable join key across runs.")
    position: int = Field(description="0-based position in the version's frozen order.")
    input: str = Field(description="The frozen prompt.")
    expected_output: str | None = Field(description="The reference answer, or null.")
    metadata: dict[str, Any] = Field(description="Free-form data stored with the item.")


class ItemList(ResponseBody):
    items: list[ItemOut] = Field(description="Items in frozen order.")
    next_offset: int | None = Field(
        description="Pass as `offset` to read the next page; null on the last page."
    )
    next_cursor: str | None = Field(
        description="Or pass this as `cursor` instead; null on the last page."
    )
