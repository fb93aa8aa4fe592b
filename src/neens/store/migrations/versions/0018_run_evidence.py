"""A finished run's answers packed for sweep decisions (`run_evidence`).

A comparison of a finished sweep reads each child run's captured answers (verdict, cost, agent
name) from one packed row instead of one row per answer, while the row's basis still holds.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01 14:00:00.000000
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import neens.store.types

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "run_evidence",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("basis", sa.Text(), nullable=False),
        sa.Column("names", _json(), nullable=False),
        sa.Column("answers", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["preprod_runs.id"],
            name=op.f("fk_run_evidence_run_id_preprod_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_evidence")),
    )


def downgrade() -> None:
    op.drop_table("run_evidence")
