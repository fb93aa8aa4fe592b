"""Sweep decisions read narrow rows: covering indexes on pre-prod items (verdicts and the
captured session) and on sessions (cost, agent name, when re-derived), and each finished child
run's verdict stored with what it rests on, so reading a finished sweep works out no gate.

Runs finished before this revision have no stored verdict: the first read of their sweep works
it out and stores it.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEXES = [
    ("preprod_items", ["run_id", "item_id", "status", "passed", "session_pk"]),
    ("sessions", ["pk", "cost_usd", "agent_name", "updated_at"]),
]


def _name(table: str, columns: list[str]) -> str:
    return f"ix_{table}_{'_'.join(columns)}"


def upgrade() -> None:
    with op.batch_alter_table("preprod_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("green", sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column("green_basis", sa.Text(), nullable=True))
    for table, columns in _INDEXES:
        op.create_index(_name(table, columns), table, columns)


def downgrade() -> None:
    for table, columns in _INDEXES:
        op.drop_index(_name(table, columns), table_name=table)
    with op.batch_alter_table("preprod_runs", schema=None) as batch_op:
        batch_op.drop_column("green_basis")
        batch_op.drop_column("green")
