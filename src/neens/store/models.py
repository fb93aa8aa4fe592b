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
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    case,
    literal_column,
    select,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, column_property, mapped_column

from neens.domain.run_lifecycle import ItemStatus, RunStatus
from neens.store.types import BigIntPk, JsonType, UtcDateTime, attribute_text, utcnow

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


class PageSignOut(Base):
    """A pages session that was signed out, kept until it would have expired: its cookie, copied
    elsewhere, must not keep working after the browser that held it signed out."""

    __tablename__ = "page_sign_outs"

    session_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    """SHA-256 of the session's form token, which is random and new at every sign-in."""
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"))
    expires_at: Mapped[datetime] = mapped_column(index=True)


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


class Span(Base):
    """A span exactly as received (after decoding), so its session can always be re-derived."""

    __tablename__ = "spans"
    __table_args__ = (
        UniqueConstraint("session_pk", "span_id"),
        # Spans without a model (agents, tools, bookkeeping: most of them) are not indexed.
        Index(
            None,
            "model",
            sqlite_where=literal_column("model").is_not(None),
            postgresql_where=literal_column("model").is_not(None),
        ),
    )

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
    model: Mapped[str | None] = mapped_column(String(500), default=None)
    """The model this span reports (conventions applied), kept to find sessions to re-price."""


def _session_text(pk: Any, text: Any, span_id: Any, key: Any) -> Any:
    """A session's input or output: its own text, else its span's attribute (`TraceSession`)."""
    from_span = (
        select(attribute_text(Span.attributes, key))
        .where(Span.session_pk == pk, Span.span_id == span_id)
        .correlate_except(Span)
        .scalar_subquery()
    )
    return case((key.is_(None), text), else_=from_span)


class TraceSession(Base):
    """One trace, rolled up from its spans. The public id is the trace id (unique per project)."""

    __tablename__ = "sessions"
    __table_args__ = (
        UniqueConstraint("project_id", "trace_id"),
        # The list's order (newest first by row key) is the last column of each index it reads.
        Index(None, "project_id", "pk"),
        Index(None, "project_id", "started_at", "pk"),
        Index(None, "project_id", "agent_name", "pk"),
        Index(None, "project_id", "eval_run_id"),
        # Covering: a sweep decision reads a session's cost and agent name (and a cost-gated
        # run's stored verdict checks when its sessions changed) without its texts.
        Index(None, "pk", "cost_usd", "agent_name", "updated_at"),
    )

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    trace_id: Mapped[str] = mapped_column(String(256))
    source: Mapped[str] = mapped_column(String(20))
    agent_name: Mapped[str | None] = mapped_column(String(500), default=None)
    input_text: Mapped[str | None] = mapped_column("input", Text, default=None)
    """The input as text, or NULL when it is a span attribute's value (`input_key`)."""
    input_span_id: Mapped[str | None] = mapped_column(String(256), default=None)
    input_key: Mapped[str | None] = mapped_column(String(100), default=None)
    """Set when the input is, verbatim, this attribute of span `input_span_id`: stored once,
    in the span (a prompt can be megabytes, and ingest would write it twice)."""
    output_text: Mapped[str | None] = mapped_column("output", Text, default=None)
    output_span_id: Mapped[str | None] = mapped_column(String(256), default=None)
    output_key: Mapped[str | None] = mapped_column(String(100), default=None)
    input: Mapped[str | None] = column_property(
        _session_text(pk, input_text, input_span_id, input_key)
    )
    """The session's input, wherever it is stored (read-only)."""
    output: Mapped[str | None] = column_property(
        _session_text(pk, output_text, output_span_id, output_key)
    )
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
    warnings: Mapped[list[Any]] = mapped_column(default=list)
    """Dubious values flagged in the session: `[{"code", "message"}]`, re-derived with it."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class LogEvent(Base):
    """A GenAI content event received as an OTLP log record (`POST /v1/logs`).

    Kept apart from the span it belongs to, because spans are written once and the event may
    arrive before its span or after it; whenever the span's session is derived or read, the
    events of each span are added to the span's own, in the order received.
    """

    __tablename__ = "log_events"
    __table_args__ = (Index(None, "project_id", "trace_id"),)

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    trace_id: Mapped[str] = mapped_column(String(256))
    span_id: Mapped[str] = mapped_column(String(256))
    event: Mapped[dict[str, Any]] = mapped_column()
    """As a span event: `{"name", "time", "attributes", "body"}`."""
    received_at: Mapped[datetime] = mapped_column(default=utcnow)
    late_for_run_id: Mapped[str | None] = mapped_column(String(40), default=None)
    """The pre-prod run that had already finished scoring this trace when the event arrived and
    changed the session's output: its verdict was computed without it (a session warning)."""


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


