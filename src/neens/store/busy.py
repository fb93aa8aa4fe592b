"""Telling a database that is busy or briefly out of reach from a request that failed.

Such a failure says nothing about the request: the same request succeeds a moment later. The
API answers it with 503 and `Retry-After`, which every client retries (the OpenTelemetry
exporters retry 429, 502, 503 and 504 only), where a 500 made an exporter drop its spans.
"""

from __future__ import annotations

import sqlite3
import sys
from typing import Final

from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

RETRY_AFTER_S: Final = 1

_SQLITE_BUSY: Final = ("database is locked", "database table is locked", "database is busy")


def busy_database_reason(exc: BaseException) -> str | None:
    """What the database said, when `exc` (or what caused it) is the database being busy or out
    of reach: SQLite's lock outlasting the busy timeout, the connection pool exhausted, or any
    of PostgreSQL's operational errors (connection refused or lost, too many connections, a
    lock or statement timeout, a serialization failure or deadlock); None for anything else,
    such as a missing table, which retrying would not mend."""
    seen: BaseException | None = exc
    for _ in range(8):  # the chain of causes, bounded
        if seen is None:
            return None
        if isinstance(seen, PoolTimeout):
            return "no database connection came free in time"
        if isinstance(seen, OperationalError):
            orig = seen.orig
            if isinstance(orig, sqlite3.OperationalError):
                reason = str(orig)
                return reason if reason.startswith(_SQLITE_BUSY) else None
            # psycopg is imported only by a server on PostgreSQL: on SQLite it is not loaded
            # here either, and no error can be its.
            psycopg = sys.modules.get("psycopg")
            if seen.connection_invalidated or (
                psycopg is not None and isinstance(orig, psycopg.OperationalError)
            ):
                return str(orig).strip().splitlines()[0] if str(orig).strip() else "unreachable"
            return None
        seen = seen.__cause__ or seen.__context__
    return None
