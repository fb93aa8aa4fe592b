"""Reading a value out of a JSON document by a dotted path such as `choices[0].message.content`.

Used for an agent connection's `answerPath`. The grammar is deliberately small: names separated
by dots, each optionally followed by `[n]` list indexes; a name with other characters can be
quoted as `["a.b"]`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from neens.errors import Unprocessable

_TOKEN = re.compile(r'\.?([^.\[\]"]+)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')


@dataclass(frozen=True, slots=True)
class JsonPath:
    text: str
    steps: tuple[str | int, ...]


def parse_path(text: str, *, field: str = "answerPath") -> JsonPath:
    """Parse a path, or raise Unprocessable naming `field`."""
    steps: list[str | int] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise Unprocessable(
                f"{field} {text!r} is not a path like 'choices[0].message.content' "
                f"(problem at character {position + 1})",
                field=field,
            )
        name, index, quoted = match.groups()
        if name is not None:
            steps.append(name)
        elif index is not None:
            steps.append(int(index))
        else:
            steps.append(json.loads(f'"{quoted}"'))
        position = match.end()
    if not steps:
        raise Unprocessable(f"{field} must not be empty", field=field)
    return JsonPath(text, tuple(steps))


def extract(document: Any, path: JsonPath) -> tuple[bool, Any]:
    """(True, value) when the path exists in the document, else (False, None)."""
    current = document
    for step in path.steps:
        if isinstance(step, int):
            if not isinstance(current, list) or step >= len(current):
                return False, None
            current = current[step]
        else:
            if not isinstance(current, dict) or step not in current:
                return False, None
            current = current[step]
    return True, current
