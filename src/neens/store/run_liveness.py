"""Keeping every `running` run moving: no run stays `running` for ever.

A `running` run always has a live job working on it (its push job while items are pending in
push mode, then its scoring job), except a runner-mode run waiting for traces. A job that fails
for good fails its run (`fail_run`), and `reconcile_runs`, swept by every worker, re-queues or
fails any run found without one.
"""

from __future__ import annotations

import logging

from sqlalchemy import func, select

from neens.domain.run_lifecycle import can_move
from neens.store.db import Database
from neens.store.jobs import MAX_ATTEMPTS, requeue
from neens.store.models import PreprodItem, PreprodRun
from neens.store.run_lifecycle import move
from neens.store.runs import (
    RUN_JOBS,
    RunJob,
    job_key,
    jobs_of,
    last_line,
    live_jobs,
    status_counts,
)
from neens.store.types import utcnow

log = logging.getLogger("neens.runs")


async def fail_run(db: Database, run_id: str, error: str) -> bool:
    """End a `running` run as `failed` with `error`; False when it had ended already."""
    async with db.write() as s:
        run = await s.scalar(select(PreprodRun).where(PreprodRun.id == run_id).with_for_update())
        if run is None or not can_move(run.status, "failed"):
            return False
        await move(s, run, "failed", error=error)
        return True


def gave_up_reason(job: RunJob, error: str) -> str:
    return (
        f"Neens could not finish this run: its {job} job failed {MAX_ATTEMPTS} times "
        f"(last error: {error}); the worker's log has the details"
    )


async def reconcile_runs(db: Database) -> list[str]:
    """Give every `running` run without a live job one, or fail it with the reason.

    A run needs its push job while items are pending (push mode), then its scoring job. Such a
    job can be missing only when something went wrong between the steps (a worker died after a
    job failed for good but before it failed the run; a job row was lost). Runner-mode runs with
    pending items wait for traces, not for a job, and are left alone. Returns what was done, one
    line per run, for the log.
    """
    async with db.read() as s:
        running = dict(
            (
                await s.execute(
                    select(PreprodRun.id, PreprodRun.runner_mode).where(
                        PreprodRun.status == "running"
                    )
                )
            ).all()
        )
    done: list[str] = []
    ids = list(running)
    for start in range(0, len(ids), 200):
        chunk = ids[start : start + 200]
        async with db.read() as s:
            counts = await status_counts(s, chunk)
            jobs = await jobs_of(s, chunk)
        for run_id in chunk:
            if live_jobs(jobs, run_id):
                continue
            if counts[run_id]["pending"] and running[run_id] != "push":
                continue
            action = await _reconcile_run(db, run_id)
            if action is not None:
                log.warning("run %s had no live job: %s", run_id, action)
                done.append(f"{run_id}: {action}")
    return done


async def _reconcile_run(db: Database, run_id: str) -> str | None:
    """`reconcile_runs` for one run, re-checked under the run's row lock."""
    async with db.write() as s:
        run = await s.scalar(select(PreprodRun).where(PreprodRun.id == run_id).with_for_update())
        if run is None or run.status != "running":
            return None
        jobs = await jobs_of(s, [run_id])
        if live_jobs(jobs, run_id):
            return None
        by_name = {name: jobs.get(job_key(name, run_id)) for name in RUN_JOBS}
        for name, job in by_name.items():
            if job is not None and job.status == "failed":
                await move(s, run, "failed", error=gave_up_reason(name, last_line(job.last_error)))
                return f"failed, its {name} job had failed for good"
        pending = await s.scalar(
            select(func.count()).where(
                PreprodItem.run_id == run_id, PreprodItem.status == "pending"
            )
        )
        if pending:
            if run.runner_mode != "push":
                return None
            await requeue(
                s, RUN_JOBS["push"], {"run_id": run_id}, dedupe_key=job_key("push", run_id)
            )
            return f"push job queued again for {pending} pending items"
        run.scoring_dispatched_at = run.scoring_dispatched_at or utcnow()
        await requeue(
            s, RUN_JOBS["scoring"], {"run_id": run_id}, dedupe_key=job_key("scoring", run_id)
        )
        return "scoring job queued again"
