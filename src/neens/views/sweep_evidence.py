"""A sweep's evidence, answer by answer: what `neens sweep export` bundles beside the decision,
so anyone can add the answers up again and check every number of it offline.

The frozen cases and the answers are read from a cursor a batch at a time (`rows`), so a sweep
whose agents gave long answers is never held in memory whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from neens.store import sweep_evidence as store
from neens.store.db import Database
from neens.views.sweeps import SweepStanding, sweep_standing


@dataclass(frozen=True, slots=True)
class EvidenceArm:
    arm_id: str
    label: str
    position: int
    runs: int
    run_ids: list[str]


@dataclass(frozen=True, slots=True)
class SweepEvidence:
    standing: SweepStanding
    arms: list[EvidenceArm]


@dataclass(frozen=True, slots=True)
class ArmAnswers:
    """A batch of one arm's answers."""

    arm: EvidenceArm
    answers: list[store.AnswerRow]


async def sweep_evidence(db: Database, project_id: str, sweep_id: str) -> SweepEvidence:
    """The sweep and its arms' launched runs (404 for a sweep of another project, as every
    sweep read); `rows` then reads the cases and answers."""
    standing = await sweep_standing(db, project_id, sweep_id)
    arms = [
        EvidenceArm(
            arm_id=arm.id,
            label=arm.label,
            position=position,
            runs=arm.runs,
            run_ids=list(arm.run_ids),
        )
        for position, arm in enumerate(standing.rollup.arms)
    ]
    return SweepEvidence(standing, arms)


async def rows(
    db: Database, evidence: SweepEvidence
) -> AsyncIterator[list[store.CaseRow] | ArmAnswers]:
    """The frozen cases in order, then every answer of every arm's launched runs by arm
    position, item position and run, in batches, all from one read."""
    async with db.read() as s:
        async for cases in store.stream_case_rows(s, evidence.standing.sweep.dataset_version_id):
            yield cases
        for arm in evidence.arms:
            async for answers in store.stream_answer_rows(s, arm.run_ids):
                yield ArmAnswers(arm, answers)
