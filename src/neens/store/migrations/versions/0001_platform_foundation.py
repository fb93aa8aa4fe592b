"""Platform foundation: companies, projects, keys, datasets, sessions, spans, model prices.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-30 07:53:13.928437
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import neens.store.types

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "companies",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_companies")),
        sa.UniqueConstraint("name", name=op.f("uq_companies_name")),
    )
    op.create_table(
        "projects",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("company_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["company_id"],
            ["companies.id"],
            name=op.f("fk_projects_company_id_companies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("company_id", "name", name=op.f("uq_projects_company_id_name")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("display_prefix", sa.String(length=40), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_api_keys_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_project_id"), ["project_id"], unique=False)

    op.create_table(
        "datasets",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_datasets_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasets")),
        sa.UniqueConstraint("project_id", "name", name=op.f("uq_datasets_project_id_name")),
    )
    op.create_table(
        "model_prices",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("model", sa.String(length=500), nullable=False),
        sa.Column("input_per_mtok_usd", sa.Float(), nullable=False),
        sa.Column("output_per_mtok_usd", sa.Float(), nullable=False),
        sa.Column("updated_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_model_prices_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_model_prices")),
        sa.UniqueConstraint("project_id", "model", name=op.f("uq_model_prices_project_id_model")),
    )
    op.create_table(
        "sessions",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("trace_id", sa.String(length=256), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("agent_name", sa.String(length=500), nullable=True),
        sa.Column("input", sa.Text(), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column(
            "models",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("step_count", sa.Integer(), nullable=False),
        sa.Column("span_count", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("cost_status", sa.String(length=20), nullable=False),
        sa.Column(
            "unpriced",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("started_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("ended_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("eval_run_id", sa.String(length=200), nullable=True),
        sa.Column("dataset_item_id", sa.String(length=200), nullable=True),
        sa.Column("version_label", sa.String(length=500), nullable=True),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_sessions_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_sessions")),
        sa.UniqueConstraint("project_id", "trace_id", name=op.f("uq_sessions_project_id_trace_id")),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_sessions_project_id_agent_name"),
            ["project_id", "agent_name"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_sessions_project_id_eval_run_id"),
            ["project_id", "eval_run_id"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_sessions_project_id_started_at"),
            ["project_id", "started_at"],
            unique=False,
        )

    op.create_table(
        "dataset_versions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_dataset_versions_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_versions")),
        sa.UniqueConstraint(
            "dataset_id", "number", name=op.f("uq_dataset_versions_dataset_id_number")
        ),
    )
    op.create_table(
        "spans",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "session_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("span_id", sa.String(length=256), nullable=False),
        sa.Column("parent_span_id", sa.String(length=256), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=50), nullable=True),
        sa.Column("start_time", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("end_time", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("status_code", sa.String(length=20), nullable=True),
        sa.Column("status_message", sa.Text(), nullable=True),
        sa.Column(
            "attributes",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "resource_attributes",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "events",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("scope_name", sa.Text(), nullable=True),
        sa.Column("input", sa.Text(), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("agent_name", sa.String(length=500), nullable=True),
        sa.Column("model", sa.String(length=500), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_pk"],
            ["sessions.pk"],
            name=op.f("fk_spans_session_pk_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_spans")),
        sa.UniqueConstraint("session_pk", "span_id", name=op.f("uq_spans_session_pk_span_id")),
    )
    with op.batch_alter_table("spans", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_spans_model"), ["model"], unique=False)

    op.create_table(
        "dataset_golden_marks",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("version_id", sa.String(length=40), nullable=False),
        sa.Column("marked_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_dataset_golden_marks_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["dataset_versions.id"],
            name=op.f("fk_dataset_golden_marks_version_id_dataset_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_golden_marks")),
    )
    with op.batch_alter_table("dataset_golden_marks", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_dataset_golden_marks_dataset_id"), ["dataset_id"], unique=False
        )

    op.create_table(
        "dataset_items",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("version_id", sa.String(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("input", sa.Text(), nullable=False),
        sa.Column("expected_output", sa.Text(), nullable=True),
        sa.Column(
            "metadata",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["dataset_versions.id"],
            name=op.f("fk_dataset_items_version_id_dataset_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_items")),
        sa.UniqueConstraint(
            "version_id", "position", name=op.f("uq_dataset_items_version_id_position")
        ),
    )


def downgrade() -> None:

    op.drop_table("dataset_items")
    with op.batch_alter_table("dataset_golden_marks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dataset_golden_marks_dataset_id"))

    op.drop_table("dataset_golden_marks")
    with op.batch_alter_table("spans", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_spans_model"))

    op.drop_table("spans")
    op.drop_table("dataset_versions")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sessions_project_id_started_at"))
        batch_op.drop_index(batch_op.f("ix_sessions_project_id_eval_run_id"))
        batch_op.drop_index(batch_op.f("ix_sessions_project_id_agent_name"))

    op.drop_table("sessions")
    op.drop_table("model_prices")
    op.drop_table("datasets")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_project_id"))

    op.drop_table("api_keys")
    op.drop_table("projects")
    op.drop_table("companies")
