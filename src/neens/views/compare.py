"""Across runs: Compare Versions (runs over one golden version, prompt by prompt) and the
trajectory diff (two runs' steps on one prompt)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from neens.domain import comparison
from neens.domain.comparison import RunColumn, VersionsComparison
from neens.domain.preprod import items_cohort
from neens.domain.trajectory import Step, StepDiff, diff_trajectories, steps_of
from neens.errors import NotFound, Unprocessable
from neens.store.db import Database
from neens.store.review import captured_session, run_outcomes
from neens.store.session_reads import get_session


async def compare_versions(
    db: Database, project_id: str, run_ids: Sequence[str], baseline: str | None = None
) -> VersionsComparison:
    """Runs over the same golden version side by side: a row per prompt, a cell per run.

    `baseline` is the run the others are measured against; by default the first listed."""
    if not run_ids:
        raise Unprocessable("runs must name at least one run", field="runs")
    outcomes = []
    for run_id in run_ids:
        try:
            outcomes.append(await run_outcomes(db, project_id, run_id))
        except NotFound as exc:
            exc.field = "runs"  # the parameter that named it
            raise
    versions = {o.dataset_version_id for o in outcomes}
    if len(versions) > 1:
        raise Unprocessable(
            "these runs replayed different golden versions "
            f"({', '.join(sorted(versions))}); only runs over one version can be compared",
            field="runs",
        )
    return comparison.compare_versions(
        [
            RunColumn(o.run_id, o.version_label, o.model, o.items, items_cohort(o.items))
            for o in outcomes
        ],
        baseline or run_ids[0],
    )


@dataclass(frozen=True, slots=True)
class Trajectory:
    """Two runs' steps for one prompt, aligned; `steps` is empty unless both were captured."""

    run_id: str
    baseline_run_id: str
    item_id: str
    candidate_captured: bool
    baseline_captured: bool
    steps: list[StepDiff]


async def _steps(db: Database, project_id: str, run_id: str, item_id: str) -> list[Step] | None:
    trace_id = await captured_session(db, project_id, run_id, item_id)
    if trace_id is None:
        return None
    return steps_of((await get_session(db, project_id, trace_id)).spans)


async def run_trajectory(
    db: Database, project_id: str, run_id: str, baseline_run_id: str, item_id: str
) -> Trajectory:
    """The two runs' steps for `item_id`, each marked added, removed, changed or same."""
    candidate = await _steps(db, project_id, run_id, item_id)
    base = await _steps(db, project_id, baseline_run_id, item_id)
    diff = diff_trajectories(base, candidate) if candidate and base else []
    return Trajectory(
        run_id=run_id,
        baseline_run_id=baseline_run_id,
        item_id=item_id,
        candidate_captured=candidate is not None,
        baseline_captured=base is not None,
        steps=diff,
    )
