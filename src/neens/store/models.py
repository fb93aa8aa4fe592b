"""The tables. Table objects never leave the store layer: queries return plain data.

Rows that record what happened are written once and never edited: dataset versions and items,
golden marks, spans. Sessions are the exception on purpose: a session is a roll-up of its spans,
re-derived (`domain.sessions.summarize_session`) whenever spans of its trace arrive.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from neens.store.types import BigIntPk, JsonType, UtcDateTime, utcnow

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        datetime: UtcDateTime(),
        dict[str, Any]: JsonType,
        list[Any]: JsonType,
    }


class Company(Base):
    __tablename__ = "companies"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Project(Base):
    """What a key scopes to: one agent of a company (e.g. "Support agent")."""

    __tablename__ = "projects"
    __table_args__ = (UniqueConstraint("company_id", "name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    company_id: Mapped[str] = mapped_column(ForeignKey("companies.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiKey(Base):
    """An `nk_live_…` key. Only its SHA-256 is stored; the key itself is shown once."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(20))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    display_prefix: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class Dataset(Base):
    __tablename__ = "datasets"
    __table_args__ = (UniqueConstraint("project_id", "name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class DatasetVersion(Base):
    """An immutable snapshot of a dataset's items."""

    __tablename__ = "dataset_versions"
    __table_args__ = (UniqueConstraint("dataset_id", "number"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    item_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class DatasetItem(Base):
    __tablename__ = "dataset_items"
    __table_args__ = (UniqueConstraint("version_id", "position"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    version_id: Mapped[str] = mapped_column(ForeignKey("dataset_versions.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    input: Mapped[str] = mapped_column(Text)
    expected_output: Mapped[str | None] = mapped_column(Text, default=None)
    item_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)


class GoldenMark(Base):
    """Append-only history of which version is a dataset's golden one; the newest mark wins.

    Kept apart from the versions so that marking a version golden never edits the version.
    """

    __tablename__ = "dataset_golden_marks"

    id: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    dataset_id: Mapped[str] = mapped_column(
        ForeignKey("datasets.id", ondelete="CASCADE"), index=True
    )
    version_id: Mapped[str] = mapped_column(ForeignKey("dataset_versions.id", ondelete="CASCADE"))
    marked_at: Mapped[datetime] = mapped_column(default=utcnow)


class TraceSession(Base):
    """One trace, rolled up from its spans. The public id is the trace id (unique per project)."""

    __tablename__ = "sessions"
    __table_args__ = (
        UniqueConstraint("project_id", "trace_id"),
        Index(None, "project_id", "started_at"),
        Index(None, "project_id", "agent_name"),
        Index(None, "project_id", "eval_run_id"),
    )

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    trace_id: Mapped[str] = mapped_column(String(256))
    source: Mapped[str] = mapped_column(String(20))
    agent_name: Mapped[str | None] = mapped_column(String(500), default=None)
    input: Mapped[str | None] = mapped_column(Text, default=None)
    output: Mapped[str | None] = mapped_column(Text, default=None)
    models: Mapped[list[Any]] = mapped_column(default=list)
    input_tokens: Mapped[int | None] = mapped_column(BigInteger, default=None)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger, default=None)
    latency_ms: Mapped[float | None] = mapped_column(Float, default=None)
    step_count: Mapped[int] = mapped_column(Integer, default=0)
    span_count: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float | None] = mapped_column(Float, default=None)
    cost_status: Mapped[str] = mapped_column(String(20))
    unpriced: Mapped[list[Any]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(20))
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    ended_at: Mapped[datetime | None] = mapped_column(default=None)
    eval_run_id: Mapped[str | None] = mapped_column(String(200), default=None)
    dataset_item_id: Mapped[str | None] = mapped_column(String(200), default=None)
    version_label: Mapped[str | None] = mapped_column(String(500), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class Span(Base):
    """A span exactly as received (after decoding), so its session can always be re-derived."""

    __tablename__ = "spans"
    __table_args__ = (UniqueConstraint("session_pk", "span_id"),)

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(BigIntPk, ForeignKey("sessions.pk", ondelete="CASCADE"))
    span_id: Mapped[str] = mapped_column(String(256))
    parent_span_id: Mapped[str | None] = mapped_column(String(256), default=None)
    name: Mapped[str] = mapped_column(Text)
    kind: Mapped[str | None] = mapped_column(String(50), default=None)
    start_time: Mapped[datetime | None] = mapped_column(default=None)
    end_time: Mapped[datetime | None] = mapped_column(default=None)
    status_code: Mapped[str | None] = mapped_column(String(20), default=None)
    status_message: Mapped[str | None] = mapped_column(Text, default=None)
    attributes: Mapped[dict[str, Any]] = mapped_column(default=dict)
    resource_attributes: Mapped[dict[str, Any]] = mapped_column(default=dict)
    events: Mapped[list[Any]] = mapped_column(default=list)
    scope_name: Mapped[str | None] = mapped_column(Text, default=None)
    input: Mapped[str | None] = mapped_column(Text, default=None)
    output: Mapped[str | None] = mapped_column(Text, default=None)
    agent_name: Mapped[str | None] = mapped_column(String(500), default=None)
    model: Mapped[str | None] = mapped_column(String(500), default=None, index=True)
    """The model this span reports (conventions applied), kept to find sessions to re-price."""


class ModelPrice(Base):
    """A project's own price for a model; it wins over the genai-prices table."""

    __tablename__ = "model_prices"
    __table_args__ = (UniqueConstraint("project_id", "model"),)

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    model: Mapped[str] = mapped_column(String(500))
    input_per_mtok_usd: Mapped[float] = mapped_column(Float)
    output_per_mtok_usd: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
