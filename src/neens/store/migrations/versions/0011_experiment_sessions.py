"""Sessions of the local bench (`neens exp session`): a line of work in a project folder, its
runs and notes in time order, and which session is current in each folder.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import neens.store.types

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "experiment_sessions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("folder", sa.Text(), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiment_sessions")),
    )
    with op.batch_alter_table("experiment_sessions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_experiment_sessions_folder_created_at"),
            ["folder", "created_at"],
            unique=False,
        )

    op.create_table(
        "experiment_session_entries",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("session_id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("experiment_id", sa.String(length=40), nullable=True),
        sa.Column("previous_id", sa.String(length=40), nullable=True),
        sa.Column(
            "files",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_experiment_session_entries_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["experiment_sessions.id"],
            name=op.f("fk_experiment_session_entries_session_id_experiment_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_experiment_session_entries")),
    )
    with op.batch_alter_table("experiment_session_entries", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_experiment_session_entries_session_id_pk"),
            ["session_id", "pk"],
            unique=False,
        )

    op.create_table(
        "experiment_session_folders",
        sa.Column("folder", sa.Text(), nullable=False),
        sa.Column("session_id", sa.String(length=40), nullable=False),
        sa.Column("set_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["experiment_sessions.id"],
            name=op.f("fk_experiment_session_folders_session_id_experiment_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("folder", name=op.f("pk_experiment_session_folders")),
    )


def downgrade() -> None:
    op.drop_table("experiment_session_folders")
    with op.batch_alter_table("experiment_session_entries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_experiment_session_entries_session_id_pk"))
    op.drop_table("experiment_session_entries")
    with op.batch_alter_table("experiment_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_experiment_sessions_folder_created_at"))
    op.drop_table("experiment_sessions")
