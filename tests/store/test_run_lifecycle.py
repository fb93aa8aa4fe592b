"""One writer of a run's status: every terminal status queues one `run.finished` job in its own
transaction, and of two paths finishing one run at once exactly one wins."""

from __future__ import annotations

import ast
import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from neens.domain.run_lifecycle import TERMINAL, RunStatus, can_move
from neens.errors import Conflict, RunTransitionRefused
from neens.store.datasets import NewItem, create_dataset, create_version
from neens.store.db import Database
from neens.store.jobs import JobKind
from neens.store.keys import create_key
from neens.store.models import Job, PreprodRun
from neens.store.run_lifecycle import move
from neens.store.runs import NewRun, cancel_run, create_run

SRC = Path(__file__).resolve().parents[2] / "src" / "neens"
_names = itertools.count()


async def _project(db: Database) -> str:
    key = await create_key(db, company="Acme", project="Support agent", role="admin")
    return key.project_id


async def _run(db: Database, project_id: str, *, running: bool = True) -> str:
    """A runner-mode run of two items, moved to `running` unless `running` is False."""
    dataset = await create_dataset(db, project_id, f"golden-{next(_names)}")
    items = [NewItem("Where is order 17?", "Shipped.", {}), NewItem("Hi", "Hello.", {})]
    await create_version(db, project_id, dataset.id, items, golden=True)
    new = NewRun("lifecycle", dataset.id, None, "candidate", "runner", None, None, None, {})
    run_id = await create_run(db, project_id, new)
    if running:
        async with db.write() as s:
            await move(s, await _locked(s, run_id), "running")
    return run_id


async def _locked(s: Any, run_id: str) -> PreprodRun:
    run = await s.scalar(select(PreprodRun).where(PreprodRun.id == run_id).with_for_update())
    assert run is not None
    return run


async def _row(db: Database, run_id: str) -> PreprodRun:
    async with db.read() as s:
        run = await s.get(PreprodRun, run_id)
    assert run is not None
    return run


async def _finished_jobs(db: Database, run_id: str) -> list[Job]:
    async with db.read() as s:
        rows = await s.scalars(select(Job).where(Job.kind == JobKind.RUN_FINISHED))
        return [job for job in rows if job.payload == {"run_id": run_id}]


def test_job_kinds_keep_the_names_stored_in_the_jobs_table() -> None:
    assert {kind.value for kind in JobKind} == {
        "preprod.push",
        "preprod.score",
        "notify.deliver",
        "production.score",
        "run.finished",
    }


async def test_a_new_runner_run_waits_and_its_first_move_stamps_the_start(db: Database) -> None:
    project_id = await _project(db)
    run_id = await _run(db, project_id, running=False)
    waiting = await _row(db, run_id)
    assert (waiting.status, waiting.started_at) == ("awaiting_traces", None)
    async with db.write() as s:
        await move(s, await _locked(s, run_id), "running")
    started = await _row(db, run_id)
    assert started.status == "running" and started.started_at is not None
    assert started.completed_at is None
    assert await _finished_jobs(db, run_id) == []


@pytest.mark.parametrize("status", sorted(TERMINAL))
async def test_a_terminal_status_queues_one_run_finished_job_and_never_moves_again(
    db: Database, status: RunStatus
) -> None:
    project_id = await _project(db)
    run_id = await _run(db, project_id)
    async with db.write() as s:
        await move(s, await _locked(s, run_id), status, error="why" if status == "failed" else None)
    run = await _row(db, run_id)
    assert run.status == status and run.completed_at is not None
    assert run.error == ("why" if status == "failed" else None)
    [job] = await _finished_jobs(db, run_id)
    assert (job.kind, job.dedupe_key, job.status) == (
        "run.finished",
        f"finished:{run_id}",
        "queued",
    )
    for again in sorted(TERMINAL):
        with pytest.raises(RunTransitionRefused, match=f"from {status} to {again}"):
            async with db.write() as s:
                await move(s, await _locked(s, run_id), again)
    assert (await _row(db, run_id)).status == status
    assert len(await _finished_jobs(db, run_id)) == 1


