"""What ingest's driver-level INSERTs share (`store.span_rows`, `store.session_rows`).

Ingest writes its rows as tuples handed to the driver, holding exactly what SQLAlchemy's
column types would have bound: datetimes in UTC, as SQLAlchemy's text on SQLite. Rows that
must say which of them were inserted (`RETURNING`) go in multi-row INSERTs (`INSERT ... VALUES
(...), (...), ... RETURNING`), in chunks whose sizes are powers of two, so a handful of
statement texts serve every batch (each database caches a prepared statement by its text).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Final

MAX_BOUND_VALUES: Final = 32_766 if sqlite3.sqlite_version_info >= (3, 32) else 999
"""The most values one statement binds here: SQLite's default limit since 3.32, 999 before
(PostgreSQL takes 65,535)."""


def _utc(value: datetime) -> datetime:
    """As `store.types.UtcDateTime` binds it: in UTC, a naive datetime refused."""
    if value.tzinfo is None:
        raise ValueError("naive datetime given to a UTC column")
    return value if value.tzinfo is UTC else value.astimezone(UTC)


_SQLITE_TIME: Final = "%04d-%02d-%02d %02d:%02d:%02d.%06d"
"""SQLAlchemy's SQLite DATETIME storage format."""


def sqlite_time(value: datetime | None) -> str | None:
    """The text SQLAlchemy's SQLite DATETIME stores for the UTC time (`UtcDateTime`)."""
    if value is None:
        return None
    v = _utc(value)
    return _SQLITE_TIME % (v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond)


def postgres_time(value: datetime | None) -> datetime | None:
    return None if value is None else _utc(value)


def chunks(rows: Sequence[tuple[Any, ...]], width: int) -> Iterator[Sequence[tuple[Any, ...]]]:
    """`rows` (of `width` values each) in consecutive chunks whose sizes are powers of two, as
    large as one statement may bind: 700 rows go as 512, 128, 32, 16, 8 and 4."""
    largest = 1 << ((MAX_BOUND_VALUES // width).bit_length() - 1)
    start = 0
    while start < len(rows):
        size = min(largest, 1 << ((len(rows) - start).bit_length() - 1))
        yield rows[start : start + size]
        start += size


def flat(rows: Sequence[tuple[Any, ...]]) -> tuple[Any, ...]:
    """The values of `rows`, one after another, as a multi-row INSERT binds them."""
    return tuple(value for row in rows for value in row)


def values_clause(marks: Sequence[str], rows: int) -> str:
    """`VALUES (marks), (marks), ...` for `rows` rows."""
    one = "(" + ", ".join(marks) + ")"
    return "VALUES " + ", ".join([one] * rows)
