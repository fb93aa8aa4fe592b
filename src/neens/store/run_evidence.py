"""Each child run's captured answers as a sweep decision reads them, packed once a run finished.

A comparison needs, per captured answer, the run's verdict, the session's cost and the agent name
it reported (`domain.decision_types.RunAnswers`). Reading them means one row per answer joined to
its session: 180,000 rows for a sweep of 6 arms x 3 runs x 10,000 items, several times the
comparison's own work. So a finished run's answers are packed into one `run_evidence` row (a few
bytes an answer) the first time a comparison reads them, and later comparisons unpack that row,
used only while its basis still holds:

- The run's status and when it completed, and the sweep's frozen item list (its version and
  size: the packed answers point into it). A finished run's items never change (scoring stops
  when the run ends, `store.rescoring`); a run that is not finished is read afresh every time and
  never packed.
- Its sessions' cost and agent name can change after it finished: a price set later re-prices
  them, late spans re-derive them. Every such change stamps the session's `updated_at`; the basis
  holds how many sessions the run's items captured, how many are priced, the latest stamp, and a
  checksum of the verdicts (each one's code weighted by its session's key, so even a verdict
  changed by hand shows), read for all the sweep's runs in one aggregate query over covering
  indexes (`session_stamps`).

The stamps are read before the answers, so a change that lands between the two leaves the packed
row with an older basis than its answers: the next read works it out again, never the reverse.
Any change is a new basis, and the answers are read and packed again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import numpy as np
from sqlalchemy import and_, case, func, select
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.decision_types import FAILED, NO_VERDICT, NOT_SCORED, PASSED, RunAnswers
from neens.domain.run_lifecycle import TERMINAL as RUN_TERMINAL
from neens.store.db import Database, dialect_insert
from neens.store.decisions import frozen_item_ids
from neens.store.models import PreprodItem, PreprodRun, RunEvidence, TraceSession
from neens.store.types import utcnow

log = logging.getLogger(__name__)

__all__ = [
    "Packed",
    "pack",
    "pack_finished_runs",
    "runs_answers",
    "session_stamps",
    "store_packed",
    "unpack",
]

_FORMAT: Final = 1
"""The packing's version, part of every basis: a new layout re-reads the answers."""
_LAYOUT: Final[tuple[np.dtype[Any], ...]] = (
    np.dtype("<i4"),
    np.dtype("u1"),
    np.dtype("<f8"),
    np.dtype("<i4"),
)
"""Item position, verdict, cost, agent code: the packed columns, in this order."""
_ANSWER_BYTES: Final = sum(dtype.itemsize for dtype in _LAYOUT)


def pack(answers: RunAnswers) -> bytes:
    """The answers' columns, one after the other, little-endian."""
    columns: tuple[Any, ...] = (answers.item, answers.verdict, answers.cost, answers.agent)
    return b"".join(
        np.ascontiguousarray(column, dtype=dtype).tobytes()
        for column, dtype in zip(columns, _LAYOUT, strict=True)
    )


def unpack(packed: bytes, names: Sequence[str]) -> RunAnswers:
    """The answers `pack` packed. ValueError when the bytes are not a whole number of answers."""
    count, rest = divmod(len(packed), _ANSWER_BYTES)
    if rest:
        raise ValueError(f"{len(packed)} bytes are not a whole number of packed answers")
    columns: list[Any] = []
    offset = 0
    for dtype in _LAYOUT:
        columns.append(np.frombuffer(packed, dtype=dtype, count=count, offset=offset))
        offset += count * dtype.itemsize
    item, verdict, cost, agent = columns
    return RunAnswers(item, verdict, cost, agent, tuple(names))


@dataclass(frozen=True, slots=True)
class Packed:
    """A finished run's answers, packed, with the basis they rest on: for the caller to store."""

    run_id: str
    basis: str
    names: tuple[str, ...]
    answers: bytes


