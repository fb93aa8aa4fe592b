"""`/model-pricing`: a project's own model prices, which win over the genai-prices table.

Setting or removing a price re-prices the stored sessions that used the model, so a session that
was unpriced for want of a price becomes priced once one is given.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from neens.api.deps import AdminKey, AnyKey, DbDep
from neens.api.schemas.pricing import PriceIn, PriceList, PriceOut, PriceSet
from neens.domain.pricing import Price
from neens.errors import NotFound
from neens.store import pricing
from neens.store.sessions import reprice_model

router = APIRouter(prefix="/model-pricing", tags=["model-pricing"])


@router.get("", operation_id="model_pricing-list")
async def list_prices(principal: AnyKey, db: DbDep) -> PriceList:
    prices = await pricing.list_prices(db, principal.project_id)
    return PriceList(
        prices=[
            PriceOut(
                model=model,
                input_per_m_tok_usd=p.input_per_mtok_usd,
                output_per_m_tok_usd=p.output_per_mtok_usd,
                source="override",
            )
            for model, p in prices.items()
        ]
    )


@router.put("/{model:path}", operation_id="model_pricing-set")
async def set_price(model: str, body: PriceIn, principal: AdminKey, db: DbDep) -> PriceSet:
    """Set this project's price for `model` (admin keys only)."""
    price = Price(body.input_per_m_tok_usd, body.output_per_m_tok_usd)
    await pricing.set_price(db, principal.project_id, model, price)
    repriced = await reprice_model(db, principal.project_id, model)
    return PriceSet(
        model=model,
        input_per_m_tok_usd=price.input_per_mtok_usd,
        output_per_m_tok_usd=price.output_per_mtok_usd,
        source="override",
        repriced_sessions=repriced,
    )


@router.delete("/{model:path}", status_code=204, operation_id="model_pricing-delete")
async def delete_price(model: str, principal: AdminKey, db: DbDep) -> Response:
    """Remove this project's price for `model`; the genai-prices table applies again."""
    if not await pricing.delete_price(db, principal.project_id, model):
        raise NotFound(f"this project has no price override for {model!r}", field="model")
    await reprice_model(db, principal.project_id, model)
    return Response(status_code=204)
