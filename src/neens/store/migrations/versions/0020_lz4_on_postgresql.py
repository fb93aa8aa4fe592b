"""On PostgreSQL, the large values (span attributes and events, session texts, log events)
are compressed with lz4 instead of pglz.

PostgreSQL compresses any value over about 2 KB before storing it out of line (TOAST); with
pglz, compressing each span's attributes cost ingest more CPU in the database server than the
insert itself, on a machine where the server and Neens share the cores. lz4 compresses several
times faster for about the same size. A server built without lz4 keeps pglz (nothing changes);
values already stored keep the method they were written with. Nothing changes on SQLite.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01 18:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = {
    "spans": ("attributes", "resource_attributes", "events", "input", "output"),
    "sessions": ("input", "output"),
    "log_events": ("event",),
}


def _set_compression(method: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    statements = "\n".join(
        f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method};"
        for table, columns in COLUMNS.items()
        for column in columns
    )
    # A server built without lz4 refuses the method (feature_not_supported): keep pglz there.
    op.execute(
        f"DO $$ BEGIN\n{statements}\nEXCEPTION WHEN feature_not_supported THEN NULL;\nEND $$;"
    )


def upgrade() -> None:
    _set_compression("lz4")


def downgrade() -> None:
    _set_compression("default")