def _verdict_code() -> Any:
    scored = PreprodItem.status == "scored"
    return case(
        (and_(scored, PreprodItem.passed.is_(True)), PASSED),
        (and_(scored, PreprodItem.passed.is_(False)), FAILED),
        (scored, NO_VERDICT),
        else_=NOT_SCORED,
    )


async def session_stamps(s: AsyncSession, run_ids: Sequence[str]) -> dict[str, list[Any]]:
    """Per run: its captured sessions, how many are priced, when the last was re-derived, and a
    checksum of its verdicts (each answer's verdict code weighted by its session's key)."""
    rows = await s.execute(
        select(
            PreprodItem.run_id,
            func.count(),
            func.count(TraceSession.cost_usd),
            func.max(TraceSession.updated_at),
            func.sum(PreprodItem.session_pk * (_verdict_code() + 1)),
        )
        .join(TraceSession, TraceSession.pk == PreprodItem.session_pk)
        .where(PreprodItem.run_id.in_(list(run_ids)))
        .group_by(PreprodItem.run_id)
    )
    found = {
        run_id: [count, priced, str(last), int(checksum)]
        for run_id, count, priced, last, checksum in rows.all()
    }
    return {run_id: found.get(run_id, [0, 0, None, 0]) for run_id in run_ids}


async def _read(s: AsyncSession, run_id: str, index: Mapping[str, int]) -> RunAnswers:
    """One row per captured answer of the run, as arrays over the items of `index`."""
    connection = await s.connection()
    rows = (
        await connection.execute(
            select(
                PreprodItem.item_id,
                _verdict_code(),
                TraceSession.cost_usd,
                func.nullif(TraceSession.agent_name, ""),
            )
            .join(TraceSession, TraceSession.pk == PreprodItem.session_pk)
            .where(PreprodItem.run_id == run_id)
        )
    ).all()
    if not rows:
        empty = np.zeros(0, dtype=np.int32)
        return RunAnswers(empty, np.zeros(0, np.uint8), np.zeros(0, np.float64), empty.copy(), ())
    item_ids, verdicts, costs, agents = zip(*rows, strict=True)
    try:
        item = np.fromiter(map(index.__getitem__, item_ids), dtype=np.int32, count=len(rows))
    except KeyError as error:
        raise ValueError(
            f"run {run_id} answered an item that is not in the sweep's items: {error}"
        ) from None
    names = sorted({name for name in agents if name is not None})
    code: dict[str | None, int] = {name: i for i, name in enumerate(names)}
    code[None] = -1
    return RunAnswers(
        item=item,
        verdict=np.asarray(verdicts, dtype=np.uint8),
        cost=np.asarray(costs, dtype=np.float64),  # None (unpriced) reads as NaN
        agent=np.fromiter(map(code.__getitem__, agents), dtype=np.int32, count=len(rows)),
        names=tuple(names),
    )


