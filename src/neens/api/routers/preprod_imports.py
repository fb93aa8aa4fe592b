"""`POST /preprod-evals/imports`: another tool's results stored as a finished, read-only run."""

from __future__ import annotations

from fastapi import APIRouter

from neens.api.deps import AnyKey, DbDep
from neens.api.routers.preprod_evals import run_out
from neens.api.schemas.preprod import PreprodOut
from neens.api.schemas.preprod_import import PreprodImportCreate
from neens.domain.gate import parse_gate_policy
from neens.store import run_imports as store
from neens.store.runs import get_run

router = APIRouter(prefix="/preprod-evals", tags=["preprod-evals"])


@router.post("/imports", status_code=201, operation_id="preprod_evals-import")
async def import_run(body: PreprodImportCreate, principal: AnyKey, db: DbDep) -> PreprodOut:
    """Store another tool's per-item results (Inspect AI, promptfoo, MLflow, OpenAI Evals) on a
    dataset version as a finished run: `completed`, or `failed` when every item errored. Every
    item of the version needs one result, with one trial per repeat. The run is read-only: it
    takes no traces, and cancelling it or reporting an item error answers `409`."""
    source = body.source
    repeats = max(len(item.trials) for item in body.items)
    imported = {
        "tool": source.tool,
        "toolVersion": source.tool_version,
        "runId": source.run_id,
        "task": source.task,
        "sha256": source.sha256,
        "createdAt": source.created_at,
        "repeats": repeats,
        "unknown": dict(source.unknown),
        "warnings": list(source.warnings),
    }
    run_id = await store.create_imported_run(
        db,
        principal.project_id,
        store.NewImportedRun(
            name=body.name or body.version_label,
            dataset_id=body.dataset_id,
            dataset_version_id=body.dataset_version_id,
            version_label=body.version_label,
            model=body.model,
            gate=parse_gate_policy(body.gate if body.gate is not None else {}).to_dict(),
            imported=imported,
            items=tuple(
                store.ImportedItem(
                    item.item_id,
                    tuple(
                        store.ImportedTrial(
                            t.trial, t.output, t.score, t.passed, t.error, t.cost_usd, t.latency_ms
                        )
                        for t in item.trials
                    ),
                )
                for item in body.items
            ),
        ),
    )
    return run_out(await get_run(db, principal.project_id, run_id))
