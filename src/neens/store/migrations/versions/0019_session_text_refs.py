"""A session's input or output may be a reference to the span attribute it was read from.

Ingest no longer writes a prompt or a reply twice (in the root span's attributes and again in
the session row): when the session's input or output is, verbatim, an attribute of one of its
spans, the session keeps the span id and the attribute key instead of the text. Existing rows
keep their text; the downgrade copies referenced text back into the row.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01 17:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SIDES = ("input", "output")


def upgrade() -> None:
    for side in _SIDES:
        op.add_column("sessions", sa.Column(f"{side}_span_id", sa.String(length=256)))
        op.add_column("sessions", sa.Column(f"{side}_key", sa.String(length=100)))


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for side in _SIDES:
        key = f"sessions.{side}_key"
        found = (
            f"(spans.attributes ->> {key})"
            if postgres
            else (f"json_extract(spans.attributes, '$.\"' || {key} || '\"')")
        )
        op.execute(
            f"UPDATE sessions SET {side} = (SELECT {found} FROM spans "
            f"WHERE spans.session_pk = sessions.pk AND spans.span_id = sessions.{side}_span_id) "
            f"WHERE {key} IS NOT NULL"
        )
    with op.batch_alter_table("sessions") as batch:
        for side in _SIDES:
            batch.drop_column(f"{side}_key")
            batch.drop_column(f"{side}_span_id")
