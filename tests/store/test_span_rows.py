"""The span INSERT stores what SQLAlchemy's typed INSERT stored, on both databases: the same
values, and JSON columns holding JSON text of the same value (on SQLite ASCII, as `json.dumps`
writes it, though not always with its spacing)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import orjson
import pytest
from sqlalchemy import Connection, Table, insert, select

from neens.domain.spans import SpanRecord
from neens.domain.storable import record_unstorable_reason
from neens.store.db import Database, dialect_insert
from neens.store.keys import CreatedKey
from neens.store.models import Span, TraceSession
from neens.store.span_rows import COLUMNS, as_dumps, insert_spans, span_row

_SPANS = cast(Table, Span.__table__)
_IST = timezone(timedelta(hours=5, minutes=30))


def _spans() -> list[SpanRecord]:
    """Spans with every kind of value the columns hold, some checked by the decoders' check
    (so carrying its JSON text) and some not."""
    resource = {"service.name": "agent", "deployment.environment": "prod"}
    values: list[dict[str, Any]] = [
        {"input.value": "plain ascii", "llm.token_count.prompt": 12},
        {"input.value": 'café ☕ 😀 \u2028 del\x7f tab\t nl\n quote" back\\ ctrl\x01', "k": "é"},
        {"nested": {"list": [1, 2.5, None, True, False, {"z": "ü"}], "empty": {}, "e": []}},
        {"floats": [1e23, -0.0, 1e-7, 0.1, 1.7976931348623157e308], "big": 2**62, "neg": -(2**63)},
        {"gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 5, "\U0001f600": "key"},
        {},
    ]
    times: list[tuple[datetime | None, datetime | None]] = [
        (
            datetime(2026, 11, 30, 8, 0, 0, 123456, tzinfo=UTC),
            datetime(2026, 11, 30, 8, 0, 1, tzinfo=UTC),
        ),
        (datetime(2026, 11, 30, 13, 30, 0, 5, tzinfo=_IST), None),
        (None, None),
        (datetime(1970, 1, 1, tzinfo=UTC), datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=_IST)),
        (datetime(2026, 3, 1, 0, 0, tzinfo=timezone(timedelta(hours=-8))), None),
        (datetime(2026, 6, 1, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC)),
    ]
    records = []
    for n, (attributes, (start, end)) in enumerate(zip(values, times, strict=True)):
        records.append(
            SpanRecord(
                trace_id="t",
                span_id=f"s{n}",
                parent_span_id=None if n == 0 else "s0",
                name=f"step ✓ {n}",
                kind=["llm", None, "tool", "agent", "llm", None][n],
                start_time=start,
                end_time=end,
                status_code=["ok", "error", None, "ok", None, None][n],
                status_message="failed — badly" if n == 1 else None,
                attributes={**resource, **attributes},
                resource_attributes=dict(resource),
                events=[]
                if n % 2
                else [{"name": "gen_ai.choice", "time": None, "attributes": {"body": "ñ"}}],
                scope_name="openinference ✓" if n < 3 else None,
                input="in ✓" if n == 2 else None,
                output="out" if n == 2 else None,
                agent_name="refund-agent" if n == 0 else None,
            )
        )
    for record in records[:4]:  # as decoders do: checked, so carrying the JSON text
        assert record_unstorable_reason(record) is None
        assert record.json_text() is not None
    # A checked record copied with other attributes: its text is of the original, not of it.
    copied = replace(records[0], span_id="copy", attributes={"other": "ö"})
    assert copied.encoded is not None and copied.json_text() is None
    return [*records, copied]


def _old_insert(conn: Connection, session_pk: int, records: list[SpanRecord]) -> None:
    """The INSERT ingest used before `store.span_rows`: SQLAlchemy's, with typed binds."""
    statement = dialect_insert(conn.dialect.name, _SPANS).on_conflict_do_nothing(
        index_elements=["session_pk", "span_id"]
    )
    conn.execute(
        statement,
        [
            {
                "session_pk": session_pk,
                "span_id": r.span_id,
                "parent_span_id": r.parent_span_id,
                "name": r.name,
                "kind": r.kind,
                "start_time": r.start_time,
                "end_time": r.end_time,
                "status_code": r.status_code,
                "status_message": r.status_message,
                "attributes": r.attributes,
                "resource_attributes": r.resource_attributes,
                "events": r.events,
                "scope_name": r.scope_name,
                "input": r.input,
                "output": r.output,
                "agent_name": r.agent_name,
                "model": "gpt-4o" if r.kind == "llm" else None,
            }
            for r in records
        ],
    )


def _raw_rows(conn: Connection, session_pk: int) -> list[tuple[Any, ...]]:
    """The stored values as the database gives them back, with no type processing: JSON as
    text on SQLite, as jsonb's text on PostgreSQL, datetimes as stored."""
    columns = [
        f"{c}::text" if conn.dialect.name == "postgresql" and c in _JSONISH else c
        for c in COLUMNS
        if c != "session_pk"
    ]
    mark = "%s" if conn.dialect.name == "postgresql" else "?"
    rows = conn.exec_driver_sql(
        f"SELECT {', '.join(columns)} FROM spans WHERE session_pk = {mark} ORDER BY span_id",
        (session_pk,),
    )
    return [tuple(row) for row in rows]


_JSONISH = {"attributes", "resource_attributes", "events"}
_RAW_COLUMNS = [c for c in COLUMNS if c != "session_pk"]


