"""Public identifiers: a fixed prefix that says what the thing is, then random characters.

The prefixes are part of the wire contract (`ds_…`, `ppr_…`, `conn_…`, `nk_live_…`).
"""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    """`prefix` + 24 lower-case hex characters (96 random bits)."""
    return f"{prefix}{secrets.token_hex(12)}"
