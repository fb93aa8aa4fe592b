"""Linking runner-mode traces to the frozen items of a pre-prod run.

The rules (spec: "How linking behaves, exactly"):
- A trace tagged with an item id (`DATASET_ITEM_ID_KEY`) links only to that item, and only
  while it is pending.
  A duplicate replay or a typo links nowhere: linking it elsewhere would corrupt that prompt's
  score.
- An untagged trace links to the first item without a capture, in frozen order.
- A trace whose run id belongs to another project, or to a run that is cancelled or finished,
  or to a push-mode run, is ignored. A push run links only the answers it captured itself
  (sessions `<run id>:<item id>`, an id namespace ingest refuses), so nothing sent through
  ingest can take or replace a push item's answer, whatever it is tagged with.
- A trace is linked once its root span has arrived — the span that carries the agent's final
  answer usually ends, and so is exported, last.
- The first capture moves the run from awaiting_traces to running; the capture of the last
  pending item dispatches scoring, exactly once.

Each link runs in its own write transaction holding the run's row lock (PostgreSQL; SQLite
serialises writers), so concurrent traces of one run never take the same item.
"""

from __future__ import annotations

from sqlalchemy import exists, func, select

from neens.domain.run_lifecycle import TERMINAL
from neens.domain.sessions import SessionSummary
from neens.store.db import Database
from neens.store.models import PreprodItem, PreprodRun, Span, TraceSession
from neens.store.run_lifecycle import move
from neens.store.runs import dispatch_scoring_once
from neens.store.tenancy import owned_by
from neens.store.types import utcnow


async def link_traces(db: Database, project_id: str, summaries: dict[str, SessionSummary]) -> bool:
    """Link each tagged trace; True when any link dispatched scoring (the caller wakes workers)."""
    dispatched = False
    for trace_id, summary in summaries.items():
        if summary.eval_run_id is None:
            continue
        dispatched |= await _link_one(db, project_id, trace_id, summary)
    return dispatched


async def _link_one(db: Database, project_id: str, trace_id: str, summary: SessionSummary) -> bool:
    async with db.write() as s:
        run = await s.scalar(
            select(PreprodRun)
            .where(PreprodRun.id == summary.eval_run_id, owned_by(PreprodRun, project_id))
            .with_for_update()
        )
        if run is None or run.status in TERMINAL or run.runner_mode != "runner":
            return False
        session_pk = await s.scalar(
            select(TraceSession.pk).where(
                owned_by(TraceSession, project_id), TraceSession.trace_id == trace_id
            )
        )
        if session_pk is None:
            return False
        has_root = await s.scalar(
            select(exists().where(Span.session_pk == session_pk, Span.parent_span_id.is_(None)))
        )
        already = await s.scalar(
            select(PreprodItem.pk).where(
                PreprodItem.run_id == run.id, PreprodItem.session_pk == session_pk
            )
        )
        if not has_root or already is not None:
            return False
        pending = select(PreprodItem).where(
            PreprodItem.run_id == run.id, PreprodItem.status == "pending"
        )
        if summary.dataset_item_id is not None:
            pending = pending.where(PreprodItem.item_id == summary.dataset_item_id)
        item = await s.scalar(pending.order_by(PreprodItem.position).limit(1))
        if item is None:
            return False
        item.status = "captured"
        item.session_pk = session_pk
        item.captured_at = utcnow()
        if run.status == "awaiting_traces":
            await move(s, run, "running")
        await s.flush()
        remaining = await s.scalar(
            select(func.count()).where(
                PreprodItem.run_id == run.id, PreprodItem.status == "pending"
            )
        )
        if remaining:
            return False
        return await dispatch_scoring_once(s, run.id)
