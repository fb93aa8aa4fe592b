"""JSON paths such as `choices[0].message.content`: where a value sits in a JSON document.

One syntax and one parser for every path a user writes: an agent connection's `answerPath` and a
`json_field_match` judge's `path` (docs/judges.md#json-paths describes it for users).

- Keys are separated by dots and taken literally, spaces, quotes and non-ASCII included:
  `order.status`, `first name`.
- Array positions are written only in brackets, `items[0].id`, `[2].name`, `matrix[1][0]`, so
  `items.0` looks up the key "0" and never guesses that it meant an index.
- A key holding a dot or a bracket is quoted as a JSON string in brackets: `["a.b"]`,
  `data["x[1]"].y`.
- Two spellings are read as well because paths were saved with them: a leading dot
  (`.order.status`, as jq writes it) and a key directly after a bracket without its dot
  (`items[0]id`). Neither can mean anything else.

Refused, naming the field: an empty path, an empty key (`a..b`, `a.`), a negative or non-numeric
index (`a[-1]`, `a[x]`), a dot before a bracket (`a.[0]`) and stray brackets (`a]`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from neens.domain.storable import safe_label
from neens.errors import Unprocessable

__all__ = ["JsonPath", "extract", "parse_path"]

_KEY: Final = re.compile(r"[^.\[\]]+")
_INDEX: Final = re.compile(r"\[(\d+)\]")
_QUOTED: Final = re.compile(r'\["((?:[^"\\]|\\.)*)"\]')


@dataclass(frozen=True, slots=True)
class JsonPath:
    text: str
    steps: tuple[str | int, ...]
    """Keys (str) and array positions (int), outermost first."""


def parse_path(text: str, *, field: str) -> JsonPath:
    """Parse a path (syntax in the module docstring), or raise Unprocessable naming `field`."""
    if text == "":
        raise Unprocessable(f"{field} must not be empty", field=field)
    steps: list[str | int] = []
    position = 0
    after = "start"  # what the last token was: start, dot, key or bracket
    if text.startswith("."):
        position, after = 1, "dot"
    while position < len(text):
        if text[position] == ".":
            if after not in ("key", "bracket"):
                break
            position, after = position + 1, "dot"
            continue
        if text[position] == "[":
            if after == "dot":
                break
            step = _bracket(text, position)
            if step is None:
                break
            steps.append(step[0])
            position, after = step[1], "bracket"
            continue
        key = _KEY.match(text, position)
        if key is None:
            break
        steps.append(key[0])
        position, after = key.end(), "key"
    if position < len(text) or after == "dot":
        raise Unprocessable(
            f"{field} {safe_label(text)} is not a JSON path such as order.status or items[0].id "
            f'(keys separated by dots, array positions as [n], other keys as ["a.b"]); '
            f"problem at character {min(position, len(text) - 1) + 1}",
            field=field,
        )
    return JsonPath(text, tuple(steps))


def _bracket(text: str, position: int) -> tuple[str | int, int] | None:
    """The step bracketed at `position` and where it ends, or None when it is not one."""
    index = _INDEX.match(text, position)
    if index is not None:
        try:
            return int(index[1]), index.end()
        except ValueError:  # more digits than Python converts: no list is that long anyway
            return None
    quoted = _QUOTED.match(text, position)
    if quoted is not None:
        try:
            key = json.loads(f'"{quoted[1]}"')
        except ValueError:  # an escape JSON does not know, or a raw control character
            return None
        return str(key), quoted.end()
    return None


def extract(document: Any, path: JsonPath) -> tuple[bool, Any]:
    """(True, value) when the path exists in the document, else (False, None)."""
    current = document
    for step in path.steps:
        if isinstance(step, int):
            if not isinstance(current, list) or step >= len(current):
                return False, None
        elif not isinstance(current, dict) or step not in current:
            return False, None
        current = current[step]
    return True, current
