"""Finishing a run counts its regressions with `domain.preprod.is_regression`, the rule the gate
and the comparison read, so the run's status and its insight never disagree with them."""

from __future__ import annotations

from itertools import product
from typing import Any

import httpx
from sqlalchemy import select, update

from neens.domain.preprod import is_regression
from neens.engine.scoring import finish_run
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import Insight, PreprodItem, PreprodRun
from neens.store.review import RunOutcomes, run_outcomes
from tests.support.preprod import auth, create_run, golden_dataset

BASELINE: dict[str, dict[str, Any]] = {
    "passed": {"status": "scored", "score": 1.0, "passed": True},
    "failed": {"status": "scored", "score": 0.0, "passed": False},
    "errored": {"status": "error", "error": "the agent crashed"},
    "no verdict": {"status": "pending"},
}
CANDIDATE: dict[str, dict[str, Any]] = {
    "passes": {"status": "scored", "score": 1.0, "passed": True},
    "fails": {"status": "scored", "score": 0.0, "passed": False},
    "errors": {"status": "error", "error": "the agent crashed"},
}
CASES = list(product(BASELINE, CANDIDATE))
REGRESSIONS = [("passed", "fails"), ("passed", "errors")]
"""What the rule says, spelled out so the test cannot pass with a rule that finds nothing."""


async def _set_items(db: Database, run_id: str, fields: list[dict[str, Any]]) -> None:
    async with db.write() as s:
        for position, values in enumerate(fields):
            await s.execute(
                update(PreprodItem)
                .where(PreprodItem.run_id == run_id, PreprodItem.position == position)
                .values(**values)
            )


async def _finished(
    client: httpx.AsyncClient, key: CreatedKey, db: Database, cases: list[tuple[str, str]]
) -> RunOutcomes:
    """A run over one item per (baseline verdict, candidate outcome) case, measured against a
    run holding the baseline verdicts, finished by the engine and read back."""
    items = [{"input": f"{b} / {c}", "expected_output": "ok"} for b, c in cases]
    dataset_id, _ = await golden_dataset(client, key, items)
    baseline = await create_run(client, key, dataset_id=dataset_id)
    candidate = await create_run(
        client,
        key,
        dataset_id=dataset_id,
        baseline={"kind": "preprod_run", "value": baseline["id"]},
    )
    await _set_items(db, baseline["id"], [BASELINE[b] for b, _ in cases])
    await _set_items(db, candidate["id"], [CANDIDATE[c] for _, c in cases])
    async with db.write() as s:
        await s.execute(
            update(PreprodRun).where(PreprodRun.id == candidate["id"]).values(status="running")
        )
    await finish_run(db, candidate["id"])
    return await run_outcomes(db, key.project_id, candidate["id"])


async def _insight(db: Database, run_id: str) -> Insight | None:
    async with db.read() as s:
        return await s.scalar(select(Insight).where(Insight.run_id == run_id))


async def test_the_engine_counts_exactly_the_items_is_regression_calls_regressions(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    outcomes = await _finished(client, admin_key, db, CASES)

    regressed = [item.input for item in outcomes.items if is_regression(item)]
    assert regressed == [f"{b} / {c}" for b, c in REGRESSIONS]
    assert outcomes.status == "completed_with_regressions"
    insight = await _insight(db, outcomes.run_id)
    assert insight is not None
    assert insight.details["regressions"] == len(regressed)
    h = auth(admin_key)
    gate = (await client.get(f"/preprod-evals/{outcomes.run_id}/gate", headers=h)).json()
    assert gate["regressions"] == len(regressed)
    comparison = await client.get(f"/preprod-evals/{outcomes.run_id}/comparison", headers=h)
    by_id = {item.item_id: item.input for item in outcomes.items}
    assert [by_id[i] for i in comparison.json()["regressions"]] == regressed


async def test_a_run_whose_failures_the_baseline_also_failed_finishes_without_regressions(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    cases = [case for case in CASES if case not in REGRESSIONS]

    outcomes = await _finished(client, admin_key, db, cases)

    assert not any(is_regression(item) for item in outcomes.items)
    assert outcomes.status == "completed"
    assert await _insight(db, outcomes.run_id) is None
