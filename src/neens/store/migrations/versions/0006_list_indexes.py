"""Indexes ending in each list's sort key, so that a page of a list (first or deep, filtered
or not) is read from an index instead of sorting every matching row.

Revision ID: 0006_list_indexes
Revises: 0005
Create Date: 2026-11-30 18:30:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006_list_indexes"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ADDED = [
    ("sessions", ["project_id", "pk"]),
    ("sessions", ["project_id", "started_at", "pk"]),
    ("sessions", ["project_id", "agent_name", "pk"]),
    ("preprod_runs", ["project_id", "created_at", "id"]),
    ("preprod_runs", ["project_id", "dataset_id", "created_at", "id"]),
    ("scores", ["project_id", "pk"]),
    ("scores", ["project_id", "source", "pk"]),
    ("insights", ["project_id", "created_at", "id"]),
    ("notification_deliveries", ["sink_id", "pk"]),
]
_REPLACED = [
    ("sessions", ["project_id", "started_at"]),
    ("sessions", ["project_id", "agent_name"]),
    ("preprod_runs", ["project_id", "created_at"]),
    ("insights", ["project_id", "created_at"]),
]
"""Indexes that an added one starts with, and so makes redundant."""


def _name(table: str, columns: list[str]) -> str:
    return f"ix_{table}_{'_'.join(columns)}"


def upgrade() -> None:
    for table, columns in _ADDED:
        op.create_index(_name(table, columns), table, columns)
    for table, columns in _REPLACED:
        op.drop_index(_name(table, columns), table_name=table)


def downgrade() -> None:
    for table, columns in _REPLACED:
        op.create_index(_name(table, columns), table, columns)
    for table, columns in _ADDED:
        op.drop_index(_name(table, columns), table_name=table)
