"""Config races (`neens exp sweep`): each sweep with its frozen definition and decision, and the
experiments it ran, by config, part (race, held-out, guard) and round.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 10:00:00.000000
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import neens.store.types

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "experiment_sweeps",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column("dataset_ref", sa.Text(), nullable=False),
        sa.Column("definition", _json(), nullable=False),
        sa.Column("decision", sa.String(length=10), nullable=True),
        sa.Column("adopted", sa.String(length=200), nullable=True),
        sa.Column("result", _json(), nullable=True),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiment_sweeps")),
    )
    with op.batch_alter_table("experiment_sweeps", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_experiment_sweeps_created_at_id"), ["created_at", "id"], unique=False
        )
    op.create_table(
        "experiment_sweep_runs",
        sa.Column("experiment_id", sa.String(length=40), nullable=False),
        sa.Column("sweep_id", sa.String(length=40), nullable=False),
        sa.Column("config", sa.String(length=200), nullable=False),
        sa.Column("part", sa.String(length=10), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_experiment_sweep_runs_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["sweep_id"],
            ["experiment_sweeps.id"],
            name=op.f("fk_experiment_sweep_runs_sweep_id_experiment_sweeps"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("experiment_id", name=op.f("pk_experiment_sweep_runs")),
        sa.UniqueConstraint(
            "sweep_id",
            "config",
            "part",
            "round",
            name=op.f("uq_experiment_sweep_runs_sweep_id_config_part_round"),
        ),
    )


def downgrade() -> None:
    op.drop_table("experiment_sweep_runs")
    with op.batch_alter_table("experiment_sweeps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_experiment_sweeps_created_at_id"))
    op.drop_table("experiment_sweeps")
