"""One process at a time runs an experiment: a second `--resume` of a run being resumed is
refused naming the holder, a killed holder's claim does not block a resume, and a claim lapses
when its holder stops renewing it. Also: a concurrency far above the work starts no more
workers than there are case-trials."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from neens_eval.errors import ConfigError
from sqlalchemy import select

import neens.exp.flags
from neens.exp.claims import claimed
from neens.store.db import Database
from neens.store.experiments import claim_experiment, trials_of
from neens.store.models import Experiment
from tests.exp.conftest import Project, saved_trials
from tests.exp.test_resume import MANY, _interrupt


def _claim_holder(database_url: str, experiment_id: str) -> str | None:
    async def read() -> str | None:
        db = Database(database_url)
        try:
            async with db.read() as s:
                return await s.scalar(
                    select(Experiment.claimed_by).where(Experiment.id == experiment_id)
                )
        finally:
            await db.dispose()

    return asyncio.run(read())


def test_a_second_resume_of_a_run_being_resumed_is_refused(
    project: Project, database_url: str
) -> None:
    project.write_dataset(MANY)
    log = project.path / "calls.jsonl"
    project.write_spec(
        task={"kind": "command", "command": f"{sys.executable} agent.py", "env": {"LOG": str(log)}}
    )
    first = project.exp_json("run", "spec.json")["id"]
    _interrupt(database_url, first, keep=3)
    log.unlink()
    # The first resume hangs in its agent (the environment, not the spec, so both resumes run
    # the same spec) until it is killed.
    hang = ",".join(case["input"] for case in MANY)
    env = {**os.environ, "NEENS_DATABASE_URL": database_url, "HANG": hang}
    process = subprocess.Popen(
        [sys.executable, "-m", "neens_eval", "exp", "run", "spec.json", "--resume", first],
        cwd=project.path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while _claim_holder(database_url, first) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        holder = _claim_holder(database_url, first)
        assert holder is not None and holder.startswith(f"pid {process.pid} on ")

        second = project.exp("run", "spec.json", "--resume", first)
        assert second.code == 2 and second.out == ""
        lines = second.err.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith(
            f"neens: error: cannot resume {first}: it is being run by another neens process "
            f"(pid {process.pid} on "
        )
        assert not log.exists()  # the refused resume called no agent
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the resume and its hanging agents, as kill -9
        process.wait(timeout=30)

    # Its holder is gone: the next resume takes the claim over at once and runs what is left,
    # each case once.
    resumed = project.exp_json("run", "spec.json", "--resume", first)
    assert resumed["ranNow"] == len(MANY) - 3 and resumed["status"] == "finished"
    assert len(log.read_text().splitlines()) == len(MANY) - 3
    assert _claim_holder(database_url, first) is None  # released when the run ended
    assert len(saved_trials(database_url, first)) == len(MANY)


async def test_a_claim_is_exclusive_renewed_and_lapses(project: Project, db: Database) -> None:
    experiment_id = (await asyncio.to_thread(project.exp_json, "run", "spec.json"))["id"]
    async with claimed(db, [experiment_id], resuming=True, holder="pid 1 on a (x)"):
        with pytest.raises(ConfigError, match="it is being run by another neens process"):
            async with claimed(db, [experiment_id], resuming=True, holder="pid 2 on b (y)"):
                pass
        # The same holder may claim it again (a watch's next run, say).
        assert await claim_experiment(db, experiment_id, "pid 1 on a (x)", lease_s=60) is None
    # Released at the end of the block.
    assert await claim_experiment(db, experiment_id, "pid 2 on b (y)", lease_s=0.2) is None
    other = await claim_experiment(db, experiment_id, "pid 3 on c (z)", lease_s=60)
    assert other is not None and other.holder == "pid 2 on b (y)"
    # Held and renewed while its block runs, past the lease it started with.
    await asyncio.sleep(0.3)
    async with claimed(
        db, [experiment_id], resuming=True, holder="pid 3 on c (z)", lease_s=0.3, renew_every_s=0.05
    ):
        await asyncio.sleep(0.6)
        assert await claim_experiment(db, experiment_id, "pid 4 on d (w)", lease_s=1) is not None
    # Released when the block ends; the case-trials are untouched.
    assert await claim_experiment(db, experiment_id, "pid 5 on e (v)", lease_s=1) is None
    assert len(await trials_of(db, experiment_id)) == 4


def test_a_concurrency_far_above_the_work_starts_one_worker_per_case_trial(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: list[int] = []

    class Counting(asyncio.TaskGroup):
        def create_task(self, *args: Any, **kwargs: Any) -> Any:
            created.append(1)
            assert len(created) <= 100, "one task per concurrency slot"
            return super().create_task(*args, **kwargs)

    monkeypatch.setattr(neens.exp.flags, "MAX_CONCURRENCY", 10**9)
    monkeypatch.setattr(asyncio, "TaskGroup", Counting)
    done = project.exp_json("run", "spec.json", "--concurrency", "100000000")
    assert done["done"] == 4 and done["passed"] == 4
    assert len(created) == 4