async def test_a_finish_rolled_back_leaves_the_run_running_and_no_job(db: Database) -> None:
    project_id = await _project(db)
    run_id = await _run(db, project_id)
    with pytest.raises(RuntimeError, match="after the move"):
        async with db.write() as s:
            await move(s, await _locked(s, run_id), "completed")
            raise RuntimeError("the transaction fails after the move")
    run = await _row(db, run_id)
    assert (run.status, run.completed_at) == ("running", None)
    assert await _finished_jobs(db, run_id) == []


async def test_a_move_from_a_stale_status_moves_nothing(db: Database) -> None:
    """Compare-and-set: a caller that read `running` before another path finished the run is
    refused, even without holding the row lock."""
    project_id = await _project(db)
    run_id = await _run(db, project_id)
    stale = await _row(db, run_id)
    async with db.write() as s:
        await move(s, await _locked(s, run_id), "completed")
    with pytest.raises(RunTransitionRefused, match="it moved to completed meanwhile"):
        async with db.write() as s:
            await move(s, stale, "cancelled")
    assert (await _row(db, run_id)).status == "completed"
    assert len(await _finished_jobs(db, run_id)) == 1


async def test_two_stale_finishes_at_once_one_wins_one_is_refused(db: Database) -> None:
    project_id = await _project(db)
    for _ in range(3):
        run_id = await _run(db, project_id)
        first, second = await _row(db, run_id), await _row(db, run_id)

        async def finish(run: PreprodRun, to: RunStatus) -> RunStatus:
            async with db.write() as s:
                await move(s, run, to)
            return to

        outcomes = await asyncio.gather(
            finish(first, "cancelled"), finish(second, "failed"), return_exceptions=True
        )
        won = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, RunTransitionRefused)]
        assert len(won) == 1 and len(refused) == 1, outcomes
        assert (await _row(db, run_id)).status == won[0]
        assert len(await _finished_jobs(db, run_id)) == 1


async def test_cancel_racing_completion_leaves_one_winner_and_one_job(db: Database) -> None:
    project_id = await _project(db)
    for _ in range(3):
        run_id = await _run(db, project_id)

        async def complete(run_id: str) -> str:
            """As scoring finishes a run: under the row lock, a no-op once it has ended."""
            async with db.write() as s:
                run = await _locked(s, run_id)
                if not can_move(run.status, "completed"):
                    return "no-op"
                await move(s, run, "completed")
            return "completed"

        outcomes = await asyncio.gather(
            cancel_run(db, project_id, run_id), complete(run_id), return_exceptions=True
        )
        final = (await _row(db, run_id)).status
        if final == "cancelled":
            assert outcomes == [None, "no-op"]
        else:
            assert final == "completed" and outcomes[1] == "completed"
            assert isinstance(outcomes[0], Conflict)
            assert str(outcomes[0]) == f"run {run_id} is already completed"
        assert len(await _finished_jobs(db, run_id)) == 1


def _status_writes(path: Path) -> list[int]:
    """Lines that set a run's status: `<run>.status = …`, `PreprodRun(…, status=…)` or
    `update(PreprodRun)….values(status=…)`."""
    tree = ast.parse(path.read_text())
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == "status"
                    and "run" in ast.unparse(target.value).lower()
                ):
                    lines.append(node.lineno)
        if isinstance(node, ast.Call) and any(k.arg == "status" for k in node.keywords):
            called = ast.unparse(node.func)
            if called == "PreprodRun" or (
                called.endswith(".values") and "update(PreprodRun)" in called
            ):
                lines.append(node.lineno)
    return lines


def test_only_the_lifecycle_module_writes_a_run_status() -> None:
    writers = {
        str(path.relative_to(SRC)): lines
        for path in sorted(SRC.rglob("*.py"))
        if (lines := _status_writes(path))
    }
    assert writers == {"store/run_lifecycle.py": writers.get("store/run_lifecycle.py", [])}
    assert writers["store/run_lifecycle.py"]  # the check does see a write


def test_the_correlation_keys_are_spelled_only_in_conventions() -> None:
    keys = ("neens.eval_run_id", "neens.dataset_item_id", "neens.version_label")
    spelled = [
        f"{path.relative_to(SRC)}: {key}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "conventions.py" or path.parent.name != "domain"
        for key in keys
        if key in path.read_text()
    ]
    assert spelled == []
