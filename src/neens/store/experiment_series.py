"""Series of experiments: each finished run tagged as the next round (v1, v2, …) of a name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from neens.store.db import Database
from neens.store.models import ExperimentSeriesRound
from neens.store.types import utcnow

_TAG_ATTEMPTS: Final = 5
"""Two runs of one series finishing together both try the same round number; the loser takes
the next one. Each attempt is one short transaction."""


@dataclass(frozen=True, slots=True)
class SeriesRound:
    series: str
    round: int
    experiment_id: str


async def round_of(db: Database, experiment_id: str) -> SeriesRound | None:
    """The series round this experiment is, if it is one."""
    async with db.read() as s:
        found = await s.scalar(
            select(ExperimentSeriesRound).where(
                ExperimentSeriesRound.experiment_id == experiment_id
            )
        )
        return None if found is None else SeriesRound(found.series, found.round, experiment_id)


async def add_round(db: Database, series: str, experiment_id: str) -> SeriesRound:
    """Tag the experiment as the next round of `series`, or return its round if it already is
    one (of this series or another: the caller checks which)."""
    for _ in range(_TAG_ATTEMPTS):
        existing = await round_of(db, experiment_id)
        if existing is not None:
            return existing
        try:
            async with db.write() as s:
                last = await s.scalar(
                    select(func.max(ExperimentSeriesRound.round)).where(
                        ExperimentSeriesRound.series == series
                    )
                )
                number = (last or 0) + 1
                s.add(
                    ExperimentSeriesRound(
                        series=series,
                        round=number,
                        experiment_id=experiment_id,
                        created_at=utcnow(),
                    )
                )
            return SeriesRound(series, number, experiment_id)
        except IntegrityError:
            continue
    raise RuntimeError(f"could not tag {experiment_id} as a round of {series!r}")


async def series_rounds(db: Database, series: str) -> list[SeriesRound]:
    """The rounds of `series` in order (empty when there is no such series)."""
    async with db.read() as s:
        found = await s.scalars(
            select(ExperimentSeriesRound)
            .where(ExperimentSeriesRound.series == series)
            .order_by(ExperimentSeriesRound.round)
        )
        return [SeriesRound(r.series, r.round, r.experiment_id) for r in found]
