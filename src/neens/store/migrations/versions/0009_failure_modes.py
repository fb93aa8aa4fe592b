"""Failure modes: the taxonomy, people's annotations of sessions against it, and stress-test
suites frozen from the sessions confirmed in some modes.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30 21:58:49.453783
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import neens.store.types

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "failure_modes",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_failure_modes_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_failure_modes")),
        sa.UniqueConstraint("project_id", "name", name=op.f("uq_failure_modes_project_id_name")),
    )
    with op.batch_alter_table("failure_modes", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_failure_modes_project_id_created_at_id"),
            ["project_id", "created_at", "id"],
            unique=False,
        )

    op.create_table(
        "failure_mode_annotations",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column(
            "session_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("failure_mode_id", sa.String(length=40), nullable=False),
        sa.Column("confirmed", sa.Boolean(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("expected_output", sa.Text(), nullable=True),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["failure_mode_id"],
            ["failure_modes.id"],
            name=op.f("fk_failure_mode_annotations_failure_mode_id_failure_modes"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_failure_mode_annotations_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_pk"],
            ["sessions.pk"],
            name=op.f("fk_failure_mode_annotations_session_pk_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_failure_mode_annotations")),
        sa.UniqueConstraint(
            "session_pk",
            "failure_mode_id",
            name=op.f("uq_failure_mode_annotations_session_pk_failure_mode_id"),
        ),
    )
    with op.batch_alter_table("failure_mode_annotations", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_failure_mode_annotations_failure_mode_id_confirmed"),
            ["failure_mode_id", "confirmed"],
            unique=False,
        )

    op.create_table(
        "stress_test_suites",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column(
            "failure_mode_ids",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("dataset_version_id", sa.String(length=40), nullable=False),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column(
            "skipped",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_stress_test_suites_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["dataset_version_id"],
            ["dataset_versions.id"],
            name=op.f("fk_stress_test_suites_dataset_version_id_dataset_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_stress_test_suites_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stress_test_suites")),
    )


def downgrade() -> None:
    op.drop_table("stress_test_suites")
    with op.batch_alter_table("failure_mode_annotations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_failure_mode_annotations_failure_mode_id_confirmed"))

    op.drop_table("failure_mode_annotations")
    with op.batch_alter_table("failure_modes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_failure_modes_project_id_created_at_id"))

    op.drop_table("failure_modes")
