"""Config races of the local bench (`neens exp sweep`): the sweep, the experiments it ran, and
what earlier sweeps adopted."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from neens.store.db import Database, unique_violated
from neens.store.experiments import ExperimentRow, column_starting_with, experiment_model
from neens.store.models import ExperimentSweep, ExperimentSweepRun
from neens.store.types import utcnow


@dataclass(frozen=True, slots=True)
class SweepRow:
    id: str
    name: str
    dataset_ref: str
    definition: dict[str, Any]
    created_at: datetime
    decision: str | None = None
    adopted: str | None = None
    result: dict[str, Any] | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SweepRunKey:
    """Which run of a sweep an experiment is."""

    config: str
    part: str
    """"race", "heldout" or "guard"."""
    round: int


def _row(s: ExperimentSweep) -> SweepRow:
    return SweepRow(
        id=s.id,
        name=s.name,
        dataset_ref=s.dataset_ref,
        definition=s.definition,
        created_at=s.created_at,
        decision=s.decision,
        adopted=s.adopted,
        result=s.result,
        finished_at=s.finished_at,
    )


async def create_sweep(db: Database, row: SweepRow) -> None:
    async with db.write() as s:
        s.add(
            ExperimentSweep(
                id=row.id,
                name=row.name,
                dataset_ref=row.dataset_ref,
                definition=row.definition,
                created_at=row.created_at,
            )
        )


async def get_sweep(db: Database, sweep_id: str) -> SweepRow | None:
    async with db.read() as s:
        found = await s.get(ExperimentSweep, sweep_id)
        return None if found is None else _row(found)


async def sweep_ids_starting_with(db: Database, prefix: str, *, limit: int = 5) -> list[str]:
    return await column_starting_with(db, ExperimentSweep.id, prefix, limit=limit)


async def latest_unfinished_sweep(db: Database, name: str) -> SweepRow | None:
    """The newest sweep of these configs (their names, in order) that has not decided."""
    async with db.read() as s:
        found = await s.scalar(
            select(ExperimentSweep)
            .where(ExperimentSweep.name == name, ExperimentSweep.finished_at.is_(None))
            .order_by(ExperimentSweep.created_at.desc(), ExperimentSweep.id.desc())
            .limit(1)
        )
        return None if found is None else _row(found)


async def create_sweep_run(
    db: Database, sweep_id: str, key: SweepRunKey, experiment: ExperimentRow
) -> bool:
    """The experiment and its link to the sweep, in one transaction: a sweep never has an
    experiment it does not know about. False, with nothing written, when the sweep already has
    a run for `key` (another process resuming the sweep made it first)."""
    try:
        async with db.write() as s:
            s.add(experiment_model(experiment))
            await s.flush()
            s.add(
                ExperimentSweepRun(
                    experiment_id=experiment.id,
                    sweep_id=sweep_id,
                    config=key.config,
                    part=key.part,
                    round=key.round,
                )
            )
    except IntegrityError as exc:
        if unique_violated(exc) != _ONE_RUN_A_KEY:
            raise
        return False
    return True


_ONE_RUN_A_KEY = "uq_experiment_sweep_runs_sweep_id_config_part_round"


async def sweep_runs(db: Database, sweep_id: str) -> dict[SweepRunKey, str]:
    """Every experiment of the sweep, by which run it is."""
    async with db.read() as s:
        found = await s.scalars(
            select(ExperimentSweepRun).where(ExperimentSweepRun.sweep_id == sweep_id)
        )
        return {SweepRunKey(r.config, r.part, r.round): r.experiment_id for r in found}


async def finish_sweep(
    db: Database, sweep_id: str, *, decision: str, adopted: str | None, result: dict[str, Any]
) -> None:
    """Record the decision (once: a resumed sweep that decided again keeps the first record)."""
    async with db.write() as s:
        await s.execute(
            update(ExperimentSweep)
            .where(ExperimentSweep.id == sweep_id, ExperimentSweep.finished_at.is_(None))
            .values(decision=decision, adopted=adopted, result=result, finished_at=utcnow())
        )


@dataclass(frozen=True, slots=True)
class Adoption:
    sweep_id: str
    dataset_ref: str
    adopted: str
    """The config adopted."""


async def adoptions_before(db: Database, before: datetime) -> list[Adoption]:
    """Every sweep that adopted a config and decided before `before`, oldest first."""
    async with db.read() as s:
        found = await s.scalars(
            select(ExperimentSweep)
            .where(
                ExperimentSweep.decision == "adopt",
                ExperimentSweep.finished_at.is_not(None),
                ExperimentSweep.finished_at < before,
            )
            .order_by(ExperimentSweep.created_at, ExperimentSweep.id)
        )
        return [Adoption(r.id, r.dataset_ref, r.adopted or "") for r in found]
