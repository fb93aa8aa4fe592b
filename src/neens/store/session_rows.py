"""The INSERT of the sessions ingest sees for the first time, through the driver.

Most traces arrive in one request, so nearly every ingest batch creates its sessions' rows.
Through SQLAlchemy's typed INSERT, binding a row (29 values, a processor for each datetime and
JSON column) cost as much as the span rows of its trace; here, as for spans (`store.span_rows`),
a row is a tuple holding exactly what those processors would have produced, and the rows go in
INSERTs (`store.driver_rows`) that return the keys of the rows they created.

A row whose (project, trace) already exists is skipped (`ON CONFLICT DO NOTHING`) and returns
nothing, which is how the caller tells new traces from ones it has to merge into.
tests/store/test_session_rows.py writes the same sessions both ways and compares the rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from sqlalchemy import Connection, Table

from neens.store.driver_rows import (
    array_insert,
    chunks,
    flat,
    postgres_time,
    sqlite_time,
    values_clause,
)
from neens.store.models import TraceSession
from neens.store.types import json_dumps

SUMMARY_COLUMNS: Final = (
    "agent_name",
    "input",
    "input_span_id",
    "input_key",
    "output",
    "output_span_id",
    "output_key",
    "models",
    "input_tokens",
    "output_tokens",
    "latency_ms",
    "step_count",
    "span_count",
    "cost_usd",
    "cost_status",
    "unpriced",
    "status",
    "started_at",
    "ended_at",
    "eval_run_id",
    "dataset_item_id",
    "version_label",
    "warnings",
    "updated_at",
)
"""The columns a summary fills (`store.sessions._summary_values`'s keys)."""
COLUMNS: Final = ("project_id", "trace_id", "source", *SUMMARY_COLUMNS, "created_at")
_JSON_COLUMNS: Final = frozenset({"models", "unpriced", "warnings"})
_TIME_COLUMNS: Final = frozenset({"started_at", "ended_at", "updated_at", "created_at"})
_JSON_AT: Final = tuple(i for i, c in enumerate(COLUMNS) if c in _JSON_COLUMNS)
_TIME_AT: Final = tuple(i for i, c in enumerate(COLUMNS) if c in _TIME_COLUMNS)

SessionKey = tuple[str, str]
"""(project id, trace id)."""
SessionRow = tuple[Any, ...]


def session_row(dialect: str, values: Mapping[str, Any]) -> SessionRow:
    """One new session's row, its values in `COLUMNS` order, as SQLAlchemy's types would have
    bound them: JSON as `json.dumps`'s text; datetimes in UTC, as text on SQLite."""
    time = postgres_time if dialect == "postgresql" else sqlite_time
    row: list[Any] = [values[c] for c in COLUMNS]
    for i in _JSON_AT:
        row[i] = json_dumps(row[i])
    for i in _TIME_AT:
        row[i] = time(row[i])
    return tuple(row)


def insert_new_sessions(conn: Connection, rows: Sequence[SessionRow]) -> dict[SessionKey, int]:
    """Insert the rows whose (project, trace) is not stored yet (`store.driver_rows`: one
    statement on PostgreSQL, multi-row INSERTs on SQLite); returns the pk of each row
    inserted, by its key."""
    if not rows:
        return {}
    if conn.dialect.name == "postgresql":
        statements = [(_POSTGRES_INSERT.sql, _POSTGRES_INSERT.bind(rows))]
    else:
        statements = [(_sqlite_sql(len(c)), flat(c)) for c in chunks(rows, len(COLUMNS))]
    pks: dict[SessionKey, int] = {}
    for sql, values in statements:
        # Read each statement's rows before the next runs: SQLite inserts a RETURNING row as
        # it is fetched.
        result = conn.exec_driver_sql(sql, values)
        pks.update({(project_id, trace_id): pk for pk, project_id, trace_id in result})
    return pks


_SUFFIX: Final = "ON CONFLICT (project_id, trace_id) DO NOTHING RETURNING pk, project_id, trace_id"
_POSTGRES_INSERT: Final = array_insert(cast(Table, TraceSession.__table__), COLUMNS, _SUFFIX)
_statements: dict[int, str] = {}


def _sqlite_sql(rows: int) -> str:
    if rows not in _statements:
        marks = ", ".join(["?"] * len(COLUMNS))
        _statements[rows] = (
            f"INSERT INTO sessions ({', '.join(COLUMNS)}) {values_clause([marks], rows)} {_SUFFIX}"
        )
    return _statements[rows]
