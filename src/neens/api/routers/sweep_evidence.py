"""`/model-sweeps/{id}/evidence`: a sweep's per-answer results and frozen cases, read only:
what the decision is computed from, for an evidence bundle anyone can re-check offline."""

from __future__ import annotations

from fastapi import APIRouter

from neens.api import paths  # noqa: F401  (the `sweep_id` path convertor)
from neens.api.deps import AnyKey, DbDep
from neens.api.schemas.sweep_evidence import (
    EvidenceAnswerOut,
    EvidenceArmOut,
    EvidenceCaseOut,
    SweepEvidenceOut,
)
from neens.views.sweep_evidence import sweep_evidence

router = APIRouter(prefix="/model-sweeps", tags=["model-sweeps"])


@router.get("/{sweep_id:sweep_id}/evidence", operation_id="model_sweeps-evidence")
async def get_evidence(sweep_id: str, principal: AnyKey, db: DbDep) -> SweepEvidenceOut:
    """Every answer each arm's runs captured (verdict, score, cost, agent name, output) and the
    frozen cases: the rows `/comparison` adds up. A void sweep has evidence too; what it lacks
    is a fair comparison."""
    found = await sweep_evidence(db, principal.project_id, sweep_id)
    return SweepEvidenceOut(
        sweep_id=found.standing.sweep.id,
        status=found.standing.rollup.status,
        dataset_version_id=found.standing.sweep.dataset_version_id,
        arms=[
            EvidenceArmOut(
                arm_id=arm.arm_id,
                label=arm.label,
                position=arm.position,
                runs=arm.runs,
                run_ids=arm.run_ids,
            )
            for arm in found.arms
        ],
        cases=[
            EvidenceCaseOut(
                item_id=case.item_id,
                position=case.position,
                input=case.input,
                expected_output=case.expected_output,
                metadata=dict(case.metadata or {}),
            )
            for case in found.cases
        ],
        answers=[
            EvidenceAnswerOut(
                arm_id=arm.arm_id,
                item_id=answer.item_id,
                run_id=answer.run_id,
                session_id=answer.session_id,
                status=answer.status,
                scored=answer.status == "scored",
                passed=answer.passed,
                score=answer.score,
                cost_usd=answer.cost_usd,
                agent_name=answer.agent_name,
                latency_ms=answer.latency_ms,
                output=answer.output,
            )
            for arm in found.arms
            for answer in arm.answers
        ],
    )
