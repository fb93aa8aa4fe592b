"""Matrices of experiments (`exp run matrix.json`): the matrix run, its cells (each an experiment
of its own), and the earlier case-trials `--reuse` may copy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from neens.store.db import Database
from neens.store.experiments import (
    ExperimentRow,
    TrialRow,
    column_starting_with,
    experiment_model,
    trials_of,
)
from neens.store.models import (
    Experiment,
    ExperimentMatrix,
    ExperimentMatrixCell,
    ExperimentTrial,
)
from neens.store.types import utcnow


@dataclass(frozen=True, slots=True)
class MatrixCellRow:
    position: int
    cell: str
    baseline: bool
    experiment_id: str
    reused: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class MatrixRow:
    id: str
    name: str
    spec: dict[str, Any]
    created_at: datetime
    finished_at: datetime | None
    cells: tuple[MatrixCellRow, ...]
    """In matrix order."""


async def create_matrix(
    db: Database,
    matrix_id: str,
    name: str,
    spec: dict[str, Any],
    cells: list[tuple[MatrixCellRow, ExperimentRow]],
    created_at: datetime,
) -> None:
    """The matrix and every cell's experiment, in one transaction: a matrix is never stored
    without its cells."""
    async with db.write() as s:
        s.add(ExperimentMatrix(id=matrix_id, name=name, spec=spec, created_at=created_at))
        for _, experiment in cells:
            s.add(experiment_model(experiment))
        await s.flush()
        for cell, _ in cells:
            s.add(
                ExperimentMatrixCell(
                    matrix_id=matrix_id,
                    position=cell.position,
                    cell=cell.cell,
                    baseline=cell.baseline,
                    experiment_id=cell.experiment_id,
                    reused=cell.reused,
                )
            )


async def set_reused(db: Database, matrix_id: str, position: int, reused: dict[str, Any]) -> None:
    async with db.write() as s:
        await s.execute(
            update(ExperimentMatrixCell)
            .where(
                ExperimentMatrixCell.matrix_id == matrix_id,
                ExperimentMatrixCell.position == position,
            )
            .values(reused=reused)
        )


async def get_matrix(db: Database, matrix_id: str) -> MatrixRow | None:
    async with db.read() as s:
        found = await s.get(ExperimentMatrix, matrix_id)
        if found is None:
            return None
        cells = await s.scalars(
            select(ExperimentMatrixCell)
            .where(ExperimentMatrixCell.matrix_id == matrix_id)
            .order_by(ExperimentMatrixCell.position)
        )
        return MatrixRow(
            id=found.id,
            name=found.name,
            spec=found.spec,
            created_at=found.created_at,
            finished_at=found.finished_at,
            cells=tuple(
                MatrixCellRow(c.position, c.cell, c.baseline, c.experiment_id, c.reused)
                for c in cells
            ),
        )


async def matrix_ids_starting_with(db: Database, prefix: str, *, limit: int = 5) -> list[str]:
    return await column_starting_with(db, ExperimentMatrix.id, prefix, limit=limit)


async def latest_unfinished_matrix(db: Database, name: str) -> str | None:
    """The newest unfinished matrix of this name: what `--resume` with no id continues."""
    async with db.read() as s:
        return await s.scalar(
            select(ExperimentMatrix.id)
            .where(ExperimentMatrix.name == name, ExperimentMatrix.finished_at.is_(None))
            .order_by(ExperimentMatrix.created_at.desc(), ExperimentMatrix.id.desc())
            .limit(1)
        )


async def finish_matrix(db: Database, matrix_id: str) -> None:
    async with db.write() as s:
        await s.execute(
            update(ExperimentMatrix)
            .where(ExperimentMatrix.id == matrix_id, ExperimentMatrix.finished_at.is_(None))
            .values(finished_at=utcnow())
        )


async def same_config_runs(
    db: Database, *, dataset_hash: str, task_hash: str, exclude: set[str], limit: int = 50
) -> list[ExperimentRow]:
    """Runs (`exp run`, matrix cells included) on this dataset with this task, newest first:
    the candidates `--reuse` checks further (agent files, graders, --seq)."""
    from neens.store.experiments import get_experiment

    async with db.read() as s:
        ids = list(
            await s.scalars(
                select(Experiment.id)
                .where(
                    Experiment.kind == "run",
                    Experiment.dataset_hash == dataset_hash,
                    Experiment.task_hash == task_hash,
                    Experiment.id.not_in(exclude) if exclude else Experiment.id.is_not(None),
                )
                .order_by(Experiment.created_at.desc(), Experiment.id.desc())
                .limit(limit)
            )
        )
    rows = []
    for experiment_id in ids:
        row = await get_experiment(db, experiment_id)
        if row is not None:
            rows.append(row)
    return rows


async def finished_trials_since(
    db: Database, experiment_id: str, since: datetime
) -> list[TrialRow]:
    """The experiment's case-trials that finished without an error and started at `since` or
    later, with their grades."""
    async with db.read() as s:
        recent = await s.scalar(
            select(ExperimentTrial.pk)
            .where(
                ExperimentTrial.experiment_id == experiment_id,
                ExperimentTrial.status == "done",
                ExperimentTrial.started_at >= since,
            )
            .limit(1)
        )
    if recent is None:
        return []
    return [
        t
        for t in await trials_of(db, experiment_id)
        if t.status == "done" and t.started_at >= since
    ]
