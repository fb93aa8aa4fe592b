"""Plain-text tables: a header, a rule of dashes under each column, two spaces between columns.

    case                   A   B       Δ
    ------------------  ----  --  ------
    c_756966685591eb9b  100%  0%  -100pp

Each column is as wide as its widest cell; the columns in `right` are right-aligned (numbers),
the others left-aligned. Plain text (no box drawing) so it pastes into a review as it is. Every
cell is `shown`: a control character in a value (a case id, a kind) is printed escaped, so it
cannot break a row or move a terminal's cursor.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Final

_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Control characters (C0, DEL, C1) and bidirectional controls."""


def shown(text: str) -> str:
    """`text` with every control character escaped (`\\n`, `\\x1b`, `\\u202e`), for a report line:
    a line break, a terminal's escape code or a right-to-left override cannot forge or reorder
    the lines around it."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def control_problem(text: str) -> str | None:
    """Why `text` cannot be printed as it is in a report line (it holds a control character),
    or None."""
    if (found := _CONTROL.search(text)) is None:
        return None
    return (
        f"must not hold control characters (U+{ord(found.group()):04X} at position {found.start()})"
    )


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Collection[int] = (),
    rule: bool = True,
) -> str:
    """The table; `rule=False` leaves out the dashes under the header."""
    rows = [[shown(cell) for cell in row] for row in rows]
    widths = [len(h) for h in header]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    out = [line(header)]
    if rule:
        out.append("  ".join("-" * w for w in widths))
    out.extend(line(row) for row in rows)
    return "\n".join(out)
