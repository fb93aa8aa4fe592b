"""A model sweep rides out a worker killed mid-sweep (kill -9): another worker takes over and the
sweep finishes with every (arm, run, item) scored exactly once, nothing lost and nothing
doubled. Real `neens worker` processes and real agent servers on loopback."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select

from neens.demo.endpoints import serve, steady
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import PreprodItem, Score
from tests.api.test_sweeps import TERMINAL, arm
from tests.queue.test_worker_processes import api, start, stop
from tests.support.preprod import auth, connection, golden_dataset

pytestmark = pytest.mark.alone  # kills workers and times their leases: run alone (Makefile)

PROMPTS = [f"p{n}" for n in range(12)]
ANSWERS = {p: f"answer to {p}" for p in PROMPTS}


async def test_a_worker_killed_mid_sweep_loses_nothing_and_doubles_nothing(
    settings: Settings, db: Database, admin_key: CreatedKey, database_url: str, tmp_path: Path
) -> None:
    agents = [steady(ANSWERS, path=f"/{name}", latency_s=0.05) for name in ("a", "b")]
    items = [{"input": p, "expected_output": ANSWERS[p]} for p in PROMPTS]
    with serve(*agents) as server:
        async with api(settings, db) as client:
            dataset_id, _ = await golden_dataset(client, admin_key, items)
            conns = [
                await connection(client, admin_key, server.url(f"/{name}"), name=name)
                for name in ("a", "b")
            ]
            body = {
                "versionLabel": "v1",
                "datasetId": dataset_id,
                "passK": 2,
                "arms": [
                    {"label": "a", "agentConnectionId": conns[0]},
                    {"label": "b", "agentConnectionId": conns[1]},
                ],
            }
            r = await client.post("/model-sweeps", json=body, headers=auth(admin_key))
            assert r.status_code == 201, r.text
            sweep_id = r.json()["id"]
            first = start("worker", database_url, tmp_path / "first.log")
            second = None
            try:
                deadline = time.monotonic() + 30
                while len(server.calls) < 4 and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                assert server.calls, (tmp_path / "first.log").read_text(errors="replace")
                os.kill(first.pid, signal.SIGKILL)
                await asyncio.to_thread(first.wait, 10)
                second = start("worker", database_url, tmp_path / "second.log")
                deadline = time.monotonic() + 60
                while True:
                    r = await client.get(f"/model-sweeps/{sweep_id}", headers=auth(admin_key))
                    sweep = r.json()
                    if sweep["status"] in TERMINAL or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.1)
            finally:
                stop(*[p for p in (first, second) if p is not None])
    logs = "\n".join(
        (tmp_path / f"{n}.log").read_text(errors="replace") for n in ("first", "second")
    )
    assert sweep["status"] == "completed", f"{sweep}\n{logs}"
    run_ids = [run_id for label in ("a", "b") for run_id in arm(sweep, label)["runIds"]]
    assert len(run_ids) == 4
    async with db.read() as s:
        rows = await s.execute(
            select(Score.run_id, Score.item_id, Score.judge_id).where(Score.run_id.in_(run_ids))
        )
        scored = Counter(tuple(row) for row in rows.all())
        judges = {judge_id for _, _, judge_id in scored}
        statuses = Counter(
            await s.scalars(select(PreprodItem.status).where(PreprodItem.run_id.in_(run_ids)))
        )
    # One verdict per (run, item, judge): the Primary Score stores its own and its parts'.
    lost = len(run_ids) * len(PROMPTS) * len(judges) - len(scored)
    doubled = sum(count - 1 for count in scored.values())
    assert (lost, doubled) == (0, 0), f"lost {lost}, doubled {doubled}"
    assert statuses == {"scored": len(run_ids) * len(PROMPTS)}
    for label in ("a", "b"):
        assert arm(sweep, label)["passed"] is True
