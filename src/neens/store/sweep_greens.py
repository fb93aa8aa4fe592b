"""Whether each finished child run of a sweep is green, worked out once and stored on the run.

A run is green when it completed, its gate passed and it has zero regressions (`is_green`): the
gate is the run's own persisted policy, evaluated as `GET /preprod-evals/{id}/gate` does (cost
deltas against the sweep's baseline arm, `store.sweep_baseline`), on the item columns it reads
(verdicts, costs, latencies, steps; never the texts). Working it out reads every item of the
run, so it is done once, the first time the sweep is read after the run finished (the roll-up
job that follows a run's end does it), and stored on the run: `green`, with `green_basis`, what
the verdict rests on. A stored verdict is used only while its basis still holds, so it cannot go
stale:

- The run's status, when it finished and its gate. A finished run's items never change: scoring
  stops when the run ends, and content that arrives late leaves a finished run's verdicts as
  they were (`store.rescoring`). For a gate without cost rules nothing else moves the verdict.
- With cost rules, the cost of the run's sessions can change after it finished: a price set
  later re-prices them, late spans re-derive them. The basis then also holds how many sessions
  its items captured, how many are priced, when the last one was re-derived (sessions'
  `updated_at`, stamped on every re-derivation) and a checksum of its verdicts
  (`run_evidence.session_stamps`, the stamps packed answers rest on too); one aggregate query
  reads that for every such run, over covering indexes.
- With a cost delta rule, the cohort of the sweep's baseline arm too: its status, and each of its
  runs' status and sessions, as above.

Any change to one of those is a new basis, and the verdict is worked out again (and stored).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.gate import evaluate_gate, parse_gate_policy
from neens.domain.preprod import ItemOutcome, items_cohort
from neens.domain.run_lifecycle import TERMINAL as RUN_TERMINAL
from neens.domain.sweeps import is_green
from neens.store.db import Database
from neens.store.models import (
    ModelSweep,
    PreprodItem,
    PreprodRun,
    SweepArm,
    SweepRun,
    TraceSession,
)
from neens.store.run_evidence import session_stamps
from neens.store.sweep_baseline import baselines_for_sweep, needs_baseline

log = logging.getLogger(__name__)

__all__ = ["Worked", "greens", "keep_greens", "store_greens"]

_EVALUATED = ("completed", "completed_with_regressions")


@dataclass(frozen=True, slots=True)
class Worked:
    """A verdict worked out on this read, to be stored on its run."""

    run_id: str
    green: bool
    basis: str


async def greens(
    s: AsyncSession,
    sweep: ModelSweep,
    arms: Sequence[SweepArm],
    slots: Sequence[SweepRun],
    runs: Mapping[str, PreprodRun],
) -> tuple[dict[str, bool], list[Worked]]:
    """Whether each finished run of `sweep` is green (`arms` in position order, `slots` all of
    its run slots, `runs` the launched runs by id), and the verdicts this call had to work out
    (the caller stores them: `keep_greens` in a write, `store_greens` after a read). Cost
    deltas compare with the baseline arm when the sweep's pinned gate has such a rule."""
    finished = [run for run in runs.values() if run.status in RUN_TERMINAL]
    found: dict[str, bool] = {run.id: False for run in finished if run.status != "completed"}
    completed = [run for run in finished if run.status == "completed"]
    if not completed:
        return found, []
    base_arm = arms[0] if arms else None
    base_runs = [
        runs.get(slot.run_id) if slot.run_id is not None else None
        for slot in slots
        if base_arm is not None and slot.arm_id == base_arm.id
    ]
    with_base = needs_baseline(sweep.gate) and any(needs_baseline(r.gate) for r in completed)
    stamped = {run.id for run in completed if _has_cost_rules(run.gate)}
    if with_base:
        stamped |= {run.id for run in base_runs if run is not None and run.status in _EVALUATED}
    stamps = await session_stamps(s, sorted(stamped))
    base_basis = (
        None
        if base_arm is None or not with_base
        else [
            base_arm.status,
            [
                [run.id, run.status, stamps.get(run.id)] if run is not None else None
                for run in base_runs
            ],
        ]
    )
    todo: dict[str, str] = {}
    for run in completed:
        basis = json.dumps(
            {
                "status": run.status,
                "completedAt": str(run.completed_at),
                "gate": run.gate,
                "sessions": stamps.get(run.id) if _has_cost_rules(run.gate) else None,
                "baseline": base_basis if with_base and needs_baseline(run.gate) else None,
            },
            sort_keys=True,
        )
        if run.green is not None and run.green_basis == basis:
            found[run.id] = run.green
        else:
            todo[run.id] = basis
    if not todo:
        return found, []
    worked = await _work_out(s, arms, slots, runs, todo, with_base=with_base)
    found.update({w.run_id: w.green for w in worked})
    return found, worked


