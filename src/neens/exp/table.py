"""Plain-text tables: a header, a rule of dashes under each column, two spaces between columns.

    case                   A   B       Δ
    ------------------  ----  --  ------
    c_756966685591eb9b  100%  0%  -100pp

Each column is as wide as its widest cell; the columns in `right` are right-aligned (numbers),
the others left-aligned. Plain text (no box drawing) so it pastes into a review as it is.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Collection[int] = (),
    rule: bool = True,
) -> str:
    """The table; `rule=False` leaves out the dashes under the header."""
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