async def runs_answers(
    s: AsyncSession, run_ids: Sequence[str], item_ids: Sequence[str], version_id: str
) -> tuple[dict[str, RunAnswers], list[Packed]]:
    """Each run's captured answers over the sweep's frozen items (`item_ids`, of the dataset
    version `version_id`): unpacked from its `run_evidence` row while that row's basis holds,
    else read one row per answer. Also the answers of finished runs that were read, packed, for
    the caller to store once its read is over (`store_packed`)."""
    if not run_ids:
        return {}, []
    wanted = list(dict.fromkeys(run_ids))
    stamps = await session_stamps(s, wanted)  # before the answers: see the module docstring
    runs = {
        run_id: (status, completed_at)
        for run_id, status, completed_at in (
            await s.execute(
                select(PreprodRun.id, PreprodRun.status, PreprodRun.completed_at).where(
                    PreprodRun.id.in_(wanted)
                )
            )
        ).all()
    }
    basis = {
        run_id: json.dumps(
            [_FORMAT, version_id, len(item_ids), *_run_basis(runs.get(run_id)), *stamps[run_id]]
        )
        for run_id in wanted
    }
    kept = {
        run_id: (row_basis, names, packed)
        for run_id, row_basis, names, packed in (
            await s.execute(
                select(
                    RunEvidence.run_id, RunEvidence.basis, RunEvidence.names, RunEvidence.answers
                ).where(RunEvidence.run_id.in_(wanted))
            )
        ).all()
    }
    found: dict[str, RunAnswers] = {}
    to_read: list[str] = []
    for run_id in wanted:
        row = kept.get(run_id)
        if row is not None and row[0] == basis[run_id]:
            try:
                found[run_id] = unpack(row[2], row[1])
                continue
            except ValueError:
                log.warning("run %s: its packed answers do not unpack; reading them again", run_id)
        to_read.append(run_id)
    index = {item_id: i for i, item_id in enumerate(item_ids)}
    packed: list[Packed] = []
    for run_id in to_read:
        answers = found[run_id] = await _read(s, run_id, index)
        run = runs.get(run_id)
        if run is not None and run[0] in RUN_TERMINAL:
            packed.append(Packed(run_id, basis[run_id], answers.names, pack(answers)))
    return found, packed


def _run_basis(run: tuple[str, datetime | None] | None) -> list[str | None]:
    if run is None:
        return [None, None]
    status, completed_at = run
    return [status, None if completed_at is None else completed_at.isoformat()]


async def store_packed(db: Database, packed: Sequence[Packed]) -> None:
    """Store packed answers a read worked out, in a write of their own (nothing when there are
    none), in run id order.

    Storing them only saves later reads work: a row stored from an older read is harmless (its
    basis no longer matches, so the answers are read again), and when the database gives up on
    the write (a lock timeout, a run deleted meanwhile), the read still answers with what it read
    and a later read stores them."""
    if not packed:
        return
    try:
        async with db.write() as s:
            insert = dialect_insert(db.dialect, RunEvidence.__table__)
            upsert = insert.on_conflict_do_update(
                index_elements=["run_id"],
                set_={
                    "basis": insert.excluded.basis,
                    "names": insert.excluded.names,
                    "answers": insert.excluded.answers,
                    "created_at": insert.excluded.created_at,
                },
                # A row already packed on this basis stays as it is (two reads packing the
                # same run write it once).
                where=RunEvidence.__table__.c.basis != insert.excluded.basis,
            )
            now = utcnow()
            for one in sorted(packed, key=lambda p: p.run_id):
                await s.execute(
                    upsert,
                    {
                        "run_id": one.run_id,
                        "basis": one.basis,
                        "names": list(one.names),
                        "answers": one.answers,
                        "created_at": now,
                    },
                )
    except (OperationalError, IntegrityError) as exc:
        log.info("packed run answers not stored this time (%s); a later read stores them", exc.orig)


async def pack_finished_runs(db: Database, version_id: str, run_ids: Sequence[str]) -> None:
    """Pack the answers of the finished runs among `run_ids` (over the items of the dataset
    version `version_id`) that have none packed yet: the roll-up that follows a run's end calls
    this, so the first comparison of a finished sweep unpacks rather than reads. Packing only
    saves later reads work, so what goes wrong here is logged, never raised."""
    if not run_ids:
        return
    try:
        async with db.read() as s:
            missing = list(
                await s.scalars(
                    select(PreprodRun.id).where(
                        PreprodRun.id.in_(list(run_ids)),
                        PreprodRun.status.in_(list(RUN_TERMINAL)),
                        PreprodRun.id.not_in(select(RunEvidence.run_id)),
                    )
                )
            )
            if not missing:
                return
            item_ids = await frozen_item_ids(s, version_id)
            _, packed = await runs_answers(s, missing, item_ids, version_id)
        await store_packed(db, packed)
    except (ValueError, SQLAlchemyError):
        log.warning("the answers of runs %s were not packed", ", ".join(run_ids), exc_info=True)
