"""Sessions as their routes and pages show them: a page of the list, and one session with its
span tree, each LLM span priced with the project's prices."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from neens.domain.conventions import Flag, span_view
from neens.domain.pricing import PriceBook, span_cost
from neens.domain.span_tree import NESTED_LEVELS, SpanNode, parent_cycle_members, span_tree, walk
from neens.domain.spans import SpanRecord
from neens.store import pricing
from neens.store.db import Database
from neens.store.session_reads import (
    SessionFilter,
    SessionKey,
    StoredSession,
    get_session,
    list_sessions,
)


async def session_list(
    db: Database,
    project_id: str,
    filt: SessionFilter,
    *,
    limit: int,
    after: SessionKey | None,
    preview_chars: int | None = None,
) -> tuple[list[StoredSession], SessionKey | None]:
    """Newest first (by arrival, or by start with a time filter): a page, and the key of its
    last session when more follow; inputs and outputs cut to `preview_chars` when given."""
    return await list_sessions(
        db, project_id, filt, limit=limit, after=after, preview_chars=preview_chars
    )


@dataclass(slots=True)
class SpanView:
    """One span as it is shown: what the conventions read from it, its own cost (LLM spans)
    and its children."""

    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    start_time: datetime | None
    end_time: datetime | None
    duration_ms: float | None
    status: str | None
    status_message: str | None
    input: str | None
    output: str | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    unpriced_reason: str | None
    attributes: dict[str, Any]
    resource_attributes: dict[str, Any]
    events: list[dict[str, Any]]
    warnings: list[Flag]
    children: list[SpanView] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SessionDetail:
    """A session and its span tree: root spans with their children."""

    session: StoredSession
    spans: list[SpanView]


def _span_view(node: SpanNode, book: PriceBook, on_cycle: bool) -> SpanView:
    """One span without its children (the caller places them)."""
    r = node.record
    view = span_view(r)
    cost = span_cost(view, book) if view.kind == "llm" else None
    duration = (
        (r.end_time - r.start_time).total_seconds() * 1000 if r.start_time and r.end_time else None
    )
    flags = list(view.flags)
    if on_cycle:
        flags.append(
            Flag(
                "parent_cycle", "this span is its own ancestor through parent ids; shown as a root"
            )
        )
    if cost is not None and cost.overflow and cost.unpriced_reason is not None:
        flags.append(Flag("cost_overflow", cost.unpriced_reason))
    return SpanView(
        span_id=r.span_id,
        parent_span_id=r.parent_span_id,
        name=r.name,
        kind=view.kind,
        start_time=r.start_time,
        end_time=r.end_time,
        duration_ms=duration,
        status=r.status_code,
        status_message=r.status_message,
        input=view.input,
        output=view.output,
        model=view.model,
        input_tokens=view.input_tokens,
        output_tokens=view.output_tokens,
        cost_usd=cost.usd if cost else None,
        unpriced_reason=cost.unpriced_reason if cost else None,
        attributes=r.attributes,
        resource_attributes=r.resource_attributes,
        events=r.events,
        warnings=flags,
    )


def span_views(records: list[SpanRecord], book: PriceBook) -> list[SpanView]:
    """The span tree as it is shown, built without recursion and nested at most
    `NESTED_LEVELS` deep (see there): a span deeper than that joins its ancestor's
    descendants at the last nested level."""
    on_cycle = parent_cycle_members(records)
    roots: list[SpanView] = []
    holder: dict[int, SpanView] = {}
    """id(node) → the SpanView whose `children` receive that node's children."""
    for node, parent, depth in walk(span_tree(records)):
        out = _span_view(node, book, node.record.span_id in on_cycle)
        if parent is None:
            roots.append(out)
        else:
            holder[id(parent)].children.append(out)
        holder[id(node)] = out if depth < NESTED_LEVELS else holder[id(parent)]
    return roots


async def session_detail(db: Database, project_id: str, session_id: str) -> SessionDetail:
    """The session and its span tree; each LLM span carries its own cost or unpriced reason."""
    stored = await get_session(db, project_id, session_id)
    book = PriceBook(await pricing.list_prices(db, project_id))
    return SessionDetail(stored, span_views(stored.spans, book))
