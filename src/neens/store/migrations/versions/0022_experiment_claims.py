"""Experiment claims: which process is running an experiment, and until when unless renewed.

`neens exp run --resume` (and A/A and A/B resumes) claim the experiment before reading what is
left to run, so two resumes started together cannot both call the agent for every case. Both
columns are null when no process holds the experiment.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03 09:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import neens.store.types

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claimed_by", sa.String(length=200), nullable=True))
        batch_op.add_column(
            sa.Column("claimed_until", neens.store.types.UtcDateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.drop_column("claimed_until")
        batch_op.drop_column("claimed_by")
