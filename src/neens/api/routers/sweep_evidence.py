"""`/model-sweeps/{id}/evidence`: a sweep's per-answer results and frozen cases, read only:
what the decision is computed from, for an evidence bundle anyone can re-check offline.

The body is streamed as it is read (`views.sweep_evidence.rows`): a sweep of 180,000 answers
with long outputs is never built in memory whole."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from neens.api import paths  # noqa: F401  (the `sweep_id` path convertor)
from neens.api.deps import AnyKey, DbDep
from neens.api.schemas.sweep_evidence import (
    EvidenceAnswerOut,
    EvidenceArmOut,
    EvidenceCaseOut,
    SweepEvidenceOut,
)
from neens.store.db import Database
from neens.store.sweep_evidence import AnswerRow
from neens.views.sweep_evidence import ArmAnswers, SweepEvidence, rows, sweep_evidence

router = APIRouter(prefix="/model-sweeps", tags=["model-sweeps"])


@router.get(
    "/{sweep_id:sweep_id}/evidence",
    operation_id="model_sweeps-evidence",
    response_model=SweepEvidenceOut,
)
async def get_evidence(sweep_id: str, principal: AnyKey, db: DbDep) -> StreamingResponse:
    """Every answer each arm's runs captured (verdict, score, cost, agent name, output) and the
    frozen cases: the rows `/comparison` adds up. A void sweep has evidence too; what it lacks
    is a fair comparison."""
    found = await sweep_evidence(db, principal.project_id, sweep_id)
    return StreamingResponse(_body(db, found), media_type="application/json")


async def _body(db: Database, found: SweepEvidence) -> AsyncIterator[bytes]:
    """`SweepEvidenceOut` as JSON, its fields in order, `cases` and `answers` a batch at a
    time."""
    head = {
        "sweepId": found.standing.sweep.id,
        "status": found.standing.rollup.status,
        "datasetVersionId": found.standing.sweep.dataset_version_id,
        "arms": [
            EvidenceArmOut(
                arm_id=arm.arm_id,
                label=arm.label,
                position=arm.position,
                runs=arm.runs,
                run_ids=arm.run_ids,
            ).model_dump(mode="json")
            for arm in found.arms
        ],
    }
    yield json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1].encode()
    yield b',"cases":['
    first, answering = True, False
    async for batch in rows(db, found):
        if isinstance(batch, ArmAnswers):
            if not answering:
                yield b'],"answers":['
                first, answering = True, True
            parts = [_answer(batch, answer) for answer in batch.answers]
        else:
            parts = [
                EvidenceCaseOut(
                    item_id=case.item_id,
                    position=case.position,
                    input=case.input,
                    expected_output=case.expected_output,
                    metadata=dict(case.metadata or {}),
                ).model_dump_json()
                for case in batch
            ]
        if parts:
            yield (("" if first else ",") + ",".join(parts)).encode()
            first = False
    yield b"]}" if answering else b'],"answers":[]}'


def _answer(batch: ArmAnswers, answer: AnswerRow) -> str:
    return EvidenceAnswerOut(
        arm_id=batch.arm.arm_id,
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
    ).model_dump_json()
