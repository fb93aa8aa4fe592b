"""A finished run's answers are packed for sweep decisions (`run_evidence`) the first time a
comparison reads them, later comparisons unpack them, and packed answers are never served once
what they rest on changed: a price set later, a verdict changed, an answer's session gone. A run
that has not finished is never packed. Both databases, real agent servers on loopback.
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import bindparam, text

from neens.demo.endpoints import Agent, serve
from neens.store.db import Database
from neens.store.decisions import frozen_item_ids
from neens.store.keys import CreatedKey
from neens.store.run_evidence import pack, runs_answers, store_packed, unpack
from tests.api.test_sweep_decisions import chat, sweep_of
from tests.api.test_sweep_stored_verdicts import set_price
from tests.api.test_sweeps import RIGHT, arm, run_counter
from tests.support.preprod import auth

PACKED = text(
    "SELECT run_id, basis, names, answers FROM run_evidence WHERE run_id IN :ids"
).bindparams(bindparam("ids", expanding=True))
USAGE = {"prompt_tokens": 1000, "completion_tokens": 1000}
"""Per answer: at p USD per million tokens each way, 0.002 x p USD."""
MODEL = "acme-packed-model"


async def packed(db: Database, run_ids: list[str]) -> dict[str, tuple[str, Any, bytes]]:
    async with db.read() as s:
        rows = (await s.execute(PACKED, {"ids": run_ids})).all()
    return {run_id: (basis, names, bytes(answers)) for run_id, basis, names, answers in rows}


async def comparison(client: httpx.AsyncClient, key: CreatedKey, sweep_id: str) -> dict[str, Any]:
    r = await client.get(f"/model-sweeps/{sweep_id}/comparison", headers=auth(key))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def by_label(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["label"]: a for a in body["arms"]}


async def test_packed_answers_are_used_while_their_basis_holds_and_read_again_when_it_does_not(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    await set_price(client, admin_key, MODEL, 1.0)
    with serve(
        Agent(
            RIGHT,
            wire="chat",
            path="/steady",
            model=MODEL,
            usage=USAGE,
            agent_name=lambda _prompt: "refund",
        ),  # fmt: skip
        Agent(run_counter(1, {"question 0"}), wire="chat", path="/flaky", model=MODEL, usage=USAGE),
    ) as agents:
        sweep = await sweep_of(
            client,
            admin_key,
            [
                ("steady", agents.url("/steady"), chat(model=MODEL)),
                ("flaky", agents.url("/flaky"), chat(model=MODEL)),
            ],
            gate={"min_pass_rate": 0.5},
        )
    runs = arm(sweep, "steady")["runIds"] + arm(sweep, "flaky")["runIds"]
    first = await comparison(client, admin_key, sweep["id"])
    steady = by_label(first)["steady"]
    assert steady["costPerCaseUsd"] == pytest.approx(0.002)
    assert [a["agentName"] for a in first["agents"]] == ["refund"]

    # Packed, every run, by the first comparison; the next one answers the same from them.
    rows = await packed(db, runs)
    assert set(rows) == set(runs)
    assert await comparison(client, admin_key, sweep["id"]) == first

    # A read unpacks a row as it is: answers changed behind Neens' back (same basis) are what
    # the comparison then says, which shows nothing was read again. Here every answer of the
    # steady arm's first run loses its agent name and its price.
    target = arm(sweep, "steady")["runIds"][0]
    basis, names, body = rows[target]
    answers = unpack(body, names)
    doctored = type(answers)(
        answers.item,
        answers.verdict,
        np.full(len(answers), np.nan),
        np.full(len(answers), -1, dtype=np.int32),
        (),
    )
    async with db.write() as s:
        await s.execute(
            text("UPDATE run_evidence SET answers = :a, names = :n WHERE run_id = :r"),
            {"a": pack(doctored), "n": "[]", "r": target},
        )
    shown = by_label(await comparison(client, admin_key, sweep["id"]))["steady"]
    assert (shown["pricedCases"], shown["cases"]) == (steady["cases"] * 2 // 3, steady["cases"])

    # A basis that no longer matches is never trusted: the run is read again and packed back.
    async with db.write() as s:
        await s.execute(
            text("UPDATE run_evidence SET basis = 'another basis' WHERE run_id = :r"),
            {"r": target},
        )
    assert await comparison(client, admin_key, sweep["id"]) == first
    assert (await packed(db, [target]))[target] == (basis, names, body)

    # A price set later re-prices the sessions: the packed answers no longer rest on what is
    # stored, and the comparison shows the new cost.
    await set_price(client, admin_key, MODEL, 3.0)
    repriced = await comparison(client, admin_key, sweep["id"])
    assert by_label(repriced)["steady"]["costPerCaseUsd"] == pytest.approx(0.006)
    assert by_label(repriced)["flaky"]["costPerCaseUsd"] == pytest.approx(0.006)
    assert all(row[0] != rows[run_id][0] for run_id, row in (await packed(db, runs)).items()), (
        "every run packed again, on its new basis"
    )

    # A verdict changed, and an answer whose session is gone, show too.
    flaky_run = arm(sweep, "flaky")["runIds"][0]
    async with db.write() as s:
        await s.execute(
            text("UPDATE preprod_items SET passed = :p WHERE run_id = :r AND position = 1"),
            {"p": False, "r": target},
        )
        await s.execute(
            text("UPDATE preprod_items SET session_pk = NULL WHERE run_id = :r AND position = 2"),
            {"r": flaky_run},
        )
    changed = by_label(await comparison(client, admin_key, sweep["id"]))
    assert changed["steady"]["flakyItems"] == by_label(repriced)["steady"]["flakyItems"] + 1
    assert changed["flaky"]["cases"] == by_label(repriced)["flaky"]["cases"] - 1


async def test_a_run_that_has_not_finished_is_read_every_time_and_never_packed(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    with serve(Agent(RIGHT, path="/one"), Agent(RIGHT, path="/two")) as agents:
        sweep = await sweep_of(
            client,
            admin_key,
            [("one", agents.url("/one"), {}), ("two", agents.url("/two"), {})],
            gate={},
        )
    runs = arm(sweep, "one")["runIds"] + arm(sweep, "two")["runIds"]
    async with db.write() as s:
        await s.execute(
            text("UPDATE preprod_runs SET status = 'running' WHERE id = :r"), {"r": runs[0]}
        )
    version_id = sweep["datasetVersionId"]
    for _ in range(2):
        async with db.read() as s:
            item_ids = await frozen_item_ids(s, version_id)
            answers, to_pack = await runs_answers(s, runs, item_ids, version_id)
        assert set(answers) == set(runs)
        assert all(len(answers[r]) == len(item_ids) for r in runs)
        # The running run is read, never packed; the finished ones are unpacked or packed.
        assert runs[0] not in {p.run_id for p in to_pack}
        await store_packed(db, to_pack)
    # No row ever rests on a run that has not finished: whatever is stored for it (packed
    # while it was finished) does not match its basis now, so it is read again every time.
    stored = await packed(db, [runs[0]])
    assert all('"running"' not in basis for basis, _, _ in stored.values())
