"""The one place a pre-prod run's status changes.

Creating a run, linking its first trace, the push job, scoring, cancelling, the reconcile sweep
and a job that gave up all move a run through here, so the rules of
`neens.domain.run_lifecycle` hold whichever path moves it:

- A move the lifecycle does not allow is refused (`RunTransitionRefused`, a 409 if it reaches
  the API): a finished run never changes status again.
- The UPDATE names the status it moves from (compare-and-set). Callers read the run under its
  row lock (PostgreSQL; SQLite serialises writers), and a caller that still read a stale status
  moves nothing and is refused. So of two paths that finish one run at once, such as a cancel
  and the end of scoring, one wins and the other is refused or, having looked first, does
  nothing.
- Reaching a terminal status enqueues the run's `run.finished` job in the same transaction,
  with one dedupe key per run: a committed finish always has its job, a rolled-back one never
  does, and no run has two.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.run_lifecycle import TERMINAL, RunStatus, check_move, first_status
from neens.errors import RunTransitionRefused
from neens.store.jobs import JobKind, enqueue
from neens.store.models import PreprodRun
from neens.store.types import storable_text, utcnow


def finished_job_key(run_id: str) -> str:
    """The dedupe key of a run's `run.finished` job: one per run, ever."""
    return f"finished:{run_id}"


def open_run(s: AsyncSession, run: PreprodRun) -> None:
    """Give a new run its first status and add it to the session."""
    run.status = first_status(run.runner_mode)
    run.started_at = run.created_at if run.status == "running" else None
    s.add(run)


async def move(
    s: AsyncSession, run: PreprodRun, to: RunStatus, *, error: str | None = None
) -> None:
    """Move `run` (read in this transaction, under its row lock) to `to`, stamping when it
    started or finished and, with `error`, why it failed; raises `RunTransitionRefused` when
    the lifecycle does not allow it from the status the run is in."""
    current = run.status
    check_move(run.id, current, to)
    now = utcnow()
    values: dict[str, Any] = {"status": to}
    if to == "running":
        values["started_at"] = now
    if to in TERMINAL:
        values["completed_at"] = now
    if error is not None:
        values["error"] = storable_text(error)
    moved = await s.scalar(
        update(PreprodRun)
        .where(PreprodRun.id == run.id, PreprodRun.status == current)
        .values(**values)
        .returning(PreprodRun.id),
        execution_options={"synchronize_session": "fetch"},
    )
    if moved is None:
        now_in = await s.scalar(select(PreprodRun.status).where(PreprodRun.id == run.id))
        raise RunTransitionRefused(
            f"run {run.id} cannot move from {current} to {to}: it moved to {now_in} meanwhile",
            current=str(now_in),
            to=to,
        )
    if to in TERMINAL:
        await enqueue(
            s, JobKind.RUN_FINISHED, {"run_id": run.id}, dedupe_key=finished_job_key(run.id)
        )
