"""Bodies of the model-pricing routes."""

from __future__ import annotations

from pydantic import ConfigDict, Field, StrictFloat
from pydantic.alias_generators import to_camel

from neens.api.schemas.base import RequestBody, ResponseBody


class PriceIn(RequestBody):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, alias_generator=to_camel
    )

    input_per_m_tok_usd: StrictFloat = Field(ge=0, alias="inputPerMTokUsd", allow_inf_nan=False)
    """USD per million prompt tokens."""
    output_per_m_tok_usd: StrictFloat = Field(ge=0, alias="outputPerMTokUsd", allow_inf_nan=False)
    """USD per million completion tokens."""


class PriceOut(ResponseBody):
    model: str = Field(description="The model name as spans report it.")
    input_per_m_tok_usd: float = Field(
        alias="inputPerMTokUsd", description="USD per 1M prompt tokens."
    )
    output_per_m_tok_usd: float = Field(
        alias="outputPerMTokUsd", description="USD per 1M completion tokens."
    )
    source: str = Field(description='"override" (this project\'s price) or "genai-prices".')


class PriceSet(PriceOut):
    repriced_sessions: int = Field(description="Stored sessions re-priced with the new price.")


class PriceList(ResponseBody):
    prices: list[PriceOut] = Field(description="This project's overrides, by model name.")
