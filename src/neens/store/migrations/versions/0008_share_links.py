"""Share links: whether a project may share results by public link, and the links (token hashes,
expiry, revocation).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 21:36:58.762169
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import neens.store.types

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "share_links",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("resource_type", sa.String(length=40), nullable=False),
        sa.Column("resource_id", sa.String(length=40), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_share_links_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_share_links")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_share_links_token_hash")),
    )
    with op.batch_alter_table("share_links", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_share_links_project_id_created_at_id"),
            ["project_id", "created_at", "id"],
            unique=False,
        )

    op.create_table(
        "share_settings",
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("updated_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_share_settings_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("project_id", name=op.f("pk_share_settings")),
    )


def downgrade() -> None:
    op.drop_table("share_settings")
    with op.batch_alter_table("share_links", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_share_links_project_id_created_at_id"))

    op.drop_table("share_links")
