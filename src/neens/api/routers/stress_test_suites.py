"""Stress-test suites, `/stress-test-suites`: a frozen golden dataset version built from the
sessions people confirmed in failure modes, for sweeps and runs to replay."""

from __future__ import annotations

from fastapi import APIRouter

from neens.api.deps import AnyKey, DbDep
from neens.api.schemas.stress_test_suites import SkippedSessionOut, SuiteCreate, SuiteOut
from neens.store import stress_suites as store


def suite_out(info: store.SuiteInfo) -> SuiteOut:
    return SuiteOut(
        id=info.id,
        name=info.name,
        failure_mode_ids=info.failure_mode_ids,
        dataset_id=info.dataset_id,
        dataset_version_id=info.dataset_version_id,
        item_count=info.item_count,
        skipped_sessions=[
            SkippedSessionOut(session_id=k["sessionId"], reason=k["reason"]) for k in info.skipped
        ],
        created_at=info.created_at,
    )


router = APIRouter(prefix="/stress-test-suites", tags=["stress-test-suites"])


@router.post("", status_code=201, operation_id="stress_test_suites-create")
async def create_suite(body: SuiteCreate, principal: AnyKey, db: DbDep) -> SuiteOut:
    """Freeze the sessions confirmed in `failureModeIds` as a new golden dataset version: one
    item per session, its input the session's input."""
    info = await store.create_suite(
        db,
        principal.project_id,
        name=body.name,
        failure_mode_ids=body.failure_mode_ids,
        dataset_id=body.dataset_id,
    )
    return suite_out(info)


@router.get("/{suite_id}", operation_id="stress_test_suites-get")
async def get_suite(suite_id: str, principal: AnyKey, db: DbDep) -> SuiteOut:
    """The suite with its dataset and the frozen version sweeps replay."""
    return suite_out(await store.get_suite(db, principal.project_id, suite_id))
