"""Scoring again what content events changed after a pre-prod run had scored it.

Instrumentations that send message content as OTLP log records (`POST /v1/logs`) batch the logs
apart from the spans, so a trace's root span can arrive, link to a runner-mode item and be
scored before the text it answered with. When the events then change the session's output:

- a run still going scores the item again on the new text (its verdict is reset and the run's
  scoring job queued again; a job already running picks the item up before it finishes);
- a run already finished keeps its verdict, and the session says so (`content_after_run`):
  Neens does not change a finished run's result behind its reader's back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.run_lifecycle import TERMINAL
from neens.store.jobs import requeue
from neens.store.models import PreprodItem, PreprodRun
from neens.store.runs import RUN_JOBS, job_key

VERDICTS = ("scored", "error")
"""Item statuses that carry a verdict computed on the session's output."""


@dataclass(slots=True)
class Rescored:
    late: dict[int, str] = field(default_factory=dict)
    """Sessions a finished run had already given a verdict: session pk → run id."""
    queued: bool = False
    """A scoring job was queued: the caller wakes the workers."""


async def rescore_changed_outputs(s: AsyncSession, session_pks: list[int]) -> Rescored:
    """For sessions whose output just changed, in the transaction that changed it: reset the
    verdicts of their items in runs still going and queue those runs' scoring again; report
    those a finished run had already given a verdict."""
    linked = select(PreprodItem.run_id).where(PreprodItem.session_pk.in_(session_pks))
    runs = {
        run.id: run
        for run in await s.scalars(
            select(PreprodRun)
            .where(PreprodRun.id.in_(linked))
            .order_by(PreprodRun.id)
            .with_for_update()
        )
    }
    result = Rescored()
    if not runs:
        return result
    items = (
        await s.execute(
            select(PreprodItem.session_pk, PreprodItem.run_id).where(
                PreprodItem.session_pk.in_(session_pks), PreprodItem.status.in_(VERDICTS)
            )
        )
    ).all()
    for session_pk, run_id in items:
        assert session_pk is not None  # selected by it
        run = runs[run_id]
        if run.status in TERMINAL:
            result.late[session_pk] = run_id
            continue
        await s.execute(
            update(PreprodItem)
            .where(PreprodItem.run_id == run_id, PreprodItem.session_pk == session_pk)
            .values(status="captured", score=None, passed=None, error=None, scored_at=None)
        )
        if run.scoring_dispatched_at is not None:
            key = job_key("scoring", run_id)
            await requeue(s, RUN_JOBS["scoring"], {"run_id": run_id}, dedupe_key=key)
            result.queued = True
    return result
