"""What ingest's driver-level INSERTs share (`store.span_rows`, `store.session_rows`).

Ingest writes its rows as tuples handed to the driver, holding exactly what SQLAlchemy's
column types would have bound: datetimes in UTC, as SQLAlchemy's text on SQLite. On SQLite, rows
that must say which of them were inserted (`RETURNING`) go in multi-row INSERTs (`INSERT ...
VALUES (...), (...), ... RETURNING`), in chunks whose sizes are powers of two, so a handful of
statement texts serve every batch (each database caches a prepared statement by its text).

On PostgreSQL every batch is one INSERT binding one array per column (`INSERT ... SELECT ...
FROM unnest(%b::text[], %b::bigint[], ...)`): its text is the same whatever the batch's size,
short enough for psycopg to convert its placeholders once and keep it (a multi-row VALUES of a
few dozen rows is over psycopg's 4 KB / 50 parameter limit for that, and converting it again
each time cost a tenth of ingest's CPU), and the server parses and plans one statement.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import Float, Table
from sqlalchemy.dialects import postgresql

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


@dataclass(frozen=True)
class ArrayInsert:
    """PostgreSQL's INSERT of some columns of a table from one array parameter per column
    (`array_insert`), and how to bind rows to it."""

    sql: str
    float_at: tuple[int, ...]
    """Columns of a floating-point type: their ints are bound as floats, as the column stores
    them, since psycopg refuses a list that mixes the two."""

    def bind(self, rows: Sequence[tuple[Any, ...]]) -> tuple[list[Any], ...]:
        """`rows` as one list per column."""
        columns = [list(column) for column in zip(*rows, strict=True)]
        for i in self.float_at:
            columns[i] = [value if value is None else float(value) for value in columns[i]]
        return tuple(columns)


def array_insert(table: Table, columns: Sequence[str], suffix: str) -> ArrayInsert:
    """The INSERT of `columns` of `table` from one array per column, then `suffix` (its ON
    CONFLICT and RETURNING clauses).

    Arrays are bound in binary (`%b`): psycopg writes a text array by escaping each value in
    Python, which for long texts cost more than all it saves. Text columns travel as `text[]`
    whatever their length limit: casting to `varchar(n)[]` would cut a value too long silently,
    while the INSERT's own conversion refuses it, as a row-by-row INSERT does. JSON columns
    travel as text and are cast to `jsonb` per value."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    arrays, selected, float_at = [], [], []
    for i, name in enumerate(columns):
        column_type = table.c[name].type
        compiled = column_type.compile(dialect=dialect)
        if compiled in ("JSON", "JSONB"):
            arrays.append("%b::text[]")
            selected.append(f"CAST({name} AS {compiled.lower()})")
            continue
        selected.append(name)
        if compiled == "TEXT" or compiled.startswith("VARCHAR"):
            arrays.append("%b::text[]")
        else:
            arrays.append(f"%b::{compiled.lower()}[]")
        if isinstance(column_type, Float):
            float_at.append(i)
    names = ", ".join(columns)
    return ArrayInsert(
        sql=(
            f"INSERT INTO {table.name} ({names}) SELECT {', '.join(selected)} "
            f"FROM unnest({', '.join(arrays)}) AS row_values ({names}) {suffix}"
        ),
        float_at=tuple(float_at),
    )


def values_clause(marks: Sequence[str], rows: int) -> str:
    """`VALUES (marks), (marks), ...` for `rows` rows."""
    one = "(" + ", ".join(marks) + ")"
    return "VALUES " + ", ".join([one] * rows)
