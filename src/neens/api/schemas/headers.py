"""The one check for headers Neens stores and later sends: agent connections and sinks.

A header is refused when it is created, with the field named, rather than when a call is made
(where it would fail every item of a run, or every delivery): names are RFC 9110 tokens, values
printable ASCII (tabs allowed; no line breaks, NUL or other control characters, which would
split or corrupt the request), not starting or ending with a space or tab (HTTP has no such
values: a receiver drops the spaces, and the sink client refuses to send them). Headers that
frame the request itself are Neens' to set.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

MAX_HEADERS = 50
MAX_VALUE_CHARS = 8192
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[\t\x20-\x7e]*")
RESERVED = frozenset({"host", "content-length", "transfer-encoding", "connection", "content-type"})


def check_headers(value: dict[str, str] | None) -> dict[str, str] | None:
    """Refuse header names and values that cannot be sent as they are."""
    if value is None:
        return None
    if len(value) > MAX_HEADERS:
        raise ValueError(f"at most {MAX_HEADERS} headers")
    for name, header_value in value.items():
        if not _TOKEN.fullmatch(name):
            raise ValueError(
                f"{name!r} is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"
            )
        if name.lower() in RESERVED:
            raise ValueError(f"header {name!r} is set by Neens itself and cannot be configured")
        if not _VALUE.fullmatch(header_value):
            raise ValueError(
                f"the value of header {name!r} must be printable ASCII: no line breaks, "
                "NUL or other control characters"
            )
        if header_value != header_value.strip(" \t"):
            raise ValueError(
                f"the value of header {name!r} must not start or end with a space or tab"
            )
        if len(header_value) > MAX_VALUE_CHARS:
            raise ValueError(f"the value of header {name!r} is over {MAX_VALUE_CHARS} characters")
    return value


Headers = Annotated[dict[str, str], AfterValidator(check_headers), Field()]
"""Headers a request body may configure, checked by `check_headers`."""
