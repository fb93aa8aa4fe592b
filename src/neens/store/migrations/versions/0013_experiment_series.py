"""Series of experiments (`neens exp run --series`, `neens exp plateau`): each experiment tagged
as a numbered round of a named series.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import neens.store.types

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "experiment_series_rounds",
        sa.Column("series", sa.String(length=200), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_experiment_series_rounds_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("series", "round", name=op.f("pk_experiment_series_rounds")),
        sa.UniqueConstraint(
            "experiment_id", name=op.f("uq_experiment_series_rounds_experiment_id")
        ),
    )


def downgrade() -> None:
    op.drop_table("experiment_series_rounds")
