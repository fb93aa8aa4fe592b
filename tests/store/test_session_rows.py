"""The new-sessions INSERT stores what SQLAlchemy's typed INSERT stored, on both databases, and
returns the key of exactly the rows it created."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest
from sqlalchemy import Connection, Table, insert, select
from sqlalchemy.exc import DataError
from sqlalchemy.ext.asyncio import AsyncSession

from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import TraceSession
from neens.store.session_rows import COLUMNS, insert_new_sessions, session_row

_SESSIONS = cast(Table, TraceSession.__table__)
_IST = timezone(timedelta(hours=5, minutes=30))
_JSONISH = {"models", "unpriced", "warnings"}


def _values(project_id: str, trace_id: str, n: int) -> dict[str, Any]:
    """A session's values with every kind of value the columns hold, varied by `n`."""
    return {
        "project_id": project_id,
        "trace_id": trace_id,
        "source": ["otlp", "native", "push"][n % 3],
        "agent_name": ["refund-agent", None, "agent ✓ ü"][n % 3],
        "input": [None, "Where is order 17? ☕ 😀 \u2028 del\x7f", "plain"][n % 3],
        "input_span_id": ["root", None, None][n % 3],
        "input_key": ["input.value", None, None][n % 3],
        "output": ["It shipped — yesterday", None, '{"quote": "\\"", "nl": "\\n"}'][n % 3],
        "output_span_id": None,
        "output_key": None,
        "models": [["gpt-4o", "claude-sonnet-4"], [], ["modèle ✓"]][n % 3],
        "input_tokens": [1000, None, 2**63 - 1][n % 3],
        "output_tokens": [200, None, 0][n % 3],
        # Four long, so one batch mixes ints and floats in a float column.
        "latency_ms": [900.5, None, 1e-7, 7][n % 4],
        "step_count": n,
        "span_count": n + 1,
        "cost_usd": [0.0123456789012345, None, 1e23, 0][n % 4],
        "cost_status": ["complete", "no_llm_calls", "partial"][n % 3],
        "unpriced": [[], [], ["modèle ✓"]][n % 3],
        "status": ["ok", "error", "ok"][n % 3],
        "started_at": [
            datetime(2026, 11, 30, 13, 30, 0, 5, tzinfo=_IST),
            None,
            datetime(1970, 1, 1, tzinfo=UTC),
        ][n % 3],
        "ended_at": [datetime(2026, 11, 30, 8, 0, 1, 999999, tzinfo=UTC), None, None][n % 3],
        "eval_run_id": ["ppr_01", None, None][n % 3],
        "dataset_item_id": ["item ✓", None, None][n % 3],
        "version_label": ["v2", None, None][n % 3],
        "warnings": [[], [{"code": "parent_cycle", "message": "span ‘a’ ↔ ‘b’"}], []][n % 3],
        "created_at": datetime(2026, 11, 30, 8, 0, tzinfo=timezone(timedelta(hours=-8))),
        "updated_at": datetime(2026, 12, 1, 0, 0, 0, 1, tzinfo=UTC),
    }


def _raw(conn: Connection, trace_ids: list[str]) -> list[tuple[Any, ...]]:
    """The stored values with no type processing (JSON as jsonb's text on PostgreSQL), each row
    without its trace id, in `trace_ids` order."""
    postgres = conn.dialect.name == "postgresql"
    columns = [f"{c}::text" if postgres and c in _JSONISH else c for c in COLUMNS]
    rows = {
        row[1]: tuple(row[:1]) + tuple(row[2:])
        for row in conn.exec_driver_sql(f"SELECT {', '.join(columns)} FROM sessions")
    }
    return [rows[t] for t in trace_ids]


async def _stored(s: AsyncSession, project_id: str) -> dict[str, TraceSession]:
    query = select(TraceSession).where(TraceSession.project_id == project_id)
    return {row.trace_id: row for row in await s.scalars(query)}


