"""`/model-sweeps`: preview the cost, create, list, read and cancel a model sweep.

The MCP tools (`neens.mcp.tools`) read their input and build their answers with this module's
`new_sweep`, `preview_out`, `sweep_out` and `sweep_page`, so a tool and its route cannot disagree.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Query

from neens.api import paths  # noqa: F401  (the `sweep_id` path convertor)
from neens.api.deps import AnyKey, DbDep, SettingsDep, WorkerDep
from neens.api.paging import cursor_query, decode_cursor, next_cursor
from neens.api.schemas.sweeps import (
    ArmEstimateOut,
    ArmProgress,
    SweepArmOut,
    SweepIn,
    SweepList,
    SweepOut,
    SweepPreviewOut,
)
from neens.domain.gate import parse_gate_policy
from neens.domain.sweep_cost import usd_for_wire
from neens.errors import Unprocessable
from neens.store.db import Database
from neens.store.sweeps import NewArm, NewSweep
from neens.views import sweeps as views

router = APIRouter(prefix="/model-sweeps", tags=["model-sweeps"])

_SWEEPS = "sweeps"
"""The tag of this router's cursors."""


def new_sweep(body: SweepIn, *, creating: bool) -> NewSweep:
    """The sweep a request body asks for; `creating` requires the version label."""
    if creating and body.version_label is None:
        raise Unprocessable(
            "versionLabel is required: what is being evaluated, e.g. a git SHA",
            field="versionLabel",
        )
    if body.dataset_id is None and body.dataset_version_id is None and body.suite_id is None:
        raise Unprocessable("give datasetId, datasetVersionId or suiteId", field="datasetId")
    gate = parse_gate_policy(body.gate if body.gate is not None else {}).to_dict()
    label = body.version_label or ""
    return NewSweep(
        name=body.name or body.version_label or "model sweep",
        version_label=label,
        dataset_id=body.dataset_id,
        dataset_version_id=body.dataset_version_id,
        pass_k=body.pass_k,
        budget_usd=body.budget_usd,
        judge_ids=body.judge_deployment_ids,
        gate=gate,
        arms=[NewArm(arm.label, arm.agent_connection_id) for arm in body.arms],
        suite_id=body.suite_id,
    )


def sweep_out(view: views.SweepView) -> SweepOut:
    sweep, rollup = view.sweep, view.rollup
    return SweepOut(
        id=sweep.id,
        name=sweep.name,
        version_label=sweep.version_label,
        dataset_id=sweep.dataset_id,
        dataset_version_id=sweep.dataset_version_id,
        item_count=sweep.item_count,
        pass_k=sweep.pass_k,
        budget_usd=sweep.budget_usd,
        spent_usd=view.spent_usd,
        unpriced_calls=view.unpriced_calls,
        judge_deployment_ids=[str(j) for j in sweep.judge_ids],
        gate=dict(sweep.gate),
        fingerprint=sweep.fingerprint,
        status=rollup.status,
        void_reason=rollup.void_reason,
        diverged_arms=list(rollup.diverged_arms),
        reason=rollup.reason,
        created_at=sweep.created_at,
        completed_at=sweep.completed_at,
        arms=[
            SweepArmOut(
                id=arm.id,
                label=arm.label,
                agent_connection_id=view.connections[arm.id],
                model=view.models[arm.id],
                model_provider=view.providers[arm.id],
                status=arm.status,
                progress=ArmProgress(
                    runs_finished=arm.runs_finished,
                    runs=arm.runs,
                    items_done=arm.items_done,
                    items_total=arm.items_total,
                ),
                green_runs=arm.green_runs,
                passed=arm.passed,
                error=arm.error,
                run_ids=arm.run_ids,
            )
            for arm in rollup.arms
        ],
    )


def preview_out(preview: views.SweepPreview) -> SweepPreviewOut:
    estimate = preview.estimate
    return SweepPreviewOut(
        dataset_id=preview.dataset_id,
        dataset_version_id=preview.dataset_version_id,
        item_count=preview.item_count,
        pass_k=preview.pass_k,
        arms=[
            ArmEstimateOut(
                label=arm.label,
                agent_connection_id=arm.connection_id,
                model=arm.model,
                calls=arm.calls,
                estimated_usd=usd_for_wire(arm.estimated_usd),
                basis=arm.basis,
                basis_detail=arm.basis_detail,
            )
            for arm in preview.arms
        ],
        total_calls=estimate.total_calls,
        estimated_usd=usd_for_wire(estimate.estimated_usd),
        partial=estimate.partial,
        budget_usd=preview.budget_usd,
        would_refuse=estimate.would_refuse,
        refusal=estimate.refusal,
    )


async def sweep_page(db: Database, project_id: str, *, limit: int, cursor: str | None) -> SweepList:
    """One page of the project's sweeps, newest first, after `cursor`."""
    after = decode_cursor(_SWEEPS, cursor, (datetime, str), db.secrets)
    views_, end = await views.list_sweeps(
        db, project_id, limit=limit, after=(after[0], after[1]) if after else None
    )
    return SweepList(
        sweeps=[sweep_out(v) for v in views_], next_cursor=next_cursor(_SWEEPS, end, db.secrets)
    )


@router.post("/preview", operation_id="model_sweeps-preview")
async def preview_sweep(
    body: SweepIn, principal: AnyKey, db: DbDep, settings: SettingsDep
) -> SweepPreviewOut:
    """What the sweep would call and cost. Writes nothing and spends nothing."""
    return preview_out(
        await views.preview_sweep(
            db, principal.project_id, new_sweep(body, creating=False), settings
        )
    )


@router.post("", status_code=201, operation_id="model_sweeps-create")
async def create_sweep(
    body: SweepIn, principal: AnyKey, db: DbDep, settings: SettingsDep, worker: WorkerDep
) -> SweepOut:
    """Create the sweep and launch its arms' first runs; refused (422 naming the field) on
    fewer than two arms, a label or connection used twice, the caps, or the budget."""
    sweep_id = await views.create_sweep(
        db, principal.project_id, new_sweep(body, creating=True), settings
    )
    worker.notify()
    return sweep_out(await views.sweep_detail(db, principal.project_id, sweep_id))


@router.get("", operation_id="model_sweeps-list")
async def list_sweeps(
    principal: AnyKey,
    db: DbDep,
    limit: int = Query(default=20, ge=1, le=200, description="Sweeps per page."),
    cursor: str | None = cursor_query(),
) -> SweepList:
    """Newest first, one page at a time: pass `nextCursor` back as `cursor` for the next."""
    return await sweep_page(db, principal.project_id, limit=limit, cursor=cursor)


@router.get("/{sweep_id:sweep_id}", operation_id="model_sweeps-get")
async def get_sweep(sweep_id: str, principal: AnyKey, db: DbDep) -> SweepOut:
    """The sweep, each arm rolled up from its child runs as they are now."""
    return sweep_out(await views.sweep_detail(db, principal.project_id, sweep_id))


@router.post("/{sweep_id:sweep_id}/cancel", operation_id="model_sweeps-cancel")
async def cancel_sweep(sweep_id: str, principal: AnyKey, db: DbDep) -> SweepOut:
    """Cancel the sweep and its runs in flight; a sweep that already ended is returned as is."""
    return sweep_out(await views.cancel_sweep(db, principal.project_id, sweep_id))
