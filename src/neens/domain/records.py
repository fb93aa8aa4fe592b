"""`hot_record`: a dataclass frozen for the type checker and plain at run time.

Ingest makes several records a span (the decoded span, its JSON text, its view), each with a
dozen or more fields. A frozen dataclass's `__init__` sets every field through
`object.__setattr__`, which made building one four times as slow as a plain one: about 1 µs a
record, more than a few percent of ingest's CPU. Records made this way are still immutable
where it is checked, by mypy (assigning a field is an error), and are not hashable (none is
used as a key).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def hot_record(cls: type[_T]) -> type[_T]:
    """`@dataclass(frozen=True, slots=True)` as mypy sees it; `@dataclass(slots=True)` when run."""
    return dataclass(slots=True)(cls)
