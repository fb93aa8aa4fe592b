"""The span INSERT of ingest, through the driver: its own `executemany` on SQLite, one INSERT
of a batch's spans as arrays on PostgreSQL (`store.driver_rows`).

Ingest writes every span it accepts, and SQLAlchemy's per-row bind processing (a JSON encoder
per JSON column, a formatter and a type decorator per datetime, a processor lookup per value)
cost more than the database's own work. The rows here are tuples holding exactly what those
processors produce for the `spans` table: `json.dumps`'s text for the JSON columns, and for
datetimes UTC as `YYYY-MM-DD HH:MM:SS.ffffff` text on SQLite (SQLAlchemy's storage format) or
UTC-aware datetimes on PostgreSQL. So a span reads back the same whichever path wrote it;
tests/store/test_span_rows.py writes the same spans both ways and compares the stored rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, cast

from sqlalchemy import Connection, Table

from neens.domain.spans import SpanRecord
from neens.store.driver_rows import array_insert, postgres_time, sqlite_time
from neens.store.models import Span
from neens.store.types import json_dumps

COLUMNS: Final = (
    "session_pk",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "start_time",
    "end_time",
    "status_code",
    "status_message",
    "attributes",
    "resource_attributes",
    "events",
    "scope_name",
    "input",
    "output",
    "agent_name",
    "model",
)
"""The columns each row gives, in its order (every column of `spans` but the key)."""

SpanRow = tuple[Any, ...]


_CONFLICT: Final = "ON CONFLICT (session_pk, span_id) DO NOTHING"
"""A span already stored (same session and span id) is kept as first received, as with
`ON CONFLICT DO NOTHING` in `store.sessions`."""
_SQLITE_SQL: Final = (
    f"INSERT INTO spans ({', '.join(COLUMNS)}) VALUES ({', '.join(['?'] * len(COLUMNS))}) "
    + _CONFLICT
)
_POSTGRES_INSERT: Final = array_insert(cast(Table, Span.__table__), COLUMNS, _CONFLICT)


_dumps = json_dumps
"""The JSON columns' own serializer (`json_serializer` on every engine)."""

_NOT_ASCII: Final = re.compile("[\x7f-\U0010ffff]")
"""What `json.dumps` escapes beyond what an `ensure_ascii=False` encoder does (DEL too)."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def as_dumps(text: str) -> str:
    """JSON text from an `ensure_ascii=False` encoder as `json.dumps` writes it.

    The two differ only inside strings, where `json.dumps` escapes every character past `~`
    as `\\uXXXX` (a surrogate pair beyond the BMP), in lower-case hex; a NaN or a lone
    surrogate never gets here (the storability check refuses them).
    """
    if text.isascii() and "\x7f" not in text:
        return text
    return _NOT_ASCII.sub(_escape, text)


def span_row(dialect: str, session_pk: int, record: SpanRecord, model: str | None) -> SpanRow:
    """One span's row for `insert_spans`, its values in `COLUMNS` order.

    The JSON columns reuse the text the storability check encoded when the record has it:
    as is on PostgreSQL (jsonb parses it into the same value), as `json.dumps` would have
    written it on SQLite, which stores the text itself.
    """
    postgres = dialect == "postgresql"
    time = postgres_time if postgres else sqlite_time
    encoded = record.json_text()
    if encoded is None:
        attributes = _dumps(record.attributes)
        resource_attributes = _dumps(record.resource_attributes)
        events = _dumps(record.events)
    elif postgres:
        attributes = encoded.attributes
        resource_attributes = encoded.resource_attributes
        events = encoded.events
    else:
        attributes = as_dumps(encoded.attributes)
        resource_attributes = as_dumps(encoded.resource_attributes)
        events = as_dumps(encoded.events)
    return (
        session_pk,
        record.span_id,
        record.parent_span_id,
        record.name,
        record.kind,
        time(record.start_time),
        time(record.end_time),
        record.status_code,
        record.status_message,
        attributes,
        resource_attributes,
        events,
        record.scope_name,
        record.input,
        record.output,
        record.agent_name,
        model,
    )


def insert_spans(conn: Connection, rows: Sequence[SpanRow]) -> None:
    """Insert rows made by `span_row` for this connection's dialect: in one `executemany` on
    SQLite, in one statement binding a column per array on PostgreSQL (`store.driver_rows`).

    Through `exec_driver_sql`, so a value the database refuses still raises SQLAlchemy's
    `DataError` (which ingest turns into per-trace rejections).
    """
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(_POSTGRES_INSERT.sql, _POSTGRES_INSERT.bind(rows))
    else:
        conn.exec_driver_sql(_SQLITE_SQL, list(rows))