def _has_cost_rules(gate: Mapping[str, Any]) -> bool:
    return isinstance(gate.get("cost"), Mapping)


async def _work_out(
    s: AsyncSession,
    arms: Sequence[SweepArm],
    slots: Sequence[SweepRun],
    runs: Mapping[str, PreprodRun],
    todo: Mapping[str, str],
    *,
    with_base: bool,
) -> list[Worked]:
    """The verdicts of the `todo` runs (run id -> basis), from their items, in one query."""
    baselines = await baselines_for_sweep(s, arms, slots, runs) if with_base else {}
    rows = await s.execute(
        select(
            PreprodItem.run_id,
            PreprodItem.item_id,
            PreprodItem.position,
            PreprodItem.status,
            PreprodItem.score,
            PreprodItem.passed,
            PreprodItem.baseline_passed,
            TraceSession.cost_usd,
            TraceSession.latency_ms,
            TraceSession.step_count,
            TraceSession.trace_id,
        )
        .outerjoin(TraceSession, TraceSession.pk == PreprodItem.session_pk)
        .where(PreprodItem.run_id.in_(list(todo)))
    )
    items: dict[str, list[ItemOutcome]] = {run_id: [] for run_id in todo}
    for run_id, item_id, position, status, score, passed, base, cost, latency, steps, trace in rows:
        items[run_id].append(
            ItemOutcome(
                item_id=item_id,
                position=position,
                input="",  # texts are not read: no gate rule looks at them
                expected_output=None,
                status=status,
                score=score,
                passed=passed,
                baseline_passed=base,
                error=None,
                output=None,
                cost_usd=cost,
                latency_ms=latency,
                step_count=steps,
                session_id=trace,
            )
        )
    worked = []
    for run_id, basis in todo.items():
        run, outcomes, swept = runs[run_id], items[run_id], baselines.get(run_id)
        gate = evaluate_gate(
            run.status,
            outcomes,
            parse_gate_policy(dict(run.gate)),
            items_cohort(outcomes),
            None if swept is None else swept.cohort,
            no_baseline=(swept and swept.missing) or "the run has no baseline cohort",
        )
        worked.append(Worked(run_id, is_green(run.status, gate.passed, gate.regressions), basis))
    return worked


async def keep_greens(s: AsyncSession, worked: Sequence[Worked]) -> None:
    """Store worked-out verdicts on their runs, in the caller's write transaction, in run id
    order (every writer locks runs in the same order)."""
    for w in sorted(worked, key=lambda w: w.run_id):
        await s.execute(
            update(PreprodRun)
            .where(PreprodRun.id == w.run_id)
            .values(green=w.green, green_basis=w.basis)
            .execution_options(synchronize_session=False)
        )


async def store_greens(db: Database, worked: Sequence[Worked]) -> None:
    """Store verdicts a read worked out, in a write of their own (nothing when there are none).

    A verdict stored from an older read is harmless: its basis no longer matches, so it is
    worked out again. Storing them only saves later reads work, so when the database gives up
    on the write (a deadlock with a roll-up storing the same runs, a lock timeout), the read
    still answers with the verdicts it worked out and a later read stores them."""
    if not worked:
        return
    try:
        async with db.write() as s:
            await keep_greens(s, worked)
    except OperationalError as exc:
        log.info("run verdicts not stored this time (%s); a later read stores them", exc.orig)
