"""The index of spans by model holds only the spans that report one.

Most spans report no model (agent, tool and bookkeeping spans); each took an entry in the index
on the ingest path all the same. Re-pricing a model (a case-insensitive match, which no plain
index serves) now walks this index, so it reads only the spans that report a model instead of
every span.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-01 18:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_spans_model", table_name="spans")
    reported = sa.text("model IS NOT NULL")
    op.create_index(
        "ix_spans_model", "spans", ["model"], sqlite_where=reported, postgresql_where=reported
    )


def downgrade() -> None:
    op.drop_index("ix_spans_model", table_name="spans")
    op.create_index("ix_spans_model", "spans", ["model"])
