"""The JSON columns' serializer writes exactly what `json.dumps` writes, on every engine."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from neens.store.db import Database
from neens.store.types import json_dumps

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner)),
    max_leaves=12,
)


@settings(max_examples=400)
@given(_values)
def test_the_text_is_json_dumps_text(value: Any) -> None:
    assert json_dumps(value) == json.dumps(value)


def test_what_json_dumps_refuses_is_refused() -> None:
    for value in ({1j: 1}, [object()], {"a": {1, 2}}):
        try:
            json.dumps(value)
        except TypeError as expected:
            try:
                json_dumps(value)
            except TypeError as got:
                assert str(got) == str(expected)
            else:
                raise AssertionError(f"{value!r} was encoded")
    assert json_dumps([math.inf]) == "[Infinity]"


async def test_every_engine_serializes_json_columns_with_it(db: Database) -> None:
    engines = [db.engine.sync_engine, db._sync_engine]  # the second: SQLite's write thread
    for engine in filter(None, engines):
        assert engine.dialect._json_serializer is json_dumps
