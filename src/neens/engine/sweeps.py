"""A finished child run rolls its sweep up: the arm's next run is launched, or the arm and the
sweep take their final status. Driven by each child run's `run.finished` job, never by polling;
a roll-up that runs again (a retried job) changes nothing twice (`store.sweeps`)."""

from __future__ import annotations

import logging

from neens.engine.run_finished import FinishedRun, on_run_finished
from neens.queue.worker import JobContext
from neens.store.sweep_rollup import roll_up_sweep
from neens.store.sweeps import sweep_of_run

log = logging.getLogger("neens.sweeps")


@on_run_finished
async def roll_up_parent_sweep(ctx: JobContext, run: FinishedRun) -> None:
    async with ctx.db.read() as s:
        parent = await sweep_of_run(s, run.id)
    if parent is None:
        return
    sweep_id, _ = parent
    rolled = await roll_up_sweep(ctx.db, sweep_id)
    if rolled is None:
        return
    ctx.notify()  # the arm's next run, when one was launched, has its push job queued
    if rolled.terminal:
        log.info(
            "sweep %s ended %s%s",
            sweep_id,
            rolled.status,
            f": {rolled.void_reason}" if rolled.void_reason else "",
        )
