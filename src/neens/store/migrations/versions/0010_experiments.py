"""Experiments of the local bench (`neens exp`): the experiments, their case-trials and each
grader's verdict on a case-trial, with the grader's version.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 03:52:46.070097
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import neens.store.types

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column(
            "spec",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("dataset_ref", sa.Text(), nullable=False),
        sa.Column("dataset_version_id", sa.String(length=40), nullable=True),
        sa.Column("dataset_hash", sa.String(length=64), nullable=False),
        sa.Column("task_hash", sa.String(length=64), nullable=False),
        sa.Column(
            "agent_files",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "graders",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "cases",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "selection",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("failing_of", sa.String(length=40), nullable=True),
        sa.Column("source_id", sa.String(length=40), nullable=True),
        sa.Column("pair_id", sa.String(length=40), nullable=True),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("planned", sa.Integer(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiments")),
    )
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_experiments_created_at_id"), ["created_at", "id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_experiments_name_created_at"), ["name", "created_at"], unique=False
        )

    op.create_table(
        "experiment_trials",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("experiment_id", sa.String(length=40), nullable=False),
        sa.Column("case_id", sa.String(length=500), nullable=False),
        sa.Column("trial", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("error_kind", sa.String(length=20), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("seq_passed_at", sa.Integer(), nullable=True),
        sa.Column(
            "seq_log",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("started_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_experiment_trials_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_experiment_trials")),
        sa.UniqueConstraint(
            "experiment_id",
            "case_id",
            "trial",
            name=op.f("uq_experiment_trials_experiment_id_case_id_trial"),
        ),
    )
    op.create_table(
        "experiment_grades",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("trial_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("grader", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=True),
        sa.Column("unscored", sa.String(length=50), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=True),
        sa.Column("raw_reply", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["trial_pk"],
            ["experiment_trials.pk"],
            name=op.f("fk_experiment_grades_trial_pk_experiment_trials"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_experiment_grades")),
        sa.UniqueConstraint(
            "trial_pk", "grader", name=op.f("uq_experiment_grades_trial_pk_grader")
        ),
    )


def downgrade() -> None:
    op.drop_table("experiment_grades")
    op.drop_table("experiment_trials")
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_experiments_name_created_at"))
        batch_op.drop_index(batch_op.f("ix_experiments_created_at_id"))

    op.drop_table("experiments")
