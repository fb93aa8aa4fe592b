"""Column types shared by every table, portable across SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Integer
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator

JsonType = JSON().with_variant(JSONB(), "postgresql")
"""JSON on SQLite, JSONB on PostgreSQL."""

BigIntPk = BigInteger().with_variant(Integer(), "sqlite")
"""64-bit keys on PostgreSQL; SQLite only auto-increments a plain INTEGER primary key."""


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both dialects.

    SQLite stores no offset, so values are normalised to UTC on the way in and marked UTC on the
    way out; a naive datetime is refused rather than silently assumed to be UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)
