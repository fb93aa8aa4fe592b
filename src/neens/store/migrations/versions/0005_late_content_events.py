"""Content events that arrived after the pre-prod run scoring their trace had finished: each
records that run, so the session keeps saying its verdict was computed without them.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 17:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("log_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("late_for_run_id", sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("log_events", schema=None) as batch_op:
        batch_op.drop_column("late_for_run_id")
