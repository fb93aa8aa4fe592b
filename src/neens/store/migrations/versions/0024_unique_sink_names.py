"""Notification sink names are unique in a project, as every other name is.

Sinks of one name made before this revision keep the oldest under that name; each later one is
renamed `NAME (2)`, `NAME (3)`, … (the first such name the project does not use), so nothing is
deleted and every sink stays told apart. Downgrading drops the constraint and keeps the names.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03 23:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_NAME_CHARS = 200


def _renamed(name: str, taken: set[str]) -> str:
    n = 2
    while True:
        suffix = f" ({n})"
        candidate = name[: MAX_NAME_CHARS - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        n += 1


def upgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.text(
            "SELECT id, project_id, name FROM notification_sinks "
            "ORDER BY project_id, created_at, id"
        )
    ).all()
    names: dict[str, set[str]] = {}
    for row in rows:
        names.setdefault(row.project_id, set()).add(row.name)
    seen: set[tuple[str, str]] = set()
    for row in rows:
        if (row.project_id, row.name) not in seen:
            seen.add((row.project_id, row.name))
            continue
        taken = names[row.project_id]
        new = _renamed(row.name, taken)
        taken.add(new)
        bind.execute(
            sa.text("UPDATE notification_sinks SET name = :name WHERE id = :id"),
            {"name": new, "id": row.id},
        )
    with op.batch_alter_table("notification_sinks", schema=None) as batch_op:
        batch_op.create_unique_constraint(
            batch_op.f("uq_notification_sinks_project_id_name"), ["project_id", "name"]
        )


def downgrade() -> None:
    with op.batch_alter_table("notification_sinks", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("uq_notification_sinks_project_id_name"), type_="unique"
        )
