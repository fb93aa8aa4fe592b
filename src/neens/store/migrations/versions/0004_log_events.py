"""Log events: GenAI content events received on /v1/logs, attached to their span by trace and
span id whichever arrives first.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 15:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import neens.store.types

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "log_events",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("trace_id", sa.String(length=256), nullable=False),
        sa.Column("span_id", sa.String(length=256), nullable=False),
        sa.Column(
            "event",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("received_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_log_events_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_log_events")),
    )
    with op.batch_alter_table("log_events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_log_events_project_id_trace_id"),
            ["project_id", "trace_id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("log_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_log_events_project_id_trace_id"))
    op.drop_table("log_events")
