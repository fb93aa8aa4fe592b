"""A sweep's evidence, answer by answer: what `neens sweep export` bundles beside the decision,
so anyone can add the answers up again and check every number of it offline."""

from __future__ import annotations

from dataclasses import dataclass

from neens.store import sweep_evidence as store
from neens.store.db import Database
from neens.views.sweeps import SweepStanding, sweep_standing


@dataclass(frozen=True, slots=True)
class ArmAnswers:
    arm_id: str
    label: str
    position: int
    runs: int
    run_ids: list[str]
    answers: list[store.AnswerRow]


@dataclass(frozen=True, slots=True)
class SweepEvidence:
    standing: SweepStanding
    arms: list[ArmAnswers]
    cases: list[store.CaseRow]


async def sweep_evidence(db: Database, project_id: str, sweep_id: str) -> SweepEvidence:
    """Every answer of every arm's launched runs, and the frozen cases, as the decision reads
    them (404 for a sweep of another project, as every sweep read)."""
    standing = await sweep_standing(db, project_id, sweep_id)
    async with db.read() as s:
        arms = [
            ArmAnswers(
                arm_id=arm.id,
                label=arm.label,
                position=position,
                runs=arm.runs,
                run_ids=list(arm.run_ids),
                answers=await store.answer_rows(s, arm.run_ids),
            )
            for position, arm in enumerate(standing.rollup.arms)
        ]
        cases = await store.case_rows(s, standing.sweep.dataset_version_id)
    return SweepEvidence(standing, arms, cases)
