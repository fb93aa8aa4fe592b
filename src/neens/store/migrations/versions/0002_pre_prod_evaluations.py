"""Pre-prod evaluations: agent connections, judges, runs, items, scores, jobs, insights and
notification sinks.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 08:12:13.007355
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import neens.store.types

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "jobs",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("kind", sa.String(length=50), nullable=False),
        sa.Column(
            "payload",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("dedupe_key", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("run_after", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("lease_until", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_jobs")),
        sa.UniqueConstraint("dedupe_key", name=op.f("uq_jobs_dedupe_key")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_jobs_status_run_after"), ["status", "run_after"], unique=False
        )

    op.create_table(
        "agent_connections",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=500), nullable=True),
        sa.Column("provider", sa.String(length=100), nullable=False),
        sa.Column("request_format", sa.String(length=20), nullable=False),
        sa.Column("answer_path", sa.String(length=500), nullable=True),
        sa.Column(
            "headers",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_agent_connections_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_connections")),
        sa.UniqueConstraint(
            "project_id", "name", name=op.f("uq_agent_connections_project_id_name")
        ),
    )
    op.create_table(
        "insights",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=50), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=True),
        sa.Column(
            "details",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_insights_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_insights")),
    )
    with op.batch_alter_table("insights", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_insights_project_id_created_at"),
            ["project_id", "created_at"],
            unique=False,
        )

    op.create_table(
        "judges",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=20), nullable=False),
        sa.Column(
            "config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("secret", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("score_production", sa.Boolean(), nullable=False),
        sa.Column("is_primary", sa.Boolean(), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_judges_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judges")),
        sa.UniqueConstraint("project_id", "name", name=op.f("uq_judges_project_id_name")),
    )
    op.create_table(
        "notification_sinks",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column(
            "headers",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_notification_sinks_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_sinks")),
    )
    op.create_table(
        "notification_deliveries",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("sink_id", sa.String(length=40), nullable=False),
        sa.Column("insight_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["insight_id"],
            ["insights.id"],
            name=op.f("fk_notification_deliveries_insight_id_insights"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["sink_id"],
            ["notification_sinks.id"],
            name=op.f("fk_notification_deliveries_sink_id_notification_sinks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_notification_deliveries")),
        sa.UniqueConstraint(
            "sink_id", "insight_id", name=op.f("uq_notification_deliveries_sink_id_insight_id")
        ),
    )
    op.create_table(
        "scores",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column(
            "session_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("judge_id", sa.String(length=40), nullable=False),
        sa.Column("judge_name", sa.String(length=200), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=True),
        sa.Column("item_id", sa.String(length=40), nullable=True),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("unscored_reason", sa.String(length=100), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=True),
        sa.Column("raw_reply", sa.Text(), nullable=True),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_scores_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_pk"],
            ["sessions.pk"],
            name=op.f("fk_scores_session_pk_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_scores")),
    )
    with op.batch_alter_table("scores", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_scores_project_id_source_created_at"),
            ["project_id", "source", "created_at"],
            unique=False,
        )
        batch_op.create_index(batch_op.f("ix_scores_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_scores_session_pk"), ["session_pk"], unique=False)

    op.create_table(
        "preprod_runs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("dataset_version_id", sa.String(length=40), nullable=False),
        sa.Column("version_label", sa.String(length=500), nullable=False),
        sa.Column("runner_mode", sa.String(length=20), nullable=False),
        sa.Column("agent_connection_id", sa.String(length=40), nullable=True),
        sa.Column("model", sa.String(length=500), nullable=True),
        sa.Column("model_provider", sa.String(length=100), nullable=True),
        sa.Column(
            "judge_ids",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "baseline",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "baseline_cohort",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "gate",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=40), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column("created_at", neens.store.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("started_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column(
            "scoring_dispatched_at", neens.store.types.UtcDateTime(timezone=True), nullable=True
        ),
        sa.Column("completed_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_preprod_runs_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["dataset_version_id"],
            ["dataset_versions.id"],
            name=op.f("fk_preprod_runs_dataset_version_id_dataset_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_preprod_runs_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_preprod_runs")),
    )
    with op.batch_alter_table("preprod_runs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_preprod_runs_project_id_created_at"),
            ["project_id", "created_at"],
            unique=False,
        )

    op.create_table(
        "preprod_items",
        sa.Column(
            "pk",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("item_id", sa.String(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("input", sa.Text(), nullable=False),
        sa.Column("expected_output", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column(
            "session_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=True),
        sa.Column("baseline_passed", sa.Boolean(), nullable=True),
        sa.Column("captured_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("scored_at", neens.store.types.UtcDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["preprod_runs.id"],
            name=op.f("fk_preprod_items_run_id_preprod_runs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_pk"],
            ["sessions.pk"],
            name=op.f("fk_preprod_items_session_pk_sessions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_preprod_items")),
        sa.UniqueConstraint("run_id", "item_id", name=op.f("uq_preprod_items_run_id_item_id")),
        sa.UniqueConstraint("run_id", "position", name=op.f("uq_preprod_items_run_id_position")),
    )


def downgrade() -> None:

    op.drop_table("preprod_items")
    with op.batch_alter_table("preprod_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_preprod_runs_project_id_created_at"))

    op.drop_table("preprod_runs")
    with op.batch_alter_table("scores", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_scores_session_pk"))
        batch_op.drop_index(batch_op.f("ix_scores_run_id"))
        batch_op.drop_index(batch_op.f("ix_scores_project_id_source_created_at"))

    op.drop_table("scores")
    op.drop_table("notification_deliveries")
    op.drop_table("notification_sinks")
    op.drop_table("judges")
    with op.batch_alter_table("insights", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_insights_project_id_created_at"))

    op.drop_table("insights")
    op.drop_table("agent_connections")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_status_run_after"))

    op.drop_table("jobs")
