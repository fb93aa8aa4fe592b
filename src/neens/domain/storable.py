"""Whether a decoded value can be stored at all, and the words for why not.

PostgreSQL refuses a NUL character and lone surrogates in text (SQLite would take them, and the
two databases must accept the same data), and attributes nested deeper than `MAX_NESTING`
levels are refused too. The receivers, the native session JSON and the server all ask here, so
they reject the same things with the same words, naming the field or attribute.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from neens.domain.spans import SpanJson, SpanRecord

_UNSTORABLE_CHAR: Final = re.compile("[\x00\ud800-\udfff]")
"""NUL, and any surrogate code point.

A surrogate in a Python `str` is always a lone one: a valid pair in JSON (`\\ud83d\\ude00`) is
combined into one code point by the decoder, and valid UTF-8 cannot encode surrogates at all.
"""


def _text_reason(text: str) -> str | None:
    match = _UNSTORABLE_CHAR.search(text)
    if match is None:
        return None
    if match.group() == "\x00":
        return f"contains a NUL character (\\x00) at offset {match.start()}"
    return f"contains a lone surrogate (\\u{ord(match.group()):04x}) at offset {match.start()}"


def unstorable_text_reason(value: object) -> str | None:
    """Why `value` cannot be stored by PostgreSQL, or None when it can.

    PostgreSQL `text` and `jsonb` refuse the NUL character, and a lone surrogate cannot even be
    encoded as UTF-8; JSON (so `jsonb`) has no NaN or Infinity either. Altering such data to make
    it fit would store something the agent never sent, so the caller rejects the span instead and
    reports this reason. Strings, dict keys and values, and list items are walked (with a stack,
    not recursion, so any nesting depth is safe); the reason names where the problem sits
    (`['messages'][2]['content'] contains a NUL ...`).
    """
    problem = unstorable_problem(value)
    if problem is None:
        return None
    where, reason = problem
    if not where:
        return reason
    rendered = "".join(f"[{step}]" if isinstance(step, int) else f"[{safe_label(step)}]"
                       for step in where)  # fmt: skip
    return f"{rendered} {reason}"


def unstorable_problem(value: object) -> tuple[list[str | int], str] | None:
    """`unstorable_text_reason`'s finding as (where, why): the keys and indexes leading to the
    problem (a key that is itself the problem ends the path, and `why` starts with "key"), and
    the reason without them; None when `value` can be stored."""
    # A path is kept as links to its parent's and built only for the finding: building each
    # child's path would copy its parent's, quadratic in the depth.
    stack: list[tuple[object, _Path]] = [(value, None)]
    while stack:
        item, path = stack.pop()
        reason = _leaf_reason(item)
        if reason is not None:
            return _steps(path), reason
        if isinstance(item, Mapping):
            children: list[tuple[object, _Path]] = []
            for key, child in item.items():
                if isinstance(key, str) and (reason := _text_reason(key)) is not None:
                    return [*_steps(path), key], f"key {reason}"
                children.append((child, (path, key, True)))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend(
                (child, (path, index, False)) for index, child in reversed(list(enumerate(item)))
            )
    return None


_Path = tuple["_Path", object, bool] | None
"""Where a value sits: None at the top, else (its parent's path, its key or index, is a key)."""


def _steps(path: _Path) -> list[str | int]:
    """The keys and indexes of `path`, outermost first."""
    steps: list[str | int] = []
    while path is not None:
        path, step, _ = path
        steps.append(step if isinstance(step, int) else str(step))
    return steps[::-1]


def _leaf_reason(value: object) -> str | None:
    if isinstance(value, str):
        return _text_reason(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"is {value!r}, which JSON cannot represent"
    return None


_CONTROL_CHARACTER: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""Unicode's control characters (category Cc: C0, DEL and C1) and its bidirectional controls
(marks, embeddings, overrides, isolates): a right-to-left override in an arm's label would turn
the rest of a verdict sentence around it backwards."""


def name_problem(value: str) -> str | None:
    """Why `value` cannot be a name people read in lists, pages, charts and a terminal, or None:
    it must show something, on one line. A control character (a tab, a newline, an escape)
    would break a page's layout, make an SVG chart invalid XML or recolour a terminal; a
    bidirectional control would reorder the text around it."""
    if not value.strip():
        return "must not be blank"
    if (found := _CONTROL_CHARACTER.search(value)) is not None:
        return (
            f"must not hold control characters (U+{ord(found.group()):04X} at position "
            f"{found.start()})"
        )
    return None


MAX_JSON_DEPTH: Final = 128
"""Deepest nesting of objects and arrays a JSON document a person writes may have: a request
body (`api.middleware.JsonBodyMiddleware`) or a file `neens exp` reads (serde_json's default
too)."""

MAX_NESTING: Final = 32
"""How deeply an attribute value may nest objects and arrays.

Real attributes are flat or a few levels deep (GenAI messages: a list of messages of parts);
a bound keeps every value safely storable, readable back and serialisable by any JSON client,
and lets a span that goes deeper be refused alone, with the attribute named, instead of failing
the request it came in."""


def nesting_reason(value: object, limit: int = MAX_NESTING) -> str | None:
    """Why `value` nests objects or arrays more than `limit` levels deep, or None.

    A scalar is depth 0, `{"a": 1}` and `[1]` depth 1. Walked with a stack, so a value nested
    thousands of levels is measured without recursion.
    """
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return f"is nested more than {limit} levels deep; flatten it or send it as JSON text"
        stack.extend((child, depth + 1) for child in children)
    return None


def safe_label(value: object, limit: int = 80) -> str:
    """A quoted, printable, bounded rendering of `value` for error messages and reasons.

    Rejection reasons travel back to the client in the OTLP response and into logs, so they must
    themselves be encodable even when they quote the very text that was refused: `ascii()` escapes
    NUL and surrogates, and long names are cut so one span cannot bloat the response.
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[:limit] + "…"
    if _UNSTORABLE_CHAR.search(text):
        return ascii(text)
    return repr(text)


_STRICT_JSON: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_NULL: Final = b"null"


def _encode(value: Any) -> str:
    """`value` as JSON text, raising where the strict stdlib encoder (`_STRICT_JSON`) refuses.

    orjson writes span values about ten times faster than the stdlib. It refuses on its own
    (`TypeError`) a lone surrogate, a non-string key, an int beyond 64 bits, a cycle and deep
    nesting, and it escapes NUL as `\\u0000`, as the stdlib does. It writes NaN and infinities
    as `null`, though, so a text holding `null` is handed to the strict encoder as well, which
    raises `ValueError` for them (a real None encodes the same either way). The text is compact
    (`{"a":1}`); tests/domain/test_storable.py checks it reads back as the value.
    """
    text = orjson.dumps(value)
    if _NULL in text:
        _STRICT_JSON.encode(value)
    return text.decode()


_last_resource: tuple[object, str] = (None, "null")


def _encode_resource(attributes: dict[str, Any]) -> str:
    """`_encode(attributes)`, remembered for the last dict asked: the spans of one resource
    share one dict of its attributes (an SDK sends a dozen: service, SDK, host, process), so a
    request's spans encode it once. The dict is held, so its id cannot be reused meanwhile."""
    global _last_resource
    last, text = _last_resource
    if last is attributes:
        return text
    text = _encode(attributes)
    _last_resource = (attributes, text)
    return text


def _storable_json(record: SpanRecord) -> SpanJson | None:
    """The JSON text of the record's values when `record_unstorable_reason` would surely find
    nothing; None means "look closer".

    Ingest checks every span, and walking every attribute in Python cost more than decoding it.
    The record's own text fields are checked directly: each is None, or a string with no NUL
    and no surrogate (an ASCII one cannot hold a surrogate). For the attributes and events, a
    JSON encoding (`_encode`) finds the same problems as the walk: a NUL is always escaped as
    `\\u0000`, and a surrogate, a NaN or an infinity raises. Anything it cannot encode, or text
    that merely looks suspect (a literal backslash-u0000), falls back to the exact walk, which
    also words the reason. The JSON values are encoded one by one, so the store can write
    their text (`SpanJson`).
    """
    fields = (
        record.name,
        record.trace_id,
        record.span_id,
        record.parent_span_id,
        record.kind,
        record.status_message,
        record.scope_name,
        record.input,
        record.output,
        record.agent_name,
    )
    for value in fields:  # inlined, not a function: ingest checks ten fields a span
        if value is None:
            continue
        if type(value) is not str:
            return None
        if value.isascii():
            if "\x00" in value:
                return None
        elif _UNSTORABLE_CHAR.search(value) is not None:
            return None
    try:
        texts = (
            _encode_resource(record.resource_attributes),
            _encode(record.attributes),
            _encode(record.events),
        )
    except (TypeError, ValueError, RecursionError):
        return None
    for text in texts:
        # A one-character search runs at memory speed, a longer one far slower: most texts
        # hold no backslash at all. A lone surrogate never gets here: `_encode` raises.
        if "\\" in text and "\\u0000" in text:
            return None
    return SpanJson(
        attributes=texts[1],
        resource_attributes=texts[0],
        events=texts[2],
        of=(record.attributes, record.resource_attributes, record.events),
    )


def record_unstorable_reason(record: SpanRecord) -> str | None:
    """Why a decoded span cannot be stored, naming the field or attribute, or None.

    Shared by every decoder so an OTLP span and a native span with the same problem are refused
    with the same words. The span's own name is checked first because the reason quotes it.
    """
    encoded = _storable_json(record)
    if encoded is None:
        return _unstorable_reason(record)
    # Kept for the store to write (`SpanRecord.encoded`). The record is frozen, but this is a
    # cache: `SpanRecord.json_text` trusts it only while the record holds the very objects
    # it was encoded from.
    object.__setattr__(record, "encoded", encoded)
    return None


def _unstorable_reason(record: SpanRecord) -> str | None:
    """`record_unstorable_reason`'s exact walk."""
    label = safe_label(record.name)
    fields: list[tuple[str, object]] = [
        ("name", record.name),
        ("trace id", record.trace_id),
        ("span id", record.span_id),
        ("parent span id", record.parent_span_id),
        ("kind", record.kind),
        ("status message", record.status_message),
        ("scope name", record.scope_name),
        ("input", record.input),
        ("output", record.output),
        ("agent name", record.agent_name),
    ]
    for field_name, value in fields:
        if (reason := unstorable_text_reason(value)) is not None:
            return f"span {label} {field_name} {reason}"
    # The resource's copy first, so text inherited from the resource is reported as such.
    for source, attributes in (
        ("resource attribute", record.resource_attributes),
        ("attribute", record.attributes),
    ):
        for key, value in attributes.items():
            if (reason := _text_reason(key)) is not None:
                return f"span {label} {source} key {safe_label(key)} {reason}"
            if (reason := unstorable_text_reason(value)) is not None:
                return f"span {label} {source} {safe_label(key)} {reason}"
    for index, event in enumerate(record.events):
        if (reason := unstorable_text_reason(event)) is not None:
            return f"span {label} event {index} {reason}"
    return None
