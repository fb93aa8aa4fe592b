"""The evidence a sweep decision reads: each run's answers as arrays (`store.run_evidence`),
read afresh or unpacked from a finished run's packed row, added up per item
(`ItemArrays.add_up`), on both databases, checked against the same numbers added up here, one
answer at a time, from the raw rows; and the whole comparison computed from those arrays against
the one computed from one row per answer.

The sweep is real (agent servers on loopback, judged by the server), with the awkward evidence
a real sweep has: flaky items, unpriced answers, answers that name no agent or different agents,
an answer captured but not scored, and a repeat that is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import bindparam, text

from neens.demo.endpoints import PRICED_MODEL, Agent, serve
from neens.domain.decision import (
    ArmEvidence,
    ItemArrays,
    RepeatColumns,
    compare_sweep,
)
from neens.store.db import Database
from neens.store.decisions import frozen_item_ids
from neens.store.keys import CreatedKey
from neens.store.run_evidence import runs_answers, store_packed
from neens.views.decisions import bar_of, sweep_decision
from neens.views.sweeps import sweep_standing
from tests.api.test_sweep_decisions import USAGE, chat, sweep_of
from tests.api.test_sweeps import RIGHT, run_counter

RAW_ANSWERS = text(
    "SELECT p.item_id, p.run_id, p.status, p.passed, s.cost_usd, s.agent_name "
    "FROM preprod_items p JOIN sessions s ON s.pk = p.session_pk "
    "WHERE p.run_id IN :runs"
).bindparams(bindparam("runs", expanding=True))
"""One row per captured answer of the given runs, as stored."""

Tally = tuple[int, int, int, int, int, str | None, str | None, list[float]]


def added_up(rows: Sequence[Sequence[Any]]) -> dict[str, Tally]:
    """Per item: answers, scored, passed, scored without a verdict, distinct scored runs, the
    lowest and highest agent name reported (None and "" do not count), and the priced costs."""
    found: dict[str, dict[str, Any]] = {}
    for item_id, run_id, status, passed, cost, agent in rows:
        t = found.setdefault(
            item_id,
            {"cases": 0, "scored": 0, "passed": 0, "unjudged": 0, "runs": set(), "names": set(),
             "costs": []},
        )  # fmt: skip
        t["cases"] += 1
        if status == "scored":
            t["scored"] += 1
            t["runs"].add(run_id)
            if passed is None:
                t["unjudged"] += 1
            elif passed:
                t["passed"] += 1
        if agent:
            t["names"].add(agent)
        if cost is not None:
            t["costs"].append(cost)
    return {
        item_id: (
            t["cases"],
            t["scored"],
            t["passed"],
            t["unjudged"],
            len(t["runs"]),
            min(t["names"], default=None),
            max(t["names"], default=None),
            sorted(t["costs"]),
        )
        for item_id, t in found.items()
    }


def as_read(arrays: ItemArrays, item_ids: Sequence[str]) -> dict[str, Tally]:
    def name(code: int) -> str | None:
        return None if code < 0 else arrays.names[code]

    costs = arrays.cost.tolist()
    return {
        item_id: (
            int(arrays.cases[i]),
            int(arrays.scored[i]),
            int(arrays.passed[i]),
            int(arrays.unjudged[i]),
            int(arrays.scored_runs[i]),
            name(int(arrays.lowest_agent[i])),
            name(int(arrays.highest_agent[i])),
            sorted(c for c, at in zip(costs, arrays.cost_item.tolist(), strict=True) if at == i),
        )
        for i, item_id in enumerate(item_ids)
        if arrays.cases[i] > 0
    }


async def read_arm(
    db: Database, run_ids: Sequence[str], item_ids: Sequence[str], version_id: str
) -> tuple[dict[str, Tally], int]:
    """The arm's answers as a comparison reads them, added up; and how many of its runs were
    read afresh (the others were unpacked) and packed again."""
    async with db.read() as s:
        by_run, packed = await runs_answers(s, run_ids, item_ids, version_id)
    await store_packed(db, packed)
    arrays = ItemArrays.add_up([by_run[run_id] for run_id in run_ids], len(item_ids))
    return as_read(arrays, item_ids), len(packed)


def named_by_call() -> Any:
    """The agent name of each reply: "refund" for questions 0 and 1, except the second answer
    to question 0, which says "billing" (so question 0's answers conflict); "escalation" for
    question 2; none for question 3."""
    asked: dict[str, int] = {}

    def name(prompt: str) -> str | None:
        asked[prompt] = asked.get(prompt, 0) + 1
        if prompt == "question 3":
            return None
        if prompt == "question 0" and asked[prompt] == 2:
            return "billing"
        return "refund" if prompt in ("question 0", "question 1") else "escalation"

    return name


async def test_the_tallies_read_in_sql_are_the_answers_added_up_one_by_one(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    priced_some = {"question 0", "question 2"}
    mixed = Agent(
        run_counter(1, {"question 1"}),
        wire="chat",
        path="/mixed",
        model=PRICED_MODEL,
        usage=USAGE,
        agent_name=named_by_call(),
    )
    original = mixed.respond
    asked: set[str] = set()

    def respond(call: Any) -> Any:  # usage (so a cost) for some prompts, and one other answer
        prompt = call.body["messages"][-1]["content"]
        mixed.usage = USAGE if prompt in priced_some or prompt not in asked else None
        asked.add(prompt)
        return original(call)

    mixed.respond = respond  # type: ignore[method-assign]
    steady = Agent(
        run_counter(2, {"question 2"}), wire="chat", path="/steady", model=PRICED_MODEL,
        usage=USAGE, agent_name=lambda p: None if p == "question 3" else "refund",
    )  # fmt: skip
    with serve(mixed, steady, Agent(RIGHT, path="/unpriced")) as agents:
        sweep = await sweep_of(
            client,
            admin_key,
            [
                ("steady", agents.url("/steady"), chat(model=PRICED_MODEL)),
                ("mixed", agents.url("/mixed"), chat(model=PRICED_MODEL)),
                ("unpriced", agents.url("/unpriced"), {}),
            ],
            gate={"min_pass_rate": 0.5},
        )
    assert sweep["status"] == "completed"
    runs = {arm["label"]: arm["runIds"] for arm in sweep["arms"]}
    # What a real sweep's evidence can also hold: a repeat lost (its session unlinked), an answer
    # captured and not scored, and a name that is empty rather than absent.
    async with db.write() as s:
        await s.execute(
            text("UPDATE preprod_items SET session_pk = NULL WHERE run_id = :r AND position = 1"),
            {"r": runs["mixed"][2]},
        )
        await s.execute(
            text(
                "UPDATE preprod_items SET status = 'error', passed = NULL, "
                "error = 'judge unreachable' WHERE run_id = :r AND position = 2"
            ),
            {"r": runs["unpriced"][0]},
        )
        await s.execute(  # stamped, as every re-derivation of a session is
            text(
                "UPDATE sessions SET agent_name = '', updated_at = :now WHERE pk = (SELECT "
                "session_pk FROM preprod_items WHERE run_id = :r AND position = 0)"
            ),
            {"r": runs["steady"][1], "now": datetime(2100, 1, 1, tzinfo=UTC)},
        )

    project_id = admin_key.project_id
    view = await sweep_standing(db, project_id, sweep["id"])
    raw: dict[str, list[Any]] = {}
    version_id = view.sweep.dataset_version_id
    async with db.read() as s:
        item_ids = await frozen_item_ids(s, version_id)
        for arm in view.rollup.arms:
            raw[arm.id] = list((await s.execute(RAW_ANSWERS, {"runs": arm.run_ids})).all())
    for arm in view.rollup.arms:
        # Packed when each run finished; the runs changed since are read afresh and packed
        # again; then every run is unpacked: the same numbers each time.
        fresh, _ = await read_arm(db, arm.run_ids, item_ids, version_id)
        assert fresh == added_up(raw[arm.id]), arm.label
        assert await read_arm(db, arm.run_ids, item_ids, version_id) == (fresh, 0), arm.label

    # The evidence does hold every awkward case the test is about.
    tallies = {arm.label: added_up(raw[arm.id]) for arm in view.rollup.arms}
    assert tallies["mixed"][_item(item_ids, 1)][0] == 2, "a missing repeat"
    assert any(0 < t[2] < t[1] for t in tallies["mixed"].values()), "a flaky item"
    assert any(0 < t[2] < t[1] for t in tallies["steady"].values()), "a flaky item"
    assert tallies["unpriced"][_item(item_ids, 2)][:2] == (3, 2), "captured, not scored"
    assert all(t[7] == [] for t in tallies["unpriced"].values()), "unpriced answers"
    assert 0 < len(tallies["mixed"][_item(item_ids, 1)][7]) < 2, "an item partly priced"
    assert tallies["mixed"][_item(item_ids, 3)][5:7] == (None, None), "no name reported"
    assert tallies["mixed"][_item(item_ids, 0)][5:7] == ("billing", "refund"), "names conflict"
    assert tallies["steady"][_item(item_ids, 0)][5:7] == ("refund", "refund"), "'' is no name"

    # A scored answer without a verdict is counted as such (and the comparison refuses it, as
    # it refuses one given answer by answer); then its verdict is put back.
    steady = next(arm for arm in view.rollup.arms if arm.label == "steady")
    where = "WHERE run_id = :r AND position = 3"
    one = {"r": steady.run_ids[0]}
    async with db.write() as s:
        verdict = (await s.execute(text(f"SELECT passed FROM preprod_items {where}"), one)).scalar()
        await s.execute(text(f"UPDATE preprod_items SET passed = NULL {where}"), one)
    async with db.read() as s:
        broken = list((await s.execute(RAW_ANSWERS, {"runs": steady.run_ids})).all())
    assert added_up(broken)[_item(item_ids, 3)][3] == 1
    # The changed verdict shows in the packed row's basis: that run is read afresh.
    assert await read_arm(db, steady.run_ids, item_ids, version_id) == (added_up(broken), 1)
    with pytest.raises(ValueError, match="no verdict"):
        await sweep_decision(db, project_id, sweep["id"])
    async with db.write() as s:
        await s.execute(
            text(f"UPDATE preprod_items SET passed = :p {where}"), {**one, "p": verdict}
        )

    # The comparison from the tallies is the one computed from one row per answer.
    decision = await sweep_decision(db, project_id, sweep["id"])
    per_answer = compare_sweep(
        [
            ArmEvidence(
                id=arm.id,
                label=arm.label,
                position=position,
                status=arm.status,
                passed=arm.passed,
                runs=arm.runs,
                repeats=RepeatColumns.from_rows(
                    [(i, r, st == "scored", p, c, a) for i, r, st, p, c, a in raw[arm.id]]
                ),
            )
            for position, arm in enumerate(view.rollup.arms)
        ],
        item_ids,
        comparable=True,
        void_reason=None,
        bar=bar_of(view.sweep, None),
        baseline_arm_id=None,
    )
    assert decision.comparison == per_answer
    # Question 1 is refund's; 0 (two names in one arm) and 2 (a name per arm) conflict, and 3
    # names none: Unattributed, never folded into a named agent.
    refund, unattributed = per_answer.agents
    assert (refund.label, refund.items) == ("refund", 1)
    assert (unattributed.conflicting_items, unattributed.unnamed_items) == (2, 1)


def _item(item_ids: Sequence[str], position: int) -> str:
    return item_ids[position]