async def test_sessions_are_stored_as_the_typed_insert_stored_them(
    db: Database, ingest_key: CreatedKey, dialect: str
) -> None:
    project = ingest_key.project_id
    typed_ids = [f"typed-{n}" for n in range(6)]
    driver_ids = [f"driver-{n}" for n in range(6)]

    def write(conn: Connection) -> dict[tuple[str, str], int]:
        conn.execute(insert(_SESSIONS), [_values(project, t, n) for n, t in enumerate(typed_ids)])
        rows = [session_row(dialect, _values(project, t, n)) for n, t in enumerate(driver_ids)]
        return insert_new_sessions(conn, rows)

    pks = await db.run_write(write)
    assert set(pks) == {(project, t) for t in driver_ids}
    async with db.read() as s:
        conn = await s.connection()
        typed_raw = await conn.run_sync(_raw, typed_ids)
        driver_raw = await conn.run_sync(_raw, driver_ids)
        orm = await _stored(s, project)
    assert driver_raw == typed_raw
    for n, (typed_id, driver_id) in enumerate(zip(typed_ids, driver_ids, strict=True)):
        typed, driver = orm[typed_id], orm[driver_id]
        assert pks[(project, driver_id)] == driver.pk
        for column in COLUMNS[2:]:
            if column not in ("input", "output"):
                assert getattr(driver, column) == getattr(typed, column), column
        assert driver.input_text == typed.input_text == _values(project, "", n)["input"]
        assert driver.started_at == _values(project, "", n)["started_at"]
    assert orm["driver-0"].created_at == datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
    if dialect == "sqlite":
        stamp = driver_raw[0][COLUMNS.index("created_at") - 1]
        assert stamp == "2026-11-30 16:00:00.000000"


@pytest.mark.parametrize("count", [1, 7, 513, 700])
async def test_only_the_new_rows_are_inserted_and_returned_in_any_batch_size(
    db: Database, ingest_key: CreatedKey, dialect: str, count: int
) -> None:
    project = ingest_key.project_id
    existing = [f"t{n}" for n in range(0, count, 3)]  # every third trace is stored already

    def first(conn: Connection) -> dict[tuple[str, str], int]:
        return insert_new_sessions(
            conn, [session_row(dialect, _values(project, t, 1)) for t in existing]
        )

    def second(conn: Connection) -> dict[tuple[str, str], int]:
        rows = [session_row(dialect, _values(project, f"t{n}", n)) for n in range(count)]
        return insert_new_sessions(conn, rows)

    before = await db.run_write(first)
    after = await db.run_write(second)
    assert set(before) == {(project, t) for t in existing}
    assert set(after) == {(project, f"t{n}") for n in range(count)} - set(before)
    assert not set(after.values()) & set(before.values())
    async with db.read() as s:
        stored = await _stored(s, project)
    assert len(stored) == count
    assert {stored[t].pk for _, t in after} == set(after.values())
    assert all(stored[t].span_count == 2 for t in existing)  # kept as first written


async def test_a_naive_datetime_is_refused_as_by_the_typed_column(db: Database) -> None:
    values = _values("p", "t", 0) | {"created_at": datetime(2026, 1, 1)}  # noqa: DTZ001
    with pytest.raises(ValueError, match="naive datetime"):
        session_row(db.dialect, values)


async def test_a_value_over_its_columns_length_is_refused_or_kept_whole_never_cut(
    db: Database, ingest_key: CreatedKey, dialect: str
) -> None:
    """PostgreSQL refuses a `varchar(500)` value of 501 characters (a `DataError`, which ingest
    turns into that trace's rejection); SQLite keeps it whole. Neither stores it cut short, as a
    cast of the bound array to `varchar(500)[]` would."""
    project = ingest_key.project_id
    long_name = "a" * 500 + "b"
    values = _values(project, "long-agent", 0) | {"agent_name": long_name}

    def write(conn: Connection) -> dict[tuple[str, str], int]:
        return insert_new_sessions(conn, [session_row(dialect, values)])

    if dialect == "postgresql":
        with pytest.raises(DataError, match="too long"):
            await db.run_write(write)
        async with db.read() as s:
            assert await _stored(s, project) == {}
    else:
        await db.run_write(write)
        async with db.read() as s:
            assert (await _stored(s, project))["long-agent"].agent_name == long_name
