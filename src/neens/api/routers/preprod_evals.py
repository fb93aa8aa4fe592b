"""`/preprod-evals`: create a run, read it and its frozen items, cancel it."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Query

from neens.api import paths  # noqa: F401  (the `run_id` path convertor)
from neens.api.deps import AnyKey, DbDep, WorkerDep
from neens.api.paging import cursor_query, decode_cursor, next_cursor
from neens.api.schemas.preprod import (
    ImportedTrialOut,
    ItemCounts,
    ItemErrorIn,
    PreprodCreate,
    PreprodItemList,
    PreprodItemOut,
    PreprodList,
    PreprodOut,
    RunWaiting,
)
from neens.domain.gate import parse_gate_policy
from neens.errors import Unprocessable
from neens.store import runs as store
from neens.views.runs import run_detail, run_items_page, run_list

router = APIRouter(prefix="/preprod-evals", tags=["preprod-evals"])

_RUNS = "runs"
_ITEMS = "run-items"
"""The tags of this router's cursors."""
MAX_ITEMS_PAGE = 5000
DEFAULT_ITEMS_PAGE = 500
"""A run's items per page when a cursor is given without `limit`."""


def run_out(info: store.RunInfo) -> PreprodOut:
    return PreprodOut(
        id=info.id,
        name=info.name,
        dataset_id=info.dataset_id,
        dataset_version_id=info.dataset_version_id,
        version_label=info.version_label,
        runner_mode=info.runner_mode,
        agent_connection_id=info.agent_connection_id,
        model=info.model,
        model_provider=info.model_provider,
        judge_deployment_ids=info.judge_ids,
        baseline=info.baseline,
        gate=info.gate,
        status=info.status,
        error=info.error,
        item_count=info.item_count,
        counts=ItemCounts(**info.counts),
        created_at=info.created_at,
        started_at=info.started_at,
        completed_at=info.completed_at,
        waiting_for=RunWaiting(
            on=info.waiting.on,
            job=info.waiting.job,
            since=info.waiting.since,
            message=info.waiting.message,
        )
        if info.waiting is not None
        else None,
        imported=info.imported,
    )


@router.post("", status_code=201, operation_id="preprod_evals-create")
async def create_run(
    body: PreprodCreate, principal: AnyKey, db: DbDep, worker: WorkerDep
) -> PreprodOut:
    """Create a run: freeze the golden items, the connection's model and the judges."""
    if body.runner_mode == "push" and body.agent_connection_id is None:
        raise Unprocessable(
            "runner_mode push needs agent_connection_id: the endpoint Neens calls",
            field="agent_connection_id",
        )
    if body.runner_mode == "runner" and body.agent_connection_id is not None:
        raise Unprocessable(
            "agent_connection_id is for runner_mode push; in runner mode you run the agent",
            field="agent_connection_id",
        )
    gate = parse_gate_policy(body.gate if body.gate is not None else {})
    run_id = await store.create_run(
        db,
        principal.project_id,
        store.NewRun(
            name=body.name or body.version_label,
            dataset_id=body.dataset_id,
            dataset_version_id=body.dataset_version_id,
            version_label=body.version_label,
            runner_mode=body.runner_mode,
            agent_connection_id=body.agent_connection_id,
            judge_ids=body.judge_deployment_ids,
            baseline=body.baseline.to_dict() if body.baseline else None,
            gate=gate.to_dict(),
        ),
    )
    worker.notify()
    return run_out(await store.get_run(db, principal.project_id, run_id))


@router.get("", operation_id="preprod_evals-list")
async def list_runs(
    principal: AnyKey,
    db: DbDep,
    dataset_id: str | None = Query(default=None, description="Only runs of this dataset."),
    limit: int = Query(default=50, ge=1, le=500, description="Runs per page."),
    cursor: str | None = cursor_query(),
) -> PreprodList:
    """Newest first, one page at a time: pass `nextCursor` back as `cursor` (with the same
    `dataset_id`) for the next page."""
    after = decode_cursor(_RUNS, cursor, (datetime, str), db.secrets)
    infos, end = await run_list(
        db,
        principal.project_id,
        limit=limit,
        dataset_id=dataset_id,
        after=(after[0], after[1]) if after else None,
    )
    return PreprodList(
        runs=[run_out(i) for i in infos], next_cursor=next_cursor(_RUNS, end, db.secrets)
    )


@router.get("/{run_id:run_id}", operation_id="preprod_evals-get")
async def get_run(run_id: str, principal: AnyKey, db: DbDep) -> PreprodOut:
    return run_out(await run_detail(db, principal.project_id, run_id))


@router.get("/{run_id}/items", operation_id="preprod_evals-items")
async def list_items(
    run_id: str,
    principal: AnyKey,
    db: DbDep,
    limit: int | None = Query(
        default=None,
        ge=1,
        le=MAX_ITEMS_PAGE,
        description="Items per page; without it (and without `cursor`) every item is returned.",
    ),
    cursor: str | None = cursor_query(
        "The `next_cursor` of the previous page, passed back unchanged, to read the page after it."
    ),
) -> PreprodItemList:
    """The frozen prompts to drive the agent with, and each one's capture and verdict: every
    item in frozen order, or a page of `limit` items followed by `next_cursor`."""
    after = decode_cursor(_ITEMS, cursor, (int,), db.secrets)
    if after is not None and limit is None:
        limit = DEFAULT_ITEMS_PAGE
    items, end = await run_items_page(
        db, principal.project_id, run_id, limit=limit, after=after[0] if after else None
    )
    return PreprodItemList(
        items=[_item_out(i) for i in items],
        next_cursor=next_cursor(_ITEMS, None if end is None else (end,), db.secrets),
    )


def _item_out(i: store.RunItem) -> PreprodItemOut:
    return PreprodItemOut(
        item_id=i.item_id,
        position=i.position,
        input=i.input,
        expected_output=i.expected_output,
        status=i.status,
        session_id=i.session_id,
        score=i.score,
        passed=i.passed,
        baseline_passed=i.baseline_passed,
        error=i.error,
        output=i.output,
        trials=[ImportedTrialOut(**t) for t in i.trials] if i.trials is not None else None,
    )


@router.post("/{run_id}/items/{item_id}/error", operation_id="preprod_evals-report_item_error")
async def report_item_error(
    run_id: str, item_id: str, body: ItemErrorIn, principal: AnyKey, db: DbDep, worker: WorkerDep
) -> PreprodItemOut:
    """Runner mode: mark a pending item `error` because your agent could not run it. The run
    then finishes with that item counted as failed (`409` when the item is not pending)."""
    if await store.report_item_error(db, principal.project_id, run_id, item_id, body.reason):
        worker.notify()
    [item] = [
        i for i in await store.list_items(db, principal.project_id, run_id) if i.item_id == item_id
    ]
    return _item_out(item)


@router.post("/{run_id}/cancel", operation_id="preprod_evals-cancel")
async def cancel_run(run_id: str, principal: AnyKey, db: DbDep) -> PreprodOut:
    """Cancel an unfinished run. It accepts no traces afterwards and its gate fails."""
    await store.cancel_run(db, principal.project_id, run_id)
    return run_out(await store.get_run(db, principal.project_id, run_id))
