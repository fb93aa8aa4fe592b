"""The storability check's JSON encoding reads back as the stdlib encoder's text does and refuses
whatever the strict stdlib encoder refuses, and the check reaches the same verdict as the exact
walk."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neens.domain import storable
from neens.domain.spans import SpanRecord
from neens.domain.storable import record_unstorable_reason

_STDLIB = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_LONG = 300
_REFUSED = (TypeError, ValueError, RecursionError)
"""What `_encode` may raise; `_storable_json` then falls back to the exact walk."""


def _same(value: Any) -> str | None:
    """Assert `_encode` refuses what the strict stdlib encoder refuses and otherwise writes text
    that reads back as the stdlib's does; the text, or None when `_encode` refused."""
    try:
        expected = _STDLIB.encode(value)
    except Exception:  # noqa: BLE001 - whichever it raises, `_encode` must refuse too
        with pytest.raises(_REFUSED):
            storable._encode(value)
        return None
    try:
        text = storable._encode(value)
    except _REFUSED:
        return None  # the exact walk decides: never stored from this text
    assert json.loads(text) == json.loads(expected)
    return text


def _refused(value: Any) -> bool:
    try:
        storable._encode(value)
    except _REFUSED:
        return True
    return False


class _Color(enum.IntEnum):
    RED = 1


class _Text(str):
    __slots__ = ()


def _long(text: str) -> str:
    """`text` repeated to a few hundred characters, as prompts and completions are."""
    return (text * (_LONG // max(len(text), 1) + 1))[: _LONG + 7]


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        'quote"',
        "back\\slash",
        "tab\t",
        "newline\n",
        "nul\x00",
        "ctrl\x01\x1f",
        "del\x7f",
        "café",
        "emoji 😀",
        "line sep \u2028",
        "lone \ud800",
        "lone low \udfff",
        "literal \\u0000",
        "</script>",
        "~ !#$%&'()*+,-./:;<=>?@[]^_`{|}",
    ],
)
def test_long_and_short_strings_read_back_as_sent(text: str) -> None:
    for value in (text, _long(text), {"k": _long(text)}, [_long(text)], {_long(text): 1}):
        _same(value)
        _same({"a": value, "b": _long("x")})


def test_a_nul_is_escaped_and_a_lone_surrogate_is_refused() -> None:
    assert "\\u0000" in storable._encode({"k": "a\x00b"})
    assert "\\u0000" in storable._encode({"k\x00": 1})
    assert _refused({"k": "lone \ud800"})
    assert _refused({"lone \udfff": 1})


