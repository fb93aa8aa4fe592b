"""Each finished child run's verdict (completed, gate passed, zero regressions) is stored on the
run with what it rests on, so reading a finished sweep works out no gate; and a stored verdict
is never served once what it rests on changed. Both databases, real agent servers on loopback.
"""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import bindparam, text

from neens.demo.endpoints import Agent, serve
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.api.test_sweep_decisions import chat, sweep_of
from tests.api.test_sweeps import RIGHT, arm, run_counter
from tests.support.preprod import auth

STORED = text("SELECT id, green, green_basis FROM preprod_runs WHERE id IN :ids").bindparams(
    bindparam("ids", expanding=True)
)
USAGE = {"prompt_tokens": 1000, "completion_tokens": 1000}
"""Per answer: at 1 USD per million tokens each way, 0.002 USD."""


async def stored(db: Database, run_ids: list[str]) -> dict[str, tuple[bool | None, str | None]]:
    async with db.read() as s:
        rows = (await s.execute(STORED, {"ids": run_ids})).all()
    return {
        run_id: (None if green is None else bool(green), basis) for run_id, green, basis in rows
    }


async def detail(client: httpx.AsyncClient, key: CreatedKey, sweep_id: str) -> dict[str, Any]:
    r = await client.get(f"/model-sweeps/{sweep_id}", headers=auth(key))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def set_price(client: httpx.AsyncClient, key: CreatedKey, model: str, usd: float) -> None:
    r = await client.put(
        f"/model-pricing/{model}",
        json={"inputPerMTokUsd": usd, "outputPerMTokUsd": usd},
        headers=auth(key),
    )
    assert r.status_code == 200, r.text


async def test_a_finished_sweeps_run_verdicts_are_stored_and_read_back_as_stored(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    flaky = Agent(run_counter(1, {"question 0"}), path="/flaky")
    with serve(Agent(RIGHT, path="/steady"), flaky) as agents:
        sweep = await sweep_of(
            client,
            admin_key,
            [("steady", agents.url("/steady"), {}), ("flaky", agents.url("/flaky"), {})],
            gate={"min_pass_rate": 1.0},
        )
    steady_runs, flaky_runs = arm(sweep, "steady")["runIds"], arm(sweep, "flaky")["runIds"]
    # Worked out once, when each run finished, and stored with what it rests on.
    verdicts = await stored(db, steady_runs + flaky_runs)
    assert [verdicts[r][0] for r in steady_runs] == [True, True, True]
    assert [verdicts[r][0] for r in flaky_runs] == [True, False, True]
    assert all(basis for _, basis in verdicts.values())

    # A read takes the stored verdict as it is: one changed behind Neens' back (same basis) is
    # what the sweep then says, which shows no gate was worked out again.
    first = steady_runs[0]
    async with db.write() as s:
        await s.execute(
            text("UPDATE preprod_runs SET green = :g WHERE id = :id"), {"g": False, "id": first}
        )
    shown = arm(await detail(client, admin_key, sweep["id"]), "steady")
    assert (shown["greenRuns"], shown["passed"]) == (2, False)

    # A basis that no longer matches is never trusted: the verdict is worked out again from the
    # run's items and stored back.
    async with db.write() as s:
        await s.execute(
            text("UPDATE preprod_runs SET green_basis = 'another basis' WHERE id = :id"),
            {"id": first},
        )
    shown = arm(await detail(client, admin_key, sweep["id"]), "steady")
    assert (shown["greenRuns"], shown["passed"]) == (3, True)
    assert await stored(db, [first]) == {first: (True, verdicts[first][1])}
    c = await client.get(f"/model-sweeps/{sweep['id']}/comparison", headers=auth(admin_key))
    assert {a["label"]: a["passed"] for a in c.json()["arms"]} == {"steady": True, "flaky": False}


async def test_a_price_set_after_the_sweep_is_followed_by_its_cost_gated_run_verdicts(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    """A cost gate's verdict rests on the sessions' costs, which a price set later changes:
    the stored verdicts of the re-priced runs, and of every run measured against a re-priced
    baseline arm, are worked out again."""
    base_model, cheap_model = "acme-base-model", "acme-cheap-model"
    await set_price(client, admin_key, base_model, 4.0)
    await set_price(client, admin_key, cheap_model, 1.0)
    gate = {"min_pass_rate": 0.5, "cost": {"max_avg_usd": 0.01, "max_delta_pct": -50}}
    with serve(
        Agent(RIGHT, wire="chat", path="/base", model=base_model, usage=USAGE),
        Agent(RIGHT, wire="chat", path="/cheap", model=cheap_model, usage=USAGE),
    ) as agents:
        sweep = await sweep_of(
            client,
            admin_key,
            [
                ("base", agents.url("/base"), chat(model=base_model)),
                ("cheap", agents.url("/cheap"), chat(model=cheap_model)),
            ],
            gate=gate,
            passK=2,
        )
    base_runs, cheap_runs = arm(sweep, "base")["runIds"], arm(sweep, "cheap")["runIds"]
    assert (arm(sweep, "base")["passed"], arm(sweep, "cheap")["passed"]) == (True, True)
    before = await stored(db, base_runs + cheap_runs)
    assert all(green is True for green, _ in before.values())

    # The cheap model costs as much as the base now: its runs are no longer 50% cheaper.
    await set_price(client, admin_key, cheap_model, 4.0)
    done = await detail(client, admin_key, sweep["id"])
    assert (arm(done, "base")["passed"], arm(done, "cheap")["passed"]) == (True, False)
    for run_id in cheap_runs:
        r = await client.get(f"/preprod-evals/{run_id}/gate", headers=auth(admin_key))
        assert r.json()["passed"] is False, "the sweep agrees with the run's own gate"
    after = await stored(db, base_runs + cheap_runs)
    assert all(after[r][0] is False and after[r][1] != before[r][1] for r in cheap_runs)

    # Back to cheap, then the baseline arm re-priced to cost a tenth: the cheap arm's runs are
    # measured against it, so they are worked out again, and fail again.
    await set_price(client, admin_key, cheap_model, 1.0)
    assert arm(await detail(client, admin_key, sweep["id"]), "cheap")["passed"] is True
    await set_price(client, admin_key, base_model, 0.4)
    done = await detail(client, admin_key, sweep["id"])
    assert (arm(done, "base")["passed"], arm(done, "cheap")["passed"]) == (True, False)

    # Over the budget of 0.01 USD a case: every run fails, the baseline arm's too.
    await set_price(client, admin_key, base_model, 40.0)
    await set_price(client, admin_key, cheap_model, 40.0)
    done = await detail(client, admin_key, sweep["id"])
    assert (arm(done, "base")["greenRuns"], arm(done, "cheap")["greenRuns"]) == (0, 0)
