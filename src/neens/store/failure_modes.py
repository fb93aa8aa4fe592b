"""The failure-mode taxonomy and people's annotations of sessions against it."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, any_, bindparam, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncSession

from neens.errors import Conflict
from neens.store.db import Database, upsert_insert
from neens.store.ids import new_id
from neens.store.models import FailureMode, FailureModeAnnotation
from neens.store.tenancy import FAILURE_MODE, SESSION, in_project, owned, owned_by
from neens.store.types import utcnow

ModeKey = tuple[datetime, str]
"""Where a page of the taxonomy ends: (created_at, id) of its last mode."""


@dataclass(frozen=True, slots=True)
class FailureModeInfo:
    id: str
    name: str
    description: str | None
    confirmed_sessions: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class AnnotationInfo:
    session_id: str
    failure_mode_id: str
    failure_mode: str
    confirmed: bool
    note: str | None
    expected_output: str | None
    created_at: datetime
    updated_at: datetime


def _confirmed_count(mode_id: Any) -> Any:
    """Scalar subquery: how many sessions are confirmed in the mode (one annotation per
    session and mode, so rows are sessions)."""
    return (
        select(func.count())
        .where(
            FailureModeAnnotation.failure_mode_id == mode_id,
            FailureModeAnnotation.confirmed.is_(True),
        )
        .scalar_subquery()
    )


async def create_failure_mode(
    db: Database, project_id: str, name: str, description: str | None
) -> FailureModeInfo:
    """A new mode; 409 naming `name` when the project has one of that name. The unique index
    decides, so two concurrent creates of one name make one mode."""
    mode_id = new_id("fm_")
    now = utcnow()
    async with db.write() as s:
        made = await s.scalar(
            upsert_insert(s, FailureMode)
            .values(
                id=mode_id,
                project_id=project_id,
                name=name,
                description=description,
                created_at=now,
            )
            .on_conflict_do_nothing(index_elements=["project_id", "name"])
            .returning(FailureMode.id)
        )
        if made is None:
            existing = await s.scalar(
                in_project(FailureMode, project_id).where(FailureMode.name == name)
            )
            raise Conflict(
                f"a failure mode named {name!r} already exists"
                + (f" ({existing.id})" if existing is not None else "")
                + "; names are unique in a project",
                field="name",
            )
    return FailureModeInfo(mode_id, name, description, 0, now)


async def list_failure_modes(
    db: Database, project_id: str, *, limit: int, after: ModeKey | None = None
) -> tuple[list[FailureModeInfo], ModeKey | None]:
    """Oldest first, each with its confirmed-session count; returns the page and where it ends
    (None on the last page)."""
    query = (
        select(FailureMode, _confirmed_count(FailureMode.id))
        .where(owned_by(FailureMode, project_id))
        .order_by(FailureMode.created_at, FailureMode.id)
    )
    if after is not None:
        created, mode_id = after
        query = query.where(
            (FailureMode.created_at > created)
            | ((FailureMode.created_at == created) & (FailureMode.id > mode_id))
        )
    async with db.read() as s:
        rows = (await s.execute(query.limit(limit + 1))).all()
    page = rows[:limit]
    infos = [FailureModeInfo(m.id, m.name, m.description, count, m.created_at) for m, count in page]
    end = (page[-1][0].created_at, page[-1][0].id) if len(rows) > limit else None
    return infos, end


async def annotate_session(
    db: Database,
    project_id: str,
    session_id: str,
    *,
    failure_mode_id: str,
    confirmed: bool,
    note: str | None,
    expected_output: str | None,
) -> AnnotationInfo:
    """Record that the session shows (`confirmed`) or does not show the mode, replacing any
    earlier annotation of the pair whole (a field left out is cleared, not kept)."""
    now = utcnow()
    values: dict[str, Any] = {
        "confirmed": confirmed,
        "note": note,
        "expected_output": expected_output,
        "updated_at": now,
    }
    async with db.write() as s:
        # The session first: an id of another project answers 404 on `session_id` whatever
        # the body names, exactly like an id that was never created.
        session = await owned(s, SESSION, project_id, session_id)
        mode = await owned(s, FAILURE_MODE, project_id, failure_mode_id, field="failureModeId")
        await s.execute(
            upsert_insert(s, FailureModeAnnotation)
            .values(
                project_id=project_id,
                session_pk=session.pk,
                failure_mode_id=mode.id,
                created_at=now,
                **values,
            )
            .on_conflict_do_update(index_elements=["session_pk", "failure_mode_id"], set_=values)
        )
        created = await s.scalar(
            select(FailureModeAnnotation.created_at).where(
                FailureModeAnnotation.session_pk == session.pk,
                FailureModeAnnotation.failure_mode_id == mode.id,
            )
        )
    assert created is not None
    return AnnotationInfo(
        session_id, mode.id, mode.name, confirmed, note, expected_output, created, now
    )


async def list_annotations(db: Database, project_id: str, session_id: str) -> list[AnnotationInfo]:
    """The session's annotations, in the taxonomy's order (oldest mode first)."""
    async with db.read() as s:
        session = await owned(s, SESSION, project_id, session_id)
        rows = (
            await s.execute(
                select(FailureModeAnnotation, FailureMode.name)
                .join(FailureMode, FailureMode.id == FailureModeAnnotation.failure_mode_id)
                .where(
                    owned_by(FailureModeAnnotation, project_id),
                    FailureModeAnnotation.session_pk == session.pk,
                )
                .order_by(FailureMode.created_at, FailureMode.id)
            )
        ).all()
    return [
        AnnotationInfo(
            session_id,
            a.failure_mode_id,
            name,
            a.confirmed,
            a.note,
            a.expected_output,
            a.created_at,
            a.updated_at,
        )
        for a, name in rows
    ]


def any_of(s: AsyncSession, column: Any, values: Collection[int]) -> ColumnElement[bool]:
    """`column IN values` as one bound parameter however many values there are: SQLite caps a
    statement's parameters (32,766) and PostgreSQL's protocol at 65,535, and a drill-down can
    ask about more sessions than that. PostgreSQL binds an array (`= ANY(:values)`); SQLite
    binds a JSON array and reads it with `json_each`."""
    listed = [int(v) for v in values]
    if s.get_bind().dialect.name == "postgresql":
        return column == any_(  # type: ignore[no-any-return]
            bindparam("any_of_values", listed, type_=postgresql.ARRAY(BigInteger()))
        )
    each = func.json_each(bindparam("any_of_values", json.dumps(listed))).table_valued("value")
    return column.in_(select(each.c.value))  # type: ignore[no-any-return]


async def annotations_for_sessions(
    s: AsyncSession, project_id: str, session_pks: Iterable[int]
) -> dict[int, list[str]]:
    """{session pk: the names of the failure modes a person confirmed the session in} for
    every pk asked about, in one query. A session with no confirmed mode maps to `[]` (it is
    unclassified by people); an annotation with `confirmed: false` names nothing. Names are in
    the taxonomy's order."""
    pks = list(dict.fromkeys(session_pks))
    found: dict[int, list[str]] = {pk: [] for pk in pks}
    if not pks:
        return found
    rows = await s.execute(
        select(FailureModeAnnotation.session_pk, FailureMode.name)
        .join(FailureMode, FailureMode.id == FailureModeAnnotation.failure_mode_id)
        .where(
            owned_by(FailureModeAnnotation, project_id),
            FailureModeAnnotation.confirmed.is_(True),
            any_of(s, FailureModeAnnotation.session_pk, pks),
        )
        .order_by(FailureMode.created_at, FailureMode.id)
    )
    for pk, name in rows.all():
        found[pk].append(name)
    return found


async def failure_modes_named(
    s: AsyncSession, project_id: str, labels: Iterable[str]
) -> dict[str, str]:
    """{label: failure mode id} for the classifier labels that resolve to a mode of the
    project: its name equals the label exactly (`domain.failure_modes.resolve_label`). Labels
    that resolve to nothing are absent."""
    names = sorted(set(labels))
    if not names:
        return {}
    rows = await s.execute(
        select(FailureMode.name, FailureMode.id).where(
            owned_by(FailureMode, project_id), FailureMode.name.in_(names)
        )
    )
    return {str(name): str(mode_id) for name, mode_id in rows.all()}