@pytest.mark.parametrize(
    "scalar",
    [
        0,
        -1,
        2**63,
        -(2**64) - 1,
        10**40,
        1.5,
        -0.0,
        1e23,
        1e-7,
        5e-324,
        1.7976931348623157e308,
        math.nan,
        math.inf,
        -math.inf,
        True,
        False,
        None,
        _Color.RED,
        _Text("sub"),
        b"bytes",
        object(),
        (1, 2),
    ],
)
def test_scalars_next_to_long_text_read_back_or_are_refused(scalar: object) -> None:
    for value in (
        {"long": _long("x"), "v": scalar},
        [_long("x"), scalar],
        {"long": _long("x"), "nested": [scalar, {"deep": scalar}]},
    ):
        _same(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_infinities_are_refused_wherever_they_sit(value: float) -> None:
    """orjson writes them as null: stored so, a number that was sent would read back as "not
    recorded"."""
    for where in (value, {"v": value}, [1, [value]], {"a": None, "b": [{"c": value}]}):
        assert _refused(where)


def test_a_real_null_is_kept() -> None:
    assert json.loads(storable._encode({"a": None, "b": [None]})) == {"a": None, "b": [None]}


def test_an_int_too_long_for_str_is_refused() -> None:
    assert _same({"long": _long("x"), "big": 10**5000}) is None


@pytest.mark.parametrize("key", [1, 2.5, None, True, (1, 2), "k\x00", "é", _Text("k"), _long("k")])
def test_keys_of_every_kind_read_back_or_are_refused(key: Any) -> None:
    _same({"long": _long("x"), key: "v"})


def test_key_order_is_kept_and_subclasses_read_back() -> None:
    value = {"z": _long("x"), "a": 1, "m": [_long("y")]}
    text = _same(value)
    assert text is not None
    assert list(json.loads(text)) == ["z", "a", "m"]
    _same(OrderedDict(value))
    _same([OrderedDict(value), value])


def test_deeply_nested_values_read_back() -> None:
    value: Any = _long("x")
    for depth in range(40):
        value = {f"level{depth}": value, "n": [depth, _long("y")]}
        _same(value)
        _same([value])


def test_a_cycle_is_refused() -> None:
    cycle: list[Any] = [_long("x")]
    cycle.append(cycle)
    assert _refused({"a": cycle})


_text = st.text(
    st.one_of(
        st.characters(min_codepoint=0x20, max_codepoint=0x7E),
        st.characters(codec=None),
        st.sampled_from(['"', "\\", "\x00", "\x7f", "\ud800", "\n"]),
    ),
    max_size=12,
)
_long_text = st.builds(lambda t, n: (t or "x") * (n // max(len(t), 1) + 1), _text, st.just(_LONG))
_scalars = st.one_of(
    _text,
    _long_text,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(_text, _long_text), inner, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=400)
@given(_values)
def test_any_value_reads_back_or_is_refused(value: Any) -> None:
    _same(value)


def _record(attributes: dict[str, Any], events: list[Any], **fields: Any) -> SpanRecord:
    defaults: dict[str, Any] = {
        "trace_id": "t",
        "span_id": "s",
        "parent_span_id": None,
        "name": "span",
        "kind": None,
        "start_time": None,
        "end_time": None,
        "status_code": None,
        "status_message": None,
    }
    return SpanRecord(
        attributes=attributes,
        resource_attributes={"service.name": "svc"},
        events=events,
        **{**defaults, **fields},
    )


@settings(max_examples=300)
@given(
    st.dictionaries(st.one_of(_text, _long_text), _values, max_size=5),
    st.lists(st.fixed_dictionaries({"name": _text, "attributes": _values}), max_size=2),
    st.one_of(st.none(), _text, _long_text),
    st.one_of(st.none(), _text, _long_text),
)
def test_the_check_agrees_with_the_exact_walk_and_keeps_text_that_reads_back(
    attributes: dict[str, Any], events: list[Any], name: str | None, output: str | None
) -> None:
    record = _record(attributes, events, name=name or "span", output=output)
    reason = record_unstorable_reason(record)
    assert reason == storable._unstorable_reason(record)
    encoded = record.json_text()
    if reason is not None:
        assert encoded is None
    elif encoded is not None:
        assert json.loads(encoded.attributes) == json.loads(_STDLIB.encode(attributes))
        assert json.loads(encoded.events) == json.loads(_STDLIB.encode(events))
        assert json.loads(encoded.resource_attributes) == record.resource_attributes


@pytest.mark.parametrize(
    ("fields", "cached"),
    [
        ({"output": "ok " * 200}, True),
        ({"output": "nul\x00" * 100}, False),
        ({"output": "lone \ud800" * 100}, False),
        ({"input": "literal \\u0000" * 100}, True),
        ({"attributes": {"input.value": "literal \\u0000" * 100}}, False),
        ({"attributes": {"input.value": "nul \x00" * 100}}, False),
        ({"attributes": {"input.value": "lone \udc00" * 100}}, False),
        ({"attributes": {"n": math.nan, "input.value": "x" * 400}}, False),
        ({"kind": 3}, False),
    ],
)
def test_the_text_is_kept_only_when_the_fast_check_is_sure(
    fields: dict[str, Any], cached: bool
) -> None:
    attributes = fields.pop("attributes", {"input.value": "x" * 400})
    record = _record(attributes, [], **fields)
    reason = record_unstorable_reason(record)
    assert reason == storable._unstorable_reason(record)
    assert (record.json_text() is not None) is cached
    if cached:
        assert json.loads(record.json_text().attributes) == attributes  # type: ignore[union-attr]


def test_spans_sharing_a_resource_dict_get_its_text_and_another_resource_gets_its_own() -> None:
    resource = {"service.name": "support", "host.name": "box-1"}
    first = replace(_record({"a": 1}, []), resource_attributes=resource)
    second = replace(_record({"b": 2}, []), resource_attributes=resource)
    other = replace(_record({"c": 3}, []), resource_attributes={"service.name": "billing"})
    texts = []
    for record in (first, second, other, first):
        assert record_unstorable_reason(record) is None
        encoded = record.json_text()
        assert encoded is not None
        texts.append(encoded.resource_attributes)
    assert [json.loads(text) for text in texts] == [resource] * 2 + [
        {"service.name": "billing"}
    ] + [resource]
    assert texts[0] is texts[1]  # the first span's text, not encoded again
