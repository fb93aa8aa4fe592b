"""Matrices of experiments (`neens exp run matrix.json`): a matrix run and its cells, each cell
an experiment of its own.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import neens.store.types

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "experiment_matrices",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column("spec", _JSON, nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiment_matrices")),
    )
    op.create_index(
        op.f("ix_experiment_matrices_name_created_at"),
        "experiment_matrices",
        ["name", "created_at"],
        unique=False,
    )
    op.create_table(
        "experiment_matrix_cells",
        sa.Column("matrix_id", sa.String(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("cell", sa.String(length=500), nullable=False),
        sa.Column("baseline", sa.Boolean(), nullable=False),
        sa.Column("experiment_id", sa.String(length=40), nullable=False),
        sa.Column("reused", _JSON, nullable=True),
        sa.ForeignKeyConstraint(
            ["matrix_id"],
            ["experiment_matrices.id"],
            name=op.f("fk_experiment_matrix_cells_matrix_id_experiment_matrices"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_experiment_matrix_cells_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("matrix_id", "position", name=op.f("pk_experiment_matrix_cells")),
        sa.UniqueConstraint("experiment_id", name=op.f("uq_experiment_matrix_cells_experiment_id")),
    )


def downgrade() -> None:
    op.drop_table("experiment_matrix_cells")
    op.drop_index(op.f("ix_experiment_matrices_name_created_at"), table_name="experiment_matrices")
    op.drop_table("experiment_matrices")
