"""Saving case-trials: batched as they finish, each durable when its save returns, a rerun
replacing its error row, and a failed write reported to every save in its batch."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from sqlalchemy.exc import IntegrityError

from neens.store.db import Database
from neens.store.experiments import (
    ExperimentRow,
    GradeRow,
    TrialRow,
    TrialWriter,
    create_experiment,
    tally,
    trials_of,
)
from neens.store.types import utcnow


def _experiment(experiment_id: str) -> ExperimentRow:
    return ExperimentRow(
        id=experiment_id,
        kind="run",
        name="n",
        spec={},
        dataset_ref="d",
        dataset_version_id=None,
        dataset_hash="h",
        task_hash="t",
        agent_files={},
        graders=[],
        cases=[],
        selection={},
        failing_of=None,
        trials=1,
        planned=40,
        concurrency=8,
        created_at=utcnow(),
    )


def _trial(case: str, *, status: str = "done", passed: bool | None = True) -> TrialRow:
    grade = GradeRow("exact-1", "exact", "v1", 1.0 if passed else 0.0, passed, None, "checked")
    return TrialRow(
        case_id=case,
        trial=0,
        status=status,
        error_kind="infra" if status == "error" else None,
        error="down" if status == "error" else None,
        output=None if status == "error" else "x",
        passed=passed,
        attempts=1,
        latency_ms=1.0,
        cost_usd=None,
        started_at=utcnow(),
        finished_at=utcnow(),
        grades=() if status == "error" else (grade,),
    )


async def test_concurrent_saves_are_batched_and_each_is_committed_when_it_returns(
    db: Database,
) -> None:
    await create_experiment(db, _experiment("exp_A"))
    writer = TrialWriter(db)

    async def save(i: int) -> int:
        await writer.save("exp_A", _trial(f"c{i:02d}"))
        return len(await trials_of(db, "exp_A", grades=False))

    seen = await asyncio.gather(*(save(i) for i in range(40)))
    assert all(count >= 1 for count in seen)
    trials = await trials_of(db, "exp_A")
    assert [t.case_id for t in trials] == [f"c{i:02d}" for i in range(40)]
    assert all(len(t.grades) == 1 and t.grades[0].grader == "exact-1" for t in trials)


async def test_a_rerun_replaces_the_error_row(db: Database) -> None:
    await create_experiment(db, _experiment("exp_A"))
    writer = TrialWriter(db)
    await writer.save("exp_A", _trial("c1", status="error", passed=None))
    assert (await tally(db, ["exp_A"]))["exp_A"].infra_errors == 1
    await writer.save("exp_A", _trial("c1"))
    [trial] = await trials_of(db, "exp_A")
    assert trial.status == "done" and trial.passed is True and len(trial.grades) == 1
    counts = (await tally(db, ["exp_A"]))["exp_A"]
    assert (counts.done, counts.infra_errors, counts.passed) == (1, 0, 1)


async def test_a_failed_write_is_raised_by_every_save_of_its_batch(db: Database) -> None:
    writer = TrialWriter(db)
    results = await asyncio.gather(
        writer.save("exp_missing", _trial("c1")),
        writer.save("exp_missing", _trial("c2")),
        return_exceptions=True,
    )
    assert all(isinstance(r, IntegrityError) for r in results)
    await create_experiment(db, _experiment("exp_A"))
    await writer.save("exp_A", _trial("c3"))  # the writer goes on after a failed batch
    assert len(await trials_of(db, "exp_A")) == 1
    with pytest.raises(IntegrityError):
        await writer.save("exp_missing", _trial("c4"))


async def test_a_sweep_run_made_twice_for_one_key_keeps_the_first_and_writes_nothing_more(
    db: Database,
) -> None:
    """Two processes resuming one sweep may both make its next run: the second learns so."""
    from neens.store.experiment_sweeps import (
        SweepRow,
        SweepRunKey,
        create_sweep,
        create_sweep_run,
        sweep_runs,
    )
    from neens.store.experiments import get_experiment

    await create_sweep(db, SweepRow("swp_1", "s", "d", {}, utcnow()))
    key = SweepRunKey("base", "race", 1)
    assert await create_sweep_run(db, "swp_1", key, _experiment("exp_first"))
    assert not await create_sweep_run(db, "swp_1", key, _experiment("exp_second"))
    assert await sweep_runs(db, "swp_1") == {key: "exp_first"}
    assert await get_experiment(db, "exp_second") is None  # one transaction: no orphan run
    # Another key is its own run.
    assert await create_sweep_run(db, "swp_1", SweepRunKey("t2", "race", 1), _experiment("exp_t2"))


async def test_a_summed_cost_past_the_largest_double_is_none_on_both_databases(
    db: Database,
) -> None:
    """SQLite's SUM would give infinity and PostgreSQL's raise "value out of range": costs at or
    above HUGE_COST are summed in Python, the rest by SUM as before."""
    costs = {"exp_A": [1e308, 1e308], "exp_B": [0.25, 0.5, 1e300], "exp_C": [0.25, 0.5, None]}
    writer = TrialWriter(db)
    for experiment_id, values in costs.items():
        await create_experiment(db, _experiment(experiment_id))
        for i, cost in enumerate(values):
            await writer.save(experiment_id, replace(_trial(f"c{i}"), cost_usd=cost))

    counts = await tally(db, list(costs))

    assert (counts["exp_A"].cost_usd, counts["exp_A"].priced) == (None, 2)
    assert counts["exp_B"].cost_usd == 0.75 + 1e300 and counts["exp_B"].priced == 3
    assert (counts["exp_C"].cost_usd, counts["exp_C"].priced) == (0.75, 2)
