"""Model sweeps: a sweep, its arms and the slots of each arm's k child runs; a push run's own
concurrency (a sweep gives each arm's runs its share).

Revision ID: 0007
Revises: 0006_list_indexes
Create Date: 2026-11-30 20:41:11.294353
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import neens.store.types

revision: str = "0007"
down_revision: str | None = "0006_list_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "model_sweeps",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column("version_label", sa.String(length=500), nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("dataset_version_id", sa.String(length=40), nullable=False),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column("pass_k", sa.Integer(), nullable=False),
        sa.Column("budget_usd", sa.Float(), nullable=True),
        sa.Column(
            "judge_ids",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "gate",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("fingerprint", sa.String(length=100), nullable=False),
        sa.Column("status", sa.String(length=40), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("void_reason", sa.Text(), nullable=True),
        sa.Column(
            "diverged_arms",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("completed_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_model_sweeps_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["dataset_version_id"],
            ["dataset_versions.id"],
            name=op.f("fk_model_sweeps_dataset_version_id_dataset_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_model_sweeps_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_sweeps")),
    )
    with op.batch_alter_table("model_sweeps", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_model_sweeps_project_id_created_at_id"),
            ["project_id", "created_at", "id"],
            unique=False,
        )

    op.create_table(
        "model_sweep_arms",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("sweep_id", sa.String(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("agent_connection_id", sa.String(length=40), nullable=False),
        sa.Column("model", sa.String(length=500), nullable=True),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=40), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["sweep_id"],
            ["model_sweeps.id"],
            name=op.f("fk_model_sweep_arms_sweep_id_model_sweeps"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_sweep_arms")),
        sa.UniqueConstraint(
            "sweep_id",
            "agent_connection_id",
            name=op.f("uq_model_sweep_arms_sweep_id_agent_connection_id"),
        ),
        sa.UniqueConstraint("sweep_id", "label", name=op.f("uq_model_sweep_arms_sweep_id_label")),
        sa.UniqueConstraint(
            "sweep_id", "position", name=op.f("uq_model_sweep_arms_sweep_id_position")
        ),
    )
    op.create_table(
        "model_sweep_runs",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("sweep_id", sa.String(length=40), nullable=False),
        sa.Column("arm_id", sa.String(length=40), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=True),
        sa.ForeignKeyConstraint(
            ["arm_id"],
            ["model_sweep_arms.id"],
            name=op.f("fk_model_sweep_runs_arm_id_model_sweep_arms"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["sweep_id"],
            ["model_sweeps.id"],
            name=op.f("fk_model_sweep_runs_sweep_id_model_sweeps"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_model_sweep_runs")),
        sa.UniqueConstraint("arm_id", "attempt", name=op.f("uq_model_sweep_runs_arm_id_attempt")),
    )
    with op.batch_alter_table("model_sweep_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_model_sweep_runs_run_id"), ["run_id"], unique=False)

    with op.batch_alter_table("preprod_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("push_concurrency", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("preprod_runs", schema=None) as batch_op:
        batch_op.drop_column("push_concurrency")

    with op.batch_alter_table("model_sweep_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_model_sweep_runs_run_id"))

    op.drop_table("model_sweep_runs")
    op.drop_table("model_sweep_arms")
    with op.batch_alter_table("model_sweeps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_model_sweeps_project_id_created_at_id"))

    op.drop_table("model_sweeps")
