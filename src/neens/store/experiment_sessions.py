"""Sessions of the local bench (`neens exp session`): a session per line of work, its entries
(runs, regrades and notes) in the order they were made, and which session is current in each
project folder."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select

from neens.store.db import Database
from neens.store.models import (
    Experiment,
    ExperimentSession,
    ExperimentSessionEntry,
    ExperimentSessionFolder,
)
from neens.store.types import storable_text, utcnow


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    name: str
    folder: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class EntryRow:
    pk: int
    session_id: str
    kind: str
    """"run", "regrade" or "note"."""
    experiment_id: str | None
    previous_id: str | None
    files: dict[str, Any] | None
    text: str | None
    created_at: datetime


def _session(s: ExperimentSession) -> SessionRow:
    return SessionRow(s.id, s.name, s.folder, s.created_at)


def _entry(e: ExperimentSessionEntry) -> EntryRow:
    return EntryRow(
        pk=e.pk,
        session_id=e.session_id,
        kind=e.kind,
        experiment_id=e.experiment_id,
        previous_id=e.previous_id,
        files=e.files,
        text=e.text,
        created_at=e.created_at,
    )


async def start_session(db: Database, row: SessionRow) -> None:
    """Save a new session and make it the current one of its folder."""
    async with db.write() as s:
        s.add(
            ExperimentSession(
                id=row.id, name=row.name, folder=row.folder, created_at=row.created_at
            )
        )
        await s.flush()
        await s.execute(
            delete(ExperimentSessionFolder).where(ExperimentSessionFolder.folder == row.folder)
        )
        await s.execute(
            insert(ExperimentSessionFolder).values(
                folder=row.folder, session_id=row.id, set_at=utcnow()
            )
        )


async def current_session(db: Database, folder: str) -> SessionRow | None:
    """The session current in `folder`, if one was started there."""
    async with db.read() as s:
        found = await s.scalar(
            select(ExperimentSession)
            .join(
                ExperimentSessionFolder, ExperimentSessionFolder.session_id == ExperimentSession.id
            )
            .where(ExperimentSessionFolder.folder == folder)
        )
        return None if found is None else _session(found)


async def add_entry(
    db: Database,
    session_id: str,
    kind: str,
    *,
    experiment_id: str | None = None,
    previous_id: str | None = None,
    files: dict[str, Any] | None = None,
    text: str | None = None,
) -> EntryRow:
    async with db.write() as s:
        entry = ExperimentSessionEntry(
            session_id=session_id,
            kind=kind,
            experiment_id=experiment_id,
            previous_id=previous_id,
            files=files,
            text=None if text is None else storable_text(text),
            created_at=utcnow(),
        )
        s.add(entry)
        await s.flush()
        return _entry(entry)


async def entries_of(db: Database, session_id: str) -> list[EntryRow]:
    """The session's entries, oldest first."""
    async with db.read() as s:
        found = await s.scalars(
            select(ExperimentSessionEntry)
            .where(ExperimentSessionEntry.session_id == session_id)
            .order_by(ExperimentSessionEntry.pk)
        )
        return [_entry(e) for e in found]


async def entry_of_experiment(db: Database, session_id: str, experiment_id: str) -> EntryRow | None:
    """The session's entry for this experiment (a resumed run joined it when it started)."""
    async with db.read() as s:
        found = await s.scalar(
            select(ExperimentSessionEntry)
            .where(
                ExperimentSessionEntry.session_id == session_id,
                ExperimentSessionEntry.experiment_id == experiment_id,
            )
            .order_by(ExperimentSessionEntry.pk)
            .limit(1)
        )
        return None if found is None else _entry(found)


async def latest_on_dataset(db: Database, session_id: str, dataset_ref: str) -> EntryRow | None:
    """The session's newest run or regrade on this dataset: what the next one is compared
    with."""
    async with db.read() as s:
        found = await s.scalar(
            select(ExperimentSessionEntry)
            .join(Experiment, Experiment.id == ExperimentSessionEntry.experiment_id)
            .where(
                ExperimentSessionEntry.session_id == session_id,
                ExperimentSessionEntry.kind.in_(("run", "regrade")),
                Experiment.dataset_ref == dataset_ref,
            )
            .order_by(ExperimentSessionEntry.pk.desc())
            .limit(1)
        )
        return None if found is None else _entry(found)
