"""Stress-test suites: a golden dataset version frozen from the sessions people confirmed in
some failure modes (`domain.failure_modes.suite_content` decides the items)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.failure_modes import Confirmation, suite_content
from neens.errors import Unprocessable
from neens.store.datasets import DATASET_NAME_UNIQUE, NewItem, add_dataset, add_version
from neens.store.db import Database
from neens.store.ids import new_id
from neens.store.models import FailureMode, FailureModeAnnotation, StressTestSuite, TraceSession
from neens.store.tenancy import DATASET, FAILURE_MODE, SUITE, owned, owned_by


@dataclass(frozen=True, slots=True)
class SuiteInfo:
    id: str
    name: str
    failure_mode_ids: list[str]
    dataset_id: str
    dataset_version_id: str
    item_count: int
    skipped: list[dict[str, Any]]
    created_at: datetime


def _info(row: StressTestSuite) -> SuiteInfo:
    return SuiteInfo(
        row.id,
        row.name,
        list(row.failure_mode_ids),
        row.dataset_id,
        row.dataset_version_id,
        row.item_count,
        list(row.skipped),
        row.created_at,
    )


async def _modes(s: AsyncSession, project_id: str, mode_ids: list[str]) -> None:
    """Every id a mode of the project, each once (404 / 422 naming `failureModeIds[i]`)."""
    found = set(
        await s.scalars(
            select(FailureMode.id).where(
                owned_by(FailureMode, project_id), FailureMode.id.in_(mode_ids)
            )
        )
    )
    seen: dict[str, int] = {}
    for index, mode_id in enumerate(mode_ids):
        field = f"failureModeIds[{index}]"
        if mode_id not in found:
            raise FAILURE_MODE.missing(mode_id, field=field)
        if mode_id in seen:
            raise Unprocessable(
                f"failure mode {mode_id} is also failureModeIds[{seen[mode_id]}]: list each once",
                field=field,
            )
        seen[mode_id] = index


async def _confirmations(
    s: AsyncSession, project_id: str, mode_ids: list[str]
) -> list[Confirmation]:
    """Sessions confirmed in any of the modes, oldest session first, each session's modes in
    the order the request lists them."""
    found = (
        await s.execute(
            select(
                TraceSession.pk,
                TraceSession.trace_id,
                TraceSession.input,
                FailureMode.id,
                FailureMode.name,
                FailureModeAnnotation.expected_output,
            )
            .select_from(FailureModeAnnotation)
            .join(TraceSession, TraceSession.pk == FailureModeAnnotation.session_pk)
            .join(FailureMode, FailureMode.id == FailureModeAnnotation.failure_mode_id)
            .where(
                owned_by(FailureModeAnnotation, project_id),
                FailureModeAnnotation.failure_mode_id.in_(mode_ids),
                FailureModeAnnotation.confirmed.is_(True),
            )
        )
    ).all()
    order = {mode_id: index for index, mode_id in enumerate(mode_ids)}
    rows = sorted(found, key=lambda r: (r[0], order[r[3]]))
    return [Confirmation(r[1], r[2], r[3], r[4], r[5]) for r in rows]


async def create_suite(
    db: Database, project_id: str, *, name: str, failure_mode_ids: list[str], dataset_id: str | None
) -> SuiteInfo:
    """Freeze the sessions confirmed in `failure_mode_ids` as a new golden version of
    `dataset_id`, or of a new dataset named `name`; all or nothing."""
    suite_id = new_id("sts_")

    async def work(s: AsyncSession) -> StressTestSuite:
        await _modes(s, project_id, failure_mode_ids)
        if dataset_id is not None:
            dataset = await owned(
                s, DATASET, project_id, dataset_id, field="datasetId", for_update=True
            )
        confirmations = await _confirmations(s, project_id, failure_mode_ids)
        if not confirmations:
            raise Unprocessable(
                "no session is confirmed in these failure modes: confirm sessions with "
                "POST /sessions/{session_id}/failure-modes and confirmed: true first",
                field="failureModeIds",
            )
        content = suite_content(confirmations, suite_id)
        if not content.items:
            reasons = "; ".join(f"{k.session_id}: {k.reason}" for k in content.skipped)
            raise Unprocessable(
                f"none of the {len(content.skipped)} sessions confirmed in these failure modes "
                f"can be replayed ({reasons})",
                field="failureModeIds",
            )
        if dataset_id is None:
            dataset = await add_dataset(
                s,
                project_id,
                name,
                exists_hint="pass its id as datasetId to add the suite as its next version, "
                "or give the suite another name",
            )
        items = [NewItem(i.input, i.expected_output, i.metadata) for i in content.items]
        version = await add_version(s, dataset.id, items, golden=True)
        row = StressTestSuite(
            id=suite_id,
            project_id=project_id,
            name=name,
            failure_mode_ids=failure_mode_ids,
            dataset_id=dataset.id,
            dataset_version_id=version.id,
            item_count=len(items),
            skipped=[{"sessionId": k.session_id, "reason": k.reason} for k in content.skipped],
        )
        s.add(row)
        return row

    return _info(await db.write_unique(work, DATASET_NAME_UNIQUE))


async def get_suite(db: Database, project_id: str, suite_id: str) -> SuiteInfo:
    async with db.read() as s:
        return _info(await owned(s, SUITE, project_id, suite_id))


async def suite_version(
    s: AsyncSession, project_id: str, suite_id: str, *, field: str
) -> tuple[str, str]:
    """(dataset id, frozen version id) the suite replays; 404 naming `field` otherwise."""
    row = await owned(s, SUITE, project_id, suite_id, field=field)
    return row.dataset_id, row.dataset_version_id
