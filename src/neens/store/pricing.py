"""A project's own model prices, which win over the genai-prices table."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.pricing import Price, PriceBook
from neens.store.db import Database, upsert_insert
from neens.store.models import ModelPrice
from neens.store.tenancy import owned_by
from neens.store.types import utcnow

PRICE_MEMO_SECONDS = 5.0
"""How long a server remembers a project's prices for ingest. A price set through this server
applies at once (and re-prices stored sessions); one set through another server within this
many seconds."""


def remembered_price_book(db: Database, project_id: str) -> PriceBook | None:
    """The project's prices if `price_book` read them in the last `PRICE_MEMO_SECONDS`."""
    remembered = db.memo_get("prices", project_id, ttl_s=PRICE_MEMO_SECONDS)
    assert remembered is None or isinstance(remembered, PriceBook)
    return remembered


async def price_book(s: AsyncSession, project_id: str, db: Database | None = None) -> PriceBook:
    """The project's prices; with `db`, remembered for a few seconds to spare ingest a query."""
    if db is not None and (remembered := remembered_price_book(db, project_id)) is not None:
        return remembered
    rows = await s.scalars(select(ModelPrice).where(owned_by(ModelPrice, project_id)))
    book = PriceBook({r.model: Price(r.input_per_mtok_usd, r.output_per_mtok_usd) for r in rows})
    if db is not None:
        db.memo_set("prices", project_id, book)
    return book


async def set_price(db: Database, project_id: str, model: str, price: Price) -> None:
    values = {
        "input_per_mtok_usd": price.input_per_mtok_usd,
        "output_per_mtok_usd": price.output_per_mtok_usd,
        "updated_at": utcnow(),
    }
    async with db.write() as s:
        await s.execute(
            upsert_insert(s, ModelPrice)
            .values(project_id=project_id, model=model, **values)
            .on_conflict_do_update(index_elements=["project_id", "model"], set_=values)
        )
    db.memo_forget("prices", project_id)


async def delete_price(db: Database, project_id: str, model: str) -> bool:
    """Remove an override; False when there was none."""
    async with db.write() as s:
        result = await s.execute(
            delete(ModelPrice).where(owned_by(ModelPrice, project_id), ModelPrice.model == model)
        )
    db.memo_forget("prices", project_id)
    return bool(getattr(result, "rowcount", 0))


async def list_prices(db: Database, project_id: str) -> dict[str, Price]:
    async with db.read() as s:
        rows = await s.scalars(
            select(ModelPrice).where(owned_by(ModelPrice, project_id)).order_by(ModelPrice.model)
        )
        return {r.model: Price(r.input_per_mtok_usd, r.output_per_mtok_usd) for r in rows}
