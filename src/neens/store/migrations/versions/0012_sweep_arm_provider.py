"""A sweep arm's model provider, copied from its agent connection at create beside its model.

Arms created before this revision take the provider their first child run copied from the same
connection at the same moment; an arm with no run keeps none (null: not recorded).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("model_sweep_arms", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model_provider", sa.String(length=100), nullable=True))
    op.execute(
        "UPDATE model_sweep_arms SET model_provider = ("
        " SELECT preprod_runs.model_provider FROM model_sweep_runs"
        " JOIN preprod_runs ON preprod_runs.id = model_sweep_runs.run_id"
        " WHERE model_sweep_runs.arm_id = model_sweep_arms.id"
        " ORDER BY model_sweep_runs.attempt LIMIT 1)"
    )


def downgrade() -> None:
    with op.batch_alter_table("model_sweep_arms", schema=None) as batch_op:
        batch_op.drop_column("model_provider")
