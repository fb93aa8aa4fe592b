"""Imported pre-prod runs: another tool's results stored as a read-only run.

`preprod_runs.imported` says where an imported run came from (the tool, its version and run id,
the file's SHA-256) and what its format cannot express, each with the reason; null on a run
Neens drove. `preprod_items.output` holds the answer an imported item recorded (a driven run's
answer stays in its captured session) and `preprod_items.trials` each repeat's result.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01 12:00:00.000000
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("preprod_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("imported", _json(), nullable=True))
    with op.batch_alter_table("preprod_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("output", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("trials", _json(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("preprod_items", schema=None) as batch_op:
        batch_op.drop_column("trials")
        batch_op.drop_column("output")
    with op.batch_alter_table("preprod_runs", schema=None) as batch_op:
        batch_op.drop_column("imported")
