"""What happens once a pre-prod run has finished: job `run.finished`.

The job is queued by `neens.store.run_lifecycle` in the transaction that gives the run its
terminal status (completed, completed_with_regressions, failed or cancelled), once per run. It
runs every registered finish hook with the run's final numbers, then logs the run. A roll-up
that waits for runs to finish (a sweep's, for instance) registers a hook instead of polling.

A hook runs once per finished run in the normal course. Like every handler, it may run again
after a worker crash or when a hook fails (the job is retried, every hook with it), so a hook
derives what it writes from table state and writes it idempotently.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from neens.domain.run_lifecycle import RunStatus
from neens.queue.worker import JobContext
from neens.store.models import PreprodRun
from neens.store.runs import status_counts

log = logging.getLogger("neens.runs")


@dataclass(frozen=True, slots=True)
class FinishedRun:
    """A run as it finished: what a finish hook is told."""

    id: str
    project_id: str
    name: str
    version_label: str
    status: RunStatus
    error: str | None
    item_count: int
    counts: dict[str, int]
    """Items by status: pending, captured, scored, error."""
    completed_at: datetime | None


FinishHook = Callable[[JobContext, FinishedRun], Awaitable[None]]

FINISH_HOOKS: list[FinishHook] = []
"""Run in order for every finished run; add one with `on_run_finished`."""


def on_run_finished(hook: FinishHook) -> FinishHook:
    """Register `hook` to run for every finished run (usable as a decorator)."""
    FINISH_HOOKS.append(hook)
    return hook


async def run_finished(ctx: JobContext, payload: dict[str, Any]) -> None:
    run_id = str(payload["run_id"])
    async with ctx.db.read() as s:
        row = await s.get(PreprodRun, run_id)
        if row is None:  # deleted with its project since
            return
        counts = (await status_counts(s, [run_id]))[run_id]
    run = FinishedRun(
        id=row.id,
        project_id=row.project_id,
        name=row.name,
        version_label=row.version_label,
        status=row.status,
        error=row.error,
        item_count=row.item_count,
        counts=counts,
        completed_at=row.completed_at,
    )
    for hook in list(FINISH_HOOKS):
        await hook(ctx, run)
    log.info(
        "run %s (%s) finished %s: %d items, %s%s",
        run.id,
        run.version_label,
        run.status,
        run.item_count,
        ", ".join(f"{count} {status}" for status, count in counts.items()),
        f"; {run.error}" if run.error else "",
    )
