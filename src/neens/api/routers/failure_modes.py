"""The failure-mode taxonomy, `/failure-modes`, and people's annotations of sessions against it,
`/sessions/{session_id}/failure-modes`."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import cast

from fastapi import APIRouter, Query

from neens.api.deps import AdminKey, AnyKey, DbDep
from neens.api.paging import cursor_query, decode_cursor, next_cursor
from neens.api.schemas.failure_modes import (
    AnnotationIn,
    AnnotationList,
    AnnotationOut,
    FailureModeCreate,
    FailureModeList,
    FailureModeOut,
)
from neens.store import failure_modes as store

router = APIRouter(tags=["failure-modes"])

_MODES = "failure-modes"
"""The tag of this list's cursors."""


@router.post("/failure-modes", status_code=201, operation_id="failure_modes-create")
async def create_failure_mode(
    body: FailureModeCreate, principal: AdminKey, db: DbDep
) -> FailureModeOut:
    """Add a mode to the project's taxonomy (configuration: an admin key). A classifier
    judge's label resolves to it when the label equals its name exactly."""
    info = await store.create_failure_mode(db, principal.project_id, body.name, body.description)
    return FailureModeOut(**asdict(info))


@router.get("/failure-modes", operation_id="failure_modes-list")
async def list_failure_modes(
    principal: AnyKey,
    db: DbDep,
    limit: int = Query(default=100, ge=1, le=500, description="Modes per page."),
    cursor: str | None = cursor_query(),
) -> FailureModeList:
    """The taxonomy, oldest first, each mode with how many sessions are confirmed in it."""
    after = decode_cursor(_MODES, cursor, (datetime, str), db.secrets)
    infos, last = await store.list_failure_modes(
        db, principal.project_id, limit=limit, after=cast("store.ModeKey | None", after)
    )
    return FailureModeList(
        failure_modes=[FailureModeOut(**asdict(i)) for i in infos],
        next_cursor=next_cursor(_MODES, last, db.secrets),
    )


@router.post(
    "/sessions/{session_id:path}/failure-modes", operation_id="failure_modes-annotate_session"
)
async def annotate_session(
    session_id: str, body: AnnotationIn, principal: AnyKey, db: DbDep
) -> AnnotationOut:
    """Record that the session shows (`confirmed: true`) or does not show a failure mode.
    Posting the same session and mode again replaces the annotation whole."""
    info = await store.annotate_session(
        db,
        principal.project_id,
        session_id,
        failure_mode_id=body.failure_mode_id,
        confirmed=body.confirmed,
        note=body.note,
        expected_output=body.expected_output,
    )
    return AnnotationOut(**asdict(info))


@router.get(
    "/sessions/{session_id:path}/failure-modes",
    operation_id="failure_modes-list_session_annotations",
)
async def list_session_annotations(session_id: str, principal: AnyKey, db: DbDep) -> AnnotationList:
    """The session's annotations, one per failure mode it was annotated in."""
    infos = await store.list_annotations(db, principal.project_id, session_id)
    return AnnotationList(annotations=[AnnotationOut(**asdict(i)) for i in infos])
