"""`/model-pricing`: a project's own model prices, which win over the genai-prices table.

Setting or removing a price re-prices the stored sessions that used the model, so a session that
was unpriced for want of a price becomes priced once one is given.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from fastapi import APIRouter, Request, Response

from neens.api.deps import AdminKey, AnyKey, DbDep
from neens.api.schemas.pricing import PriceIn, PriceList, PriceOut, PriceSet
from neens.domain.conventions import MAX_NAME_CHARS
from neens.domain.pricing import Price
from neens.errors import NotFound, Unprocessable
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


def checked_model(request: Request, model: str) -> str:
    """`model` from the path, if it can name a model a span reports; else 422 naming `model`.

    Refused: an empty or blank name; one longer than the longest model name Neens stores
    (`MAX_NAME_CHARS`: a span's longer model is ignored, so its price could never apply, and
    PostgreSQL would refuse to store it); and one whose percent-encoding is not UTF-8, which the
    router has already decoded with U+FFFD in place of the bad bytes (`%FF` would otherwise set
    the price of "\ufffd", the model `%EF%BF%BD` names). Only the raw path tells these apart.
    """
    raw_path: bytes = request.scope.get("raw_path") or b""
    try:
        unquote_to_bytes(raw_path.split(b"?", 1)[0]).decode("utf-8")
    except UnicodeDecodeError:
        raise Unprocessable(
            "model is not valid UTF-8 once percent-decoded, so it is text no database can "
            "store exactly: percent-encode the UTF-8 bytes of the model's name",
            field="model",
        ) from None
    if not model.strip():
        raise Unprocessable(
            "model is empty: give the model's name as spans report it, "
            "e.g. PUT /model-pricing/gpt-4o",
            field="model",
        )
    if len(model) > MAX_NAME_CHARS:
        raise Unprocessable(
            f"model is {len(model)} characters long; model names are at most "
            f"{MAX_NAME_CHARS} characters (a span's longer model name is not kept, so a price "
            "for it could never apply)",
            field="model",
        )
    return model


@router.put("/{model:path}", operation_id="model_pricing-set")
async def set_price(
    request: Request, model: str, body: PriceIn, principal: AdminKey, db: DbDep
) -> PriceSet:
    """Set this project's price for `model` (admin keys only)."""
    model = checked_model(request, model)
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
async def delete_price(request: Request, model: str, principal: AdminKey, db: DbDep) -> Response:
    """Remove this project's price for `model`; the genai-prices table applies again."""
    model = checked_model(request, model)
    if not await pricing.delete_price(db, principal.project_id, model):
        raise NotFound(f"this project has no price override for {model!r}", field="model")
    await reprice_model(db, principal.project_id, model)
    return Response(status_code=204)