class AgentConnection(Base):
    """An HTTP endpoint Neens calls with each golden prompt (push mode).

    `headers` may hold secrets (API keys); they are stored for calling the endpoint and never
    returned by the API.
    """

    __tablename__ = "agent_connections"
    __table_args__ = (UniqueConstraint("project_id", "name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    url: Mapped[str] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(500), default=None)
    provider: Mapped[str] = mapped_column(String(100))
    request_format: Mapped[str] = mapped_column(String(20))
    answer_path: Mapped[str | None] = mapped_column(String(500), default=None)
    headers: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class Judge(Base):
    """A judge deployment: managed, llm_prompt, composite or classifier.

    `config` is what the API shows; `secret` (an LLM endpoint's API key) is never returned.
    """

    __tablename__ = "judges"
    __table_args__ = (UniqueConstraint("project_id", "name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(20))
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    secret: Mapped[str | None] = mapped_column(Text, default=None)
    enabled: Mapped[bool] = mapped_column(default=True)
    score_production: Mapped[bool] = mapped_column(default=False)
    is_primary: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class FailureMode(Base):
    """A named way the agent fails, in the project's taxonomy. A classifier judge's label
    resolves to the mode whose name equals it exactly (case-sensitive)."""

    __tablename__ = "failure_modes"
    __table_args__ = (
        UniqueConstraint("project_id", "name"),
        Index(None, "project_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class FailureModeAnnotation(Base):
    """A person's verdict that one session shows (`confirmed`) or does not show one failure
    mode. One per (session, mode): posting the pair again replaces it, so the row holds the
    current verdict, and `updated_at` says when it was given."""

    __tablename__ = "failure_mode_annotations"
    __table_args__ = (
        UniqueConstraint("session_pk", "failure_mode_id"),
        Index(None, "failure_mode_id", "confirmed"),
    )

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    session_pk: Mapped[int] = mapped_column(BigIntPk, ForeignKey("sessions.pk", ondelete="CASCADE"))
    failure_mode_id: Mapped[str] = mapped_column(ForeignKey("failure_modes.id", ondelete="CASCADE"))
    confirmed: Mapped[bool] = mapped_column()
    note: Mapped[str | None] = mapped_column(Text, default=None)
    expected_output: Mapped[str | None] = mapped_column(Text, default=None)
    """The answer the agent should have given; a stress-test suite item built from this
    session carries it as its expected output."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class StressTestSuite(Base):
    """A golden dataset version frozen from the sessions confirmed in some failure modes."""

    __tablename__ = "stress_test_suites"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    failure_mode_ids: Mapped[list[Any]] = mapped_column(default=list)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    dataset_version_id: Mapped[str] = mapped_column(
        ForeignKey("dataset_versions.id", ondelete="CASCADE")
    )
    item_count: Mapped[int] = mapped_column(Integer)
    skipped: Mapped[list[Any]] = mapped_column(default=list)
    """Confirmed sessions left out, with why: `[{"sessionId", "reason"}]`."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class PreprodRun(Base):
    """A pre-prod evaluation run. Everything that defines it is copied at create and frozen."""

    __tablename__ = "preprod_runs"
    __table_args__ = (
        Index(None, "project_id", "created_at", "id"),
        Index(None, "project_id", "dataset_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(500))
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    dataset_version_id: Mapped[str] = mapped_column(
        ForeignKey("dataset_versions.id", ondelete="CASCADE")
    )
    version_label: Mapped[str] = mapped_column(String(500))
    runner_mode: Mapped[str] = mapped_column(String(20))
    agent_connection_id: Mapped[str | None] = mapped_column(String(40), default=None)
    model: Mapped[str | None] = mapped_column(String(500), default=None)
    model_provider: Mapped[str | None] = mapped_column(String(100), default=None)
    judge_ids: Mapped[list[Any]] = mapped_column(default=list)
    baseline: Mapped[dict[str, Any] | None] = mapped_column(JsonType, default=None)
    baseline_cohort: Mapped[dict[str, Any] | None] = mapped_column(JsonType, default=None)
    """The baseline side's averages (cost, latency, steps), stamped when the baseline is
    resolved, so a "7d" production window keeps meaning the week the run was scored in."""
    gate: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[RunStatus] = mapped_column(String(40))
    """Changed only by `neens.store.run_lifecycle`."""
    error: Mapped[str | None] = mapped_column(Text, default=None)
    item_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    scoring_dispatched_at: Mapped[datetime | None] = mapped_column(default=None)
    completed_at: Mapped[datetime | None] = mapped_column(default=None)
    push_concurrency: Mapped[int | None] = mapped_column(Integer, default=None)
    """Calls in flight for this push run; None: the server's NEENS_PUSH_CONCURRENCY. A sweep
    gives each of its runs its arm's share."""
    green: Mapped[bool | None] = mapped_column(default=None)
    """A finished sweep child run's verdict as its sweep reads it (completed, gate passed, zero
    regressions), stored once worked out; valid only while `green_basis` is still what it rests on
    (`neens.store.sweep_greens`). None: not worked out yet."""
    green_basis: Mapped[str | None] = mapped_column(Text, default=None)
    imported: Mapped[dict[str, Any] | None] = mapped_column(JsonType, default=None)
    """An imported run's source (tool, version, run id, file SHA-256) and what its format cannot
    express (`unknown`: field → reason); None on a run Neens drove. An imported run is read-only."""


class RunEvidence(Base):
    """A finished run's captured answers as a sweep decision reads them (verdict, cost, agent
    name per answer), packed once so a comparison does not re-read every answer; valid only while
    `basis` is still what they rest on (`neens.store.run_evidence`)."""

    __tablename__ = "run_evidence"

    run_id: Mapped[str] = mapped_column(
        ForeignKey("preprod_runs.id", ondelete="CASCADE"), primary_key=True
    )
    basis: Mapped[str] = mapped_column(Text)
    names: Mapped[list[Any]] = mapped_column(JsonType)
    """The agent names the answers reported; the packed agent codes index it."""
    answers: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ModelSweep(Base):
    """A model sweep: one frozen dataset version against several arms, k runs each, under the
    conditions pinned here (`fingerprint`)."""

    __tablename__ = "model_sweeps"
    __table_args__ = (Index(None, "project_id", "created_at", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(500))
    version_label: Mapped[str] = mapped_column(String(500))
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    dataset_version_id: Mapped[str] = mapped_column(
        ForeignKey("dataset_versions.id", ondelete="CASCADE")
    )
    item_count: Mapped[int] = mapped_column(Integer)
    pass_k: Mapped[int] = mapped_column(Integer)
    budget_usd: Mapped[float | None] = mapped_column(Float, default=None)
    judge_ids: Mapped[list[Any]] = mapped_column(default=list)
    gate: Mapped[dict[str, Any]] = mapped_column(default=dict)
    fingerprint: Mapped[str] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(40))
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    """Why the sweep was cancelled (by request, or the budget) or failed."""
    void_reason: Mapped[str | None] = mapped_column(Text, default=None)
    diverged_arms: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(default=None)


class ShareSettings(Base):
    """Whether a project's results may be shared by public link; off until an admin turns it on."""

    __tablename__ = "share_settings"

    project_id: Mapped[str] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    enabled: Mapped[bool] = mapped_column(default=False)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class ShareLink(Base):
    """A read-only public link to one result. Only the token's hash is stored: the URL is shown
    once, when the link is made."""

    __tablename__ = "share_links"
    __table_args__ = (Index(None, "project_id", "created_at", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    resource_type: Mapped[str] = mapped_column(String(40))
    resource_id: Mapped[str] = mapped_column(String(40))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class SweepArm(Base):
    """One arm of a sweep: one agent connection, its model and provider copied at create."""

    __tablename__ = "model_sweep_arms"
    __table_args__ = (
        UniqueConstraint("sweep_id", "position"),
        UniqueConstraint("sweep_id", "label"),
        UniqueConstraint("sweep_id", "agent_connection_id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    sweep_id: Mapped[str] = mapped_column(ForeignKey("model_sweeps.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    label: Mapped[str] = mapped_column(String(200))
    agent_connection_id: Mapped[str] = mapped_column(String(40))
    model: Mapped[str | None] = mapped_column(String(500), default=None)
    model_provider: Mapped[str | None] = mapped_column(String(100), default=None)
    concurrency: Mapped[int] = mapped_column(Integer)
    """Calls this arm's run may have in flight: its share of the sweep's."""
    status: Mapped[str] = mapped_column(String(40), default="pending")
    """`failed` or `cancelled` when the sweep itself ended the arm; otherwise re-derived from
    the child runs at each roll-up."""
    error: Mapped[str | None] = mapped_column(Text, default=None)


class SweepRun(Base):
    """One of an arm's k runs: `run_id` is set when it is launched. No foreign key on purpose:
    a child run that vanished must be seen as vanished (the sweep goes void), not cascade."""

    __tablename__ = "model_sweep_runs"
    __table_args__ = (UniqueConstraint("arm_id", "attempt"), Index(None, "run_id"))

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    sweep_id: Mapped[str] = mapped_column(ForeignKey("model_sweeps.id", ondelete="CASCADE"))
    arm_id: Mapped[str] = mapped_column(ForeignKey("model_sweep_arms.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    run_id: Mapped[str | None] = mapped_column(String(40), default=None)


class PreprodItem(Base):
    """One frozen prompt of a run: its snapshot, its capture and its verdict."""

    __tablename__ = "preprod_items"
    __table_args__ = (
        UniqueConstraint("run_id", "item_id"),
        UniqueConstraint("run_id", "position"),
        # Covering: a sweep decision reads a run's verdicts and captured sessions without the
        # frozen prompts.
        Index(None, "run_id", "item_id", "status", "passed", "session_pk"),
    )

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("preprod_runs.id", ondelete="CASCADE"))
    item_id: Mapped[str] = mapped_column(String(40))
    position: Mapped[int] = mapped_column(Integer)
    input: Mapped[str] = mapped_column(Text)
    expected_output: Mapped[str | None] = mapped_column(Text, default=None)
    status: Mapped[ItemStatus] = mapped_column(String(20))
    session_pk: Mapped[int | None] = mapped_column(
        BigIntPk, ForeignKey("sessions.pk", ondelete="SET NULL"), default=None
    )
    error: Mapped[str | None] = mapped_column(Text, default=None)
    score: Mapped[float | None] = mapped_column(Float, default=None)
    passed: Mapped[bool | None] = mapped_column(default=None)
    baseline_passed: Mapped[bool | None] = mapped_column(default=None)
    captured_at: Mapped[datetime | None] = mapped_column(default=None)
    scored_at: Mapped[datetime | None] = mapped_column(default=None)
    output: Mapped[str | None] = mapped_column(Text, default=None)
    """An imported item's recorded answer (its first repeat's); a driven run's is its session's."""
    trials: Mapped[list[Any] | None] = mapped_column(JsonType, default=None)
    """An imported item's result per repeat; None on a run Neens drove."""


class Score(Base):
    """One judge's verdict on one session, with the prompt and raw reply behind it."""

    __tablename__ = "scores"
    __table_args__ = (
        Index(None, "session_pk"),
        Index(None, "run_id"),
        Index(None, "project_id", "source", "created_at"),
        Index(None, "project_id", "pk"),
        Index(None, "project_id", "source", "pk"),
    )

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    session_pk: Mapped[int] = mapped_column(BigIntPk, ForeignKey("sessions.pk", ondelete="CASCADE"))
    judge_id: Mapped[str] = mapped_column(String(40))
    judge_name: Mapped[str] = mapped_column(String(200))
    run_id: Mapped[str | None] = mapped_column(String(40), default=None)
    item_id: Mapped[str | None] = mapped_column(String(40), default=None)
    source: Mapped[str] = mapped_column(String(20))
    score: Mapped[float | None] = mapped_column(Float, default=None)
    label: Mapped[str | None] = mapped_column(String(200), default=None)
    passed: Mapped[bool | None] = mapped_column(default=None)
    reason: Mapped[str] = mapped_column(Text, default="")
    unscored_reason: Mapped[str | None] = mapped_column(String(100), default=None)
    prompt: Mapped[str | None] = mapped_column(Text, default=None)
    raw_reply: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Job(Base):
    """Work for the workers, claimed with a lease so a dead worker's job comes back.

    `dedupe_key` makes enqueueing idempotent: a second enqueue of the same key is a no-op while
    the first is unfinished.
    """

    __tablename__ = "jobs"
    __table_args__ = (Index(None, "status", "run_after"),)

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(50))
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    dedupe_key: Mapped[str | None] = mapped_column(String(200), unique=True, default=None)
    status: Mapped[str] = mapped_column(String(20))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    run_after: Mapped[datetime] = mapped_column(default=utcnow)
    lease_until: Mapped[datetime | None] = mapped_column(default=None)
    worker: Mapped[str | None] = mapped_column(String(200), default=None)
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)


class Insight(Base):
    """Something a team should know, such as a pre-prod regression, with what it is about."""

    __tablename__ = "insights"
    __table_args__ = (Index(None, "project_id", "created_at", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(50))
    title: Mapped[str] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(String(40), default=None)
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class NotificationSink(Base):
    __tablename__ = "notification_sinks"
    __table_args__ = (UniqueConstraint("project_id", "name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    url: Mapped[str] = mapped_column(Text)
    headers: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class NotificationDelivery(Base):
    """One insight sent to one sink: every attempt's outcome is kept."""

    __tablename__ = "notification_deliveries"
    __table_args__ = (UniqueConstraint("sink_id", "insight_id"), Index(None, "sink_id", "pk"))

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    sink_id: Mapped[str] = mapped_column(ForeignKey("notification_sinks.id", ondelete="CASCADE"))
    insight_id: Mapped[str] = mapped_column(ForeignKey("insights.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(20))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_status_code: Mapped[int | None] = mapped_column(Integer, default=None)
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(default=None)


class Experiment(Base):
    """One graded run of a task over a dataset (`neens exp run`), frozen when it starts.

    What defines it is copied at the start and never edited: the resolved spec, the planned
    cases (a Neens dataset version's items are copied too, so the experiment does not move when
    the dataset gets a new golden version), and the fingerprints a resume is checked against.
    Only `finished_at` is set later, when every planned case-trial has been saved.
    """

    __tablename__ = "experiments"
    __table_args__ = (Index(None, "created_at", "id"), Index(None, "name", "created_at"))

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(20))
    """"run" for `exp run`, "regrade" for `exp regrade`, "aa" for the two runs of `exp aa`, "ab"
    for the two arms of `exp run --arm` (each arm's name and position in `spec["ab"]`)."""
    name: Mapped[str] = mapped_column(String(500))
    spec: Mapped[dict[str, Any]] = mapped_column()
    """The spec as run: its own keys with the command line's datasets, graders and trials."""
    dataset_ref: Mapped[str] = mapped_column(Text)
    """What the dataset was named as: a file path, or a Neens dataset or version id."""
    dataset_version_id: Mapped[str | None] = mapped_column(String(40), default=None)
    dataset_hash: Mapped[str] = mapped_column(String(64))
    task_hash: Mapped[str] = mapped_column(String(64))
    agent_files: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """The files the task's command names, each with the SHA-256 of its content."""
    graders: Mapped[list[Any]] = mapped_column(default=list)
    """Each grader's name, kind and version."""
    cases: Mapped[list[Any]] = mapped_column(default=list)
    """The planned cases, in run order, each as {id, input, expected?, kind?, group?}."""
    selection: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """How a partial run chose its cases (--failing, --case, --first-n, --sample, --seed)."""
    failing_of: Mapped[str | None] = mapped_column(String(40), default=None)
    """The experiment whose failing cases this one re-ran (--failing)."""
    source_id: Mapped[str | None] = mapped_column(String(40), default=None)
    """For a regrade: the experiment whose stored outputs it graded again."""
    pair_id: Mapped[str | None] = mapped_column(String(40), default=None)
    """For an A/A run (`exp aa`) or an A/B arm (`exp run --arm`): the other one of the pair."""
    trials: Mapped[int] = mapped_column(Integer)
    planned: Mapped[int] = mapped_column(Integer)
    """Case-trials planned: cases × trials."""
    concurrency: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    claimed_by: Mapped[str | None] = mapped_column(String(200), default=None)
    """The process running it now (`exp.claims`), or null; one process at a time."""
    claimed_until: Mapped[datetime | None] = mapped_column(default=None)
    """When that claim lapses unless its process renews it."""


class ExperimentTrial(Base):
    """One case-trial of an experiment, saved as it finishes: the task's answer or its error.

    `passed` is None when no grader produced a verdict (the case-trial is ungraded), and for
    errors. A trial run again (`--resume --retry-errors`) replaces its error row.
    """

    __tablename__ = "experiment_trials"
    __table_args__ = (UniqueConstraint("experiment_id", "case_id", "trial"),)

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    experiment_id: Mapped[str] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    case_id: Mapped[str] = mapped_column(String(500))
    trial: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20))
    """"done" (the task answered) or "error"."""
    error_kind: Mapped[str | None] = mapped_column(String(20), default=None)
    """"infra" (transport, 429, 5xx after retries) or "agent" (exit code, timeout, bad reply)."""
    error: Mapped[str | None] = mapped_column(Text, default=None)
    output: Mapped[str | None] = mapped_column(Text, default=None)
    passed: Mapped[bool | None] = mapped_column(default=None)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    latency_ms: Mapped[float | None] = mapped_column(Float, default=None)
    cost_usd: Mapped[float | None] = mapped_column(Float, default=None)
    seq_passed_at: Mapped[int | None] = mapped_column(Integer, default=None)
    """With --seq: the attempt (1, 2, …) at which the case-trial first passed; None if none did.
    `passed` stays the first attempt's."""
    seq_log: Mapped[list[Any] | None] = mapped_column(JsonType, default=None)
    """With --seq: every attempt after the first, with the feedback it was given."""
    started_at: Mapped[datetime] = mapped_column()
    finished_at: Mapped[datetime] = mapped_column()


class ExperimentGrade(Base):
    """One grader's verdict on one case-trial, with the grader's version at the time."""

    __tablename__ = "experiment_grades"
    __table_args__ = (UniqueConstraint("trial_pk", "grader"),)

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    trial_pk: Mapped[int] = mapped_column(
        BigIntPk, ForeignKey("experiment_trials.pk", ondelete="CASCADE")
    )
    grader: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))
    version: Mapped[str] = mapped_column(String(64))
    score: Mapped[float | None] = mapped_column(Float, default=None)
    passed: Mapped[bool | None] = mapped_column(default=None)
    unscored: Mapped[str | None] = mapped_column(String(50), default=None)
    """Why there is no verdict: the judge's reason code, or "grader_error"."""
    reason: Mapped[str] = mapped_column(Text)
    prompt: Mapped[str | None] = mapped_column(Text, default=None)
    raw_reply: Mapped[str | None] = mapped_column(Text, default=None)


class ExperimentSession(Base):
    """A line of work in one project folder (`neens exp session new --name TOPIC`): the runs
    made there and the notes taken, in time order."""

    __tablename__ = "experiment_sessions"
    __table_args__ = (Index(None, "folder", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    folder: Mapped[str] = mapped_column(Text)
    """The absolute path of the folder it was started in."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ExperimentSessionEntry(Base):
    """One step of a session: a run or a regrade made in its folder, or a note."""

    __tablename__ = "experiment_session_entries"
    __table_args__ = (Index(None, "session_id", "pk"),)

    pk: Mapped[int] = mapped_column(BigIntPk, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("experiment_sessions.id", ondelete="CASCADE")
    )
    kind: Mapped[str] = mapped_column(String(20))
    """"run", "regrade" or "note"."""
    experiment_id: Mapped[str | None] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), default=None
    )
    previous_id: Mapped[str | None] = mapped_column(String(40), default=None)
    """The session's run it is compared with: the one before it on the same dataset."""
    files: Mapped[dict[str, Any] | None] = mapped_column(JsonType, default=None)
    """What the run was made from: each file (the spec, the agent's, the graders', the
    dataset) by its path relative to the folder, with the SHA-256 of its content."""
    text: Mapped[str | None] = mapped_column(Text, default=None)
    """A note's text."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ExperimentSessionFolder(Base):
    """Which session is current in a folder: each `exp run` made there joins it."""

    __tablename__ = "experiment_session_folders"

    folder: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("experiment_sessions.id", ondelete="CASCADE")
    )
    set_at: Mapped[datetime] = mapped_column(default=utcnow)


class ExperimentSeriesRound(Base):
    """An experiment tagged as the next round of a series (`exp run --series NAME`): v1, v2, …

    Written once, when the run has finished; an experiment is a round of at most one series.
    """

    __tablename__ = "experiment_series_rounds"
    __table_args__ = (UniqueConstraint("experiment_id"),)

    series: Mapped[str] = mapped_column(String(200), primary_key=True)
    round: Mapped[int] = mapped_column(Integer, primary_key=True)
    """1 for v1, 2 for v2, …, with no gaps."""
    experiment_id: Mapped[str] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ExperimentSweep(Base):
    """A config race (`neens exp sweep`): its definition, frozen when it starts, and its decision.

    `definition` holds everything the race is made from (the configs and their fingerprints, the
    dataset, the seeded train/held-out split, the budget and its schedule, the guard suites), so
    `--resume` replays exactly the same race. `decision` and `adopted` are set once, when it ends:
    what `--guard prior` reads.
    """

    __tablename__ = "experiment_sweeps"
    __table_args__ = (Index(None, "created_at", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(500))
    """The configs' names, comma-separated, in the order given."""
    dataset_ref: Mapped[str] = mapped_column(Text)
    definition: Mapped[dict[str, Any]] = mapped_column()
    decision: Mapped[str | None] = mapped_column(String(10), default=None)
    """"adopt" or "keep", once decided."""
    adopted: Mapped[str | None] = mapped_column(String(200), default=None)
    """The config adopted (None when the start was kept)."""
    result: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)


class ExperimentSweepRun(Base):
    """An experiment run for a sweep: one config on one round's cases, on the held-out cases,
    or on a guard suite."""

    __tablename__ = "experiment_sweep_runs"
    __table_args__ = (UniqueConstraint("sweep_id", "config", "part", "round"),)

    experiment_id: Mapped[str] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True
    )
    sweep_id: Mapped[str] = mapped_column(ForeignKey("experiment_sweeps.id", ondelete="CASCADE"))
    config: Mapped[str] = mapped_column(String(200))
    part: Mapped[str] = mapped_column(String(10))
    """"race", "heldout" or "guard"."""
    round: Mapped[int] = mapped_column(Integer)
    """The race round (0-based), the guard suite's position, 0 for the held-out run."""


class ExperimentMatrix(Base):
    """A matrix of configs run together (`exp run matrix.json`): its cells, each an experiment
    of its own, compared with its baseline cell.

    `spec` is the matrix as run, frozen at the start: the spec as written, every cell with the
    JSON Pointers it sets, the baseline, the chosen cells (--cell), the seed of the interleaved
    order and the reuse policy. `finished_at` is set once every cell's experiment has finished.
    """

    __tablename__ = "experiment_matrices"
    __table_args__ = (Index(None, "name", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(500))
    spec: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)


class ExperimentMatrixCell(Base):
    """One cell of a matrix run, and the experiment that holds its case-trials."""

    __tablename__ = "experiment_matrix_cells"
    __table_args__ = (UniqueConstraint("experiment_id"),)

    matrix_id: Mapped[str] = mapped_column(
        ForeignKey("experiment_matrices.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    """The cell's place in the matrix: axes in order, the last one changing fastest."""
    cell: Mapped[str] = mapped_column(String(500))
    """Its name: `axis=value,axis=value` in axis order, or the variant's name."""
    baseline: Mapped[bool] = mapped_column()
    experiment_id: Mapped[str] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    reused: Mapped[dict[str, Any] | None] = mapped_column(JsonType, default=None)
    """With --reuse: how many case-trials were copied, from which experiments, and the oldest
    one's start."""
