"""Page sign-outs: the pages sessions signed out before they expired.

A page session is a signed cookie; signing out deleted it from one browser only, so a copy kept
working until it expired. A signed-out session's form-token hash is kept here until then, and
every page request checks it.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03 22:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import neens.store.types

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "page_sign_outs",
        sa.Column("session_hash", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("expires_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"],
            ["api_keys.id"],
            name=op.f("fk_page_sign_outs_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_hash", name=op.f("pk_page_sign_outs")),
    )
    with op.batch_alter_table("page_sign_outs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_page_sign_outs_expires_at"), ["expires_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("page_sign_outs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_page_sign_outs_expires_at"))
    op.drop_table("page_sign_outs")
