"""Base classes for request and response bodies."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from neens.domain.storable import unstorable_text_reason


class RequestBody(BaseModel):
    """A request body: unknown fields are refused, so a typo never silently drops data."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ResponseBody(BaseModel):
    """A response body: camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True
    )


def _storable(value: Any) -> Any:
    reason = unstorable_text_reason(value)
    if reason is not None:
        raise ValueError(reason)
    return value


StorableStr = Annotated[str, AfterValidator(_storable)]
"""Text that both databases can store exactly (no NUL characters, no lone surrogates)."""

StorableJson = Annotated[dict[str, Any], AfterValidator(_storable)]