def _comparable(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """`_raw_rows` with the JSON columns' text read as JSON."""
    return [
        tuple(json.loads(v) if c in _JSONISH and v is not None else v
              for c, v in zip(_RAW_COLUMNS, row, strict=True))
        for row in rows
    ]  # fmt: skip


async def test_spans_are_stored_as_the_typed_insert_stored_them(
    db: Database, ingest_key: CreatedKey, dialect: str
) -> None:
    records = _spans()
    duplicate = replace(records[1], name="second copy, not stored")

    def write(conn: Connection) -> tuple[int, int]:
        pks = []
        for trace_id in ("old", "new"):
            row = conn.execute(
                insert(cast(Table, TraceSession.__table__))
                .values(
                    project_id=ingest_key.project_id,
                    trace_id=trace_id,
                    source="otlp",
                    cost_status="no_llm_calls",
                    status="ok",
                )
                .returning(TraceSession.pk)
            )
            pks.append(row.scalar_one())
        old, new = pks
        _old_insert(conn, old, [*records, duplicate])
        model = {r.span_id: "gpt-4o" if r.kind == "llm" else None for r in records}
        rows = [span_row(dialect, new, r, model[r.span_id]) for r in [*records, duplicate]]
        insert_spans(conn, rows)
        return old, new

    old, new = await db.run_write(write)
    async with db.read() as s:
        conn = await s.connection()
        old_raw = await conn.run_sync(_raw_rows, old)
        new_raw = await conn.run_sync(_raw_rows, new)
        typed = {
            pk: [
                {c: getattr(span, c) for c in COLUMNS if c != "session_pk"}
                for span in await s.scalars(
                    select(Span).where(Span.session_pk == pk).order_by(Span.span_id)
                )
            ]
            for pk in (old, new)
        }
    assert len(new_raw) == len(records)
    assert _comparable(new_raw) == _comparable(old_raw)
    if dialect == "sqlite":  # PostgreSQL's jsonb keeps no text of its own
        json_texts = [
            v for row in new_raw for c, v in zip(_RAW_COLUMNS, row, strict=True) if c in _JSONISH
        ]
        assert json_texts and all(isinstance(v, str) and v.isascii() for v in json_texts)
    assert typed[new] == typed[old]
    by_id = {row["span_id"]: row for row in typed[new]}
    assert by_id["s1"]["name"] == records[1].name  # the first received is kept
    assert by_id["copy"]["attributes"] == {"other": "ö"}
    assert by_id["s1"]["start_time"] == datetime(2026, 11, 30, 8, 0, 0, 5, tzinfo=UTC)
    assert by_id["s1"]["start_time"].tzinfo is UTC
    if dialect == "sqlite":
        raw = {row[0]: row for row in new_raw}
        assert raw["s0"][COLUMNS.index("start_time") - 1] == "2026-11-30 08:00:00.123456"
        assert raw["s3"][COLUMNS.index("end_time") - 1] == "2026-12-31 18:29:59.999999"


async def test_a_naive_datetime_is_refused_as_by_the_typed_column(db: Database) -> None:
    record = replace(_spans()[0], start_time=datetime(2026, 1, 1))  # noqa: DTZ001
    with pytest.raises(ValueError, match="naive datetime"):
        span_row(db.dialect, 1, record, None)


def test_text_from_the_storability_check_becomes_what_json_dumps_writes() -> None:
    encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
    rng = random.Random(7)
    planes = [(0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF)]

    def text() -> str:
        chars = []
        for _ in range(rng.randint(0, 12)):
            low, high = rng.choice(planes)
            code = rng.randint(low, high)
            chars.append(chr(code) if not 0xD800 <= code <= 0xDFFF else "\x7f")
        return "".join(chars)

    for _ in range(3000):
        value = {text(): [text(), {text(): text()}, 1.5, -0.0, 10**20, None, True]}
        assert as_dumps(encoder.encode(value)) == json.dumps(value)
        # orjson's compact text (the storability check's; it refuses ints past 64 bits, which
        # the check leaves to the exact walk): ASCII, and the same value.
        value[next(iter(value))][4] = 2**63
        compact = as_dumps(orjson.dumps(value).decode())
        assert compact.isascii() and json.loads(compact) == value


async def test_a_large_batch_keeps_every_span_once(
    db: Database, ingest_key: CreatedKey, dialect: str
) -> None:
    """A span sent twice in one large batch, near its copy or far from it, is stored once, as
    first received."""
    base = _spans()[0]
    records = [replace(base, span_id=f"s{n:04d}", name=f"first {n}") for n in range(1100)]
    again = [replace(records[n], name=f"again {n}") for n in (3, 1050, 10)]

    def write(conn: Connection) -> int:
        pk = conn.execute(
            insert(cast(Table, TraceSession.__table__))
            .values(
                project_id=ingest_key.project_id,
                trace_id="big",
                source="otlp",
                cost_status="no_llm_calls",
                status="ok",
            )
            .returning(TraceSession.pk)
        ).scalar_one()
        rows = [span_row(dialect, pk, r, None) for r in [*records[:20], *again, *records[20:]]]
        insert_spans(conn, rows)
        return int(pk)

    pk = await db.run_write(write)
    async with db.read() as s:
        names = dict(
            (await s.execute(select(Span.span_id, Span.name).where(Span.session_pk == pk))).all()
        )
    expected = {f"s{n:04d}": f"first {n}" for n in range(1100)}
    expected["s1050"] = "again 1050"  # its second copy came first
    assert names == expected
