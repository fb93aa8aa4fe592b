"""The index of spans by model holds only spans that report one (migration 0021), and
re-pricing a model finds its spans through it instead of reading every span."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.dialects import sqlite

from neens.store.db import Database
from neens.store.sessions import sessions_reporting


async def test_re_pricing_reads_spans_through_the_partial_model_index(
    db: Database, dialect: str
) -> None:
    if dialect == "postgresql":
        async with db.read() as s:
            definition = await s.scalar(
                text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_spans_model'")
            )
        assert definition is not None and "WHERE (model IS NOT NULL)" in definition
        return
    query = sessions_reporting("GPT-4o").compile(
        dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}
    )
    async with db.read() as s:
        plan = (await s.execute(text(f"EXPLAIN QUERY PLAN {query}"))).all()
        definition = await s.scalar(
            text("SELECT sql FROM sqlite_master WHERE name = 'ix_spans_model'")
        )
    assert any("USING INDEX ix_spans_model" in row[-1] for row in plan), plan
    assert definition is not None and "WHERE model IS NOT NULL" in definition
