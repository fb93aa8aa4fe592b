"""Column types shared by every table, portable across SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Integer, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator

JsonType = JSON().with_variant(JSONB(), "postgresql")
"""JSON on SQLite, JSONB on PostgreSQL."""

_make_encoder = getattr(json.encoder, "c_make_encoder", None)
"""The C encoder's constructor, which typeshed does not list (None without the C module)."""
_ONE_ENCODER = (
    None
    if _make_encoder is None
    else _make_encoder(
        None,  # no circular-reference check (see `json_dumps`)
        json.JSONEncoder().default,
        json.encoder.encode_basestring_ascii,
        None,  # indent
        ": ",
        ", ",
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan
    )
)


def json_dumps(value: object) -> str:
    """`json.dumps(value)`, the same text, without building an encoder on every call: the JSON
    columns' serializer on every engine (a session row has three, written on every ingest).

    One C encoder serves every call; it skips `json.dumps`'s check for circular references, so a
    cycle raises RecursionError instead of ValueError (no stored value can hold one)."""
    if _ONE_ENCODER is None:
        return json.dumps(value)
    return "".join(_ONE_ENCODER(value, 0))


BigIntPk = BigInteger().with_variant(Integer(), "sqlite")
"""64-bit keys on PostgreSQL; SQLite only auto-increments a plain INTEGER primary key."""


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """Text of Neens' own making (an error, a judge's reason) that both databases can store: a
    NUL or a lone surrogate quoted into it from an agent's or a model's reply becomes its escape,
    `\\x00` or `\\ud800`, so recording why something failed cannot fail in turn. (Data a client
    sends is refused instead, never altered.)"""
    return _UNSTORABLE.sub(lambda m: ascii(m.group())[1:-1], text)


class attribute_text(FunctionElement[str]):  # noqa: N801 - a SQL function, named as one
    """`attribute_text(json_column, key)`: the text of the top-level string value under `key`
    (an expression) in a JSON object column; NULL when the key is absent.

    JSON on SQLite (`json_extract` with the key quoted into the path; keys are restricted by
    the caller to characters that need no escaping there), JSONB on PostgreSQL (`->>`)."""

    type = Text()
    inherit_cache = True


@compiles(attribute_text, "sqlite")
def _attribute_text_sqlite(element: attribute_text, compiler: SQLCompiler, **kw: Any) -> str:
    column, key = list(element.clauses)
    return (
        f"json_extract({compiler.process(column, **kw)}, "
        f"'$.\"' || {compiler.process(key, **kw)} || '\"')"
    )


@compiles(attribute_text, "postgresql")
def _attribute_text_postgresql(element: attribute_text, compiler: SQLCompiler, **kw: Any) -> str:
    column, key = list(element.clauses)
    return f"({compiler.process(column, **kw)} ->> {compiler.process(key, **kw)})"


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
