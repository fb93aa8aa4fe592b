"""Reading the JSON a user writes for `neens exp` (specs, dataset lines, labels, judges) strictly.

`json.loads` lets the last of two equal keys win and recurses once per level of nesting, so a
repeated key silently changes what runs and a document nested a few thousand levels deep raises
RecursionError. `loads` refuses both with a `ConfigError` (exit 2) naming where: the same key
twice in one object, and nesting deeper than `MAX_JSON_DEPTH` (the API's own bound, so a case
read here could also be a Neens dataset item).
"""

from __future__ import annotations

import json
import math
from typing import Any

from neens_eval.errors import ConfigError
from neens_eval.strict_json import DuplicateKey, no_duplicate_keys

from neens.domain.storable import MAX_JSON_DEPTH, nesting_reason


def loads(raw: str | bytes, where: str) -> Any:
    """The JSON in `raw`; ConfigError naming `where` for a repeated key or too deep a nesting.
    Text that is not JSON raises `json.JSONDecodeError` (or `UnicodeDecodeError`) as
    `json.loads` does, for the caller to word."""
    try:
        value = json.loads(raw, object_pairs_hook=no_duplicate_keys)
    except DuplicateKey as exc:
        raise ConfigError(
            f"{where}: duplicate key {exc.key!r} (each key may appear once in an object)"
        ) from None
    except RecursionError:
        raise ConfigError(
            f"{where}: JSON nested too deeply to read (at most {MAX_JSON_DEPTH} levels)"
        ) from None
    if nesting_reason(value, MAX_JSON_DEPTH) is not None:
        raise ConfigError(
            f"{where}: JSON nested too deeply to read (at most {MAX_JSON_DEPTH} levels)"
        )
    return value


def finite(value: int | float) -> bool:
    """Whether `value` is a finite number a float can hold: a JSON integer may be too large for
    one (`10**400`), which `math.isfinite` raises OverflowError for."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
