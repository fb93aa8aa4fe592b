"""The views answer without HTTP exactly what their routes answer, over a real database.

Each view's typed result is turned into JSON here by its field names alone (camelCase), not by
the routes' renderers, so a view and its route can only agree by carrying the same data.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter
from pydantic.alias_generators import to_camel

from neens.errors import NotFound, Unprocessable
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.views.compare import compare_versions, run_trajectory
from neens.views.runs import run_comparison, run_detail, run_gate, run_items, run_metrics
from tests.api.test_preprod_compare import ITEMS, session
from tests.support.preprod import auth, create_run, golden_dataset, items_of, wait_for_run

GOOD = [item["expected_output"] for item in ITEMS]
RENAMED = {"judgeIds": "judgeDeploymentIds", "waiting": "waitingFor"}
"""Run-detail fields the wire names differently from the store."""


def wire(value: Any, *, camel: bool = True) -> Any:
    """`value` as the API spells it: dataclass fields in camelCase (the frozen items keep their
    snake_case names on the wire), tuples as lists, times in ISO form; plain dicts (stored
    policies, counts) as they are."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            name = to_camel(f.name) if camel else f.name
            out[RENAMED.get(name, name)] = wire(getattr(value, f.name), camel=camel)
        return out
    if isinstance(value, list | tuple):
        return [wire(v, camel=camel) for v in value]
    if isinstance(value, datetime):
        return TypeAdapter(datetime).dump_python(value, mode="json")
    return value


async def runner_run(
    client: httpx.AsyncClient,
    key: CreatedKey,
    dataset_id: str,
    label: str,
    answers: list[str],
    steps: list[tuple[str, str]],
    **body: Any,
) -> str:
    """A runner-mode run whose sessions answer `answers` taking `steps`, waited for."""
    run = await create_run(client, key, dataset_id=dataset_id, version_label=label, **body)
    for item, answer in zip(await items_of(client, key, run["id"]), answers, strict=True):
        trace = session(f"{label}-{item['item_id']}", run["id"], item["item_id"], answer, steps)
        assert (await client.post("/sessions", json=trace, headers=auth(key))).status_code == 200
    await wait_for_run(client, key, run["id"])
    return str(run["id"])


async def baseline_and_candidate(
    client: httpx.AsyncClient, key: CreatedKey
) -> tuple[str, str, str]:
    """(baseline run, candidate run, first item): the candidate regressed on the first item
    and stopped calling lookup_order."""
    dataset_id, _ = await golden_dataset(client, key, ITEMS)
    v1 = await runner_run(client, key, dataset_id, "v1", GOOD, [("tool", "lookup_order")])
    v2 = await runner_run(
        client,
        key,
        dataset_id,
        "v2",
        ["wrong", GOOD[1]],
        [("llm", "answer")],
        baseline={"kind": "preprod_run", "value": v1},
        gate={"max_regressions": 0},
    )
    first = (await items_of(client, key, v2))[0]["item_id"]
    return v1, v2, first


async def _get(client: httpx.AsyncClient, key: CreatedKey, path: str, **params: str) -> Any:
    r = await client.get(path, params=params, headers=auth(key))
    assert r.status_code == 200, r.text
    return r.json()


async def test_each_view_gives_the_answer_its_route_gives(
    client: httpx.AsyncClient, db: Database, ingest_key: CreatedKey
) -> None:
    v1, v2, first = await baseline_and_candidate(client, ingest_key)
    project = ingest_key.project_id

    gate = await run_gate(db, project, v2)
    assert (gate.passed, gate.regressions) == (False, 1)
    assert gate.to_dict() == await _get(client, ingest_key, f"/preprod-evals/{v2}/gate")

    comparison = await run_comparison(db, project, v2)
    assert list(comparison.regressions) == [first]
    assert wire(comparison) == await _get(client, ingest_key, f"/preprod-evals/{v2}/comparison")

    metrics = await run_metrics(db, project, v2)
    assert metrics and all(row.sessions_scored == 2 for row in metrics)
    route = await _get(client, ingest_key, f"/preprod-evals/{v2}/metrics")
    assert {"metrics": wire(metrics)} == route

    detail = await run_detail(db, project, v2)
    assert (detail.id, detail.status) == (v2, "completed_with_regressions")
    assert wire(detail) == await _get(client, ingest_key, f"/preprod-evals/{v2}")

    items = await run_items(db, project, v2)
    assert [i.passed for i in items] == [False, True]
    route = await _get(client, ingest_key, f"/preprod-evals/{v2}/items")
    assert {"items": wire(items, camel=False), "next_cursor": None} == route

    versions = await compare_versions(db, project, [v1, v2])
    assert versions.baseline_run_id == v1
    route = await _get(client, ingest_key, "/preprod-compare", runs=f"{v1},{v2}")
    assert wire(versions) == route

    trajectory = await run_trajectory(db, project, v2, v1, first)
    assert [
        (d.status, d.baseline and d.baseline.name, d.candidate and d.candidate.name)
        for d in trajectory.steps
    ] == [("changed", "lookup_order", "answer")]
    route = await _get(
        client, ingest_key, "/preprod-compare/trajectory", run=v2, baseline=v1, item=first
    )
    assert wire(trajectory) == route


async def _refusal(call: Any, ident: str) -> tuple[str, str | None]:
    """The NotFound `call` raises, its message with `ident` blanked out."""
    with pytest.raises(NotFound) as caught:
        await call
    return caught.value.message.replace(ident, "<id>"), caught.value.field


async def test_a_view_answers_another_projects_run_exactly_like_a_missing_one(
    client: httpx.AsyncClient,
    db: Database,
    ingest_key: CreatedKey,
    other_project_key: CreatedKey,
) -> None:
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = (await create_run(client, ingest_key, dataset_id=dataset_id))["id"]
    item = (await items_of(client, ingest_key, run))[0]["item_id"]
    missing = "ppr_" + "0" * (len(run) - len("ppr_"))
    other = other_project_key.project_id
    views = [run_gate, run_comparison, run_metrics, run_detail, run_items]
    for view in views:
        foreign = await _refusal(view(db, other, run), run)
        assert foreign == await _refusal(view(db, other, missing), missing), view.__name__
        assert foreign == ("no pre-prod run '<id>' in this project", "run_id")
        await view(db, ingest_key.project_id, run)
    foreign = await _refusal(compare_versions(db, other, [run]), run)
    assert foreign == await _refusal(compare_versions(db, other, [missing]), missing)
    foreign = await _refusal(run_trajectory(db, other, run, run, item), run)
    assert foreign == await _refusal(run_trajectory(db, other, missing, missing, item), missing)


async def test_compare_versions_needs_at_least_one_run(db: Database) -> None:
    with pytest.raises(Unprocessable) as caught:
        await compare_versions(db, "prj_any", [])
    assert caught.value.field == "runs"
