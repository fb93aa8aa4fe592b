"""Numbers typed into a form field or a query parameter, read as people write them.

Python's `int()` and `float()` take more than that: `1_0` (10), digits of other scripts (`٣`,
3), `1e3`, `inf` and `nan`. A page reads only ASCII digits, an optional sign and, for a decimal,
one decimal point; anything else is refused by the caller naming its field. A zero is always
`0` (never `-0`), so a page that echoes it never shows `-0.0`.
"""

from __future__ import annotations

import math
import re

_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def whole_number(text: str) -> int | None:
    """`text` as a whole number (`12`, `-3`), or None when it is not written as one."""
    if not _WHOLE.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:  # more digits than int() reads (sys.get_int_max_str_digits)
        return None


def plain_decimal(text: str) -> float | None:
    """`text` as a finite decimal number (`0.9`, `.5`, `-2`, `3.`), or None when it is not
    written as one (no exponent, no `inf`/`nan`) or is too large for a float."""
    if not _DECIMAL.fullmatch(text):
        return None
    value = float(text)
    if not math.isfinite(value):
        return None
    return 0.0 if value == 0 else value
