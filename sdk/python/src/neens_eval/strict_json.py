"""JSON a person writes (dataset lines, gate policies), read so that a key given twice is an
error: `json.loads` keeps the last of two equal keys without a word, so `{"input": "a",
"input": "b"}` would lose "a", and a second `"rules"` would drop a policy's blocking rules."""

from __future__ import annotations

from typing import Any


class DuplicateKey(ValueError):
    """An object gives `key` twice; its message says so in full."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} is given twice in one object; give each key once")
        self.key = key


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A `json.loads` `object_pairs_hook` that raises `DuplicateKey`."""
    body = dict(pairs)
    if len(body) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return body
