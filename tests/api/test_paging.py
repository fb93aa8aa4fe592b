"""Every list route pages by cursor: each row exactly once, in order, with the route's filters,
while rows are added (and sessions updated) between page fetches; a bad cursor is a 422."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import select

from neens.api import paging
from neens.domain.judges.verdict import Verdict
from neens.store.db import Database
from neens.store.insights import add_insight
from neens.store.keys import CreatedKey
from neens.store.models import TraceSession
from neens.store.scores import insert_scores, score_values
from tests.conftest import auth
from tests.support.preprod import create_run, golden_dataset

Between = Callable[[int], Awaitable[None]]


async def walk(
    client: httpx.AsyncClient,
    path: str,
    key: CreatedKey,
    listed: str,
    ident: str,
    *,
    cursor_field: str = "nextCursor",
    between: Between | None = None,
    **params: Any,
) -> list[Any]:
    """Every row of the list at `path`, page after page (`between(page number)` runs after each
    page is read); the ids in the order they were listed."""
    seen: list[Any] = []
    cursor: str | None = None
    for page in range(1000):
        query = dict(params) | ({"cursor": cursor} if cursor else {})
        r = await client.get(path, params=query, headers=auth(key))
        assert r.status_code == 200, r.text
        body = r.json()
        seen += [row[ident] for row in body[listed]]
        cursor = body[cursor_field]
        if cursor is None:
            return seen
        if between is not None:
            await between(page)
    raise AssertionError("the list did not end")


def once_each(rows: list[Any]) -> None:
    assert len(rows) == len(set(rows)), f"repeated: {rows}"


# ---------------------------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------------------------


async def _session(
    client: httpx.AsyncClient, key: CreatedKey, ident: str, agent: str, minute: int, **attrs: Any
) -> None:
    span = {
        "id": f"{ident}-root",
        "name": "agent.run",
        "kind": "agent",
        "input": "q",
        "output": "a",
        "start_time": f"2026-11-30T08:{minute:02d}:00Z",
        "end_time": f"2026-11-30T08:{minute:02d}:01Z",
        "attributes": attrs,
    }
    body = {"session": {"id": ident, "agent_name": agent}, "spans": [span]}
    r = await client.post("/sessions", json=body, headers=auth(key))
    assert r.status_code == 200, r.text
    assert r.json()["acceptedSpans"] == 1, r.text


async def test_sessions_page_newest_first_with_every_filter_while_sessions_arrive(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    made: list[tuple[str, str, int, str | None]] = []
    """Every session stored so far, oldest first: (id, agent, start minute, run id)."""

    async def add(ident: str, agent: str, minute: int, run: str | None) -> None:
        attrs = {"neens.eval_run_id": run} if run else {}
        await _session(client, ingest_key, ident, agent, minute, **attrs)
        made.append((ident, agent, minute, run))

    for n in range(14):
        await add(f"s{n:02d}", ("alpha", "beta")[n % 2], n, "ppr_paging" if n % 3 == 0 else None)
    added = iter(range(100, 200))

    async def arrive(page: int) -> None:
        """New sessions of every kind, and a late span moving an already stored session's
        start earlier (its place in the list does not move)."""
        n = next(added)
        await add(f"new{n}", "alpha", 30, "ppr_paging")
        await add(f"new{n}b", "beta", 1, None)
        late = {
            "session": {"id": "s13", "agent_name": "beta"},
            "spans": [{"id": f"late{n}", "name": "x", "start_time": "2026-11-30T07:00:00Z"}],
        }
        r = await client.post("/sessions", json=late, headers=auth(ingest_key))
        assert r.status_code == 200, r.text
        made[13] = ("s13", "beta", -60, None)

    Row = tuple[str, str, int, str | None]
    cases: list[tuple[dict[str, Any], Callable[[Row], bool]]] = [
        ({}, lambda row: True),
        ({"agent_name": "alpha"}, lambda row: row[1] == "alpha"),
        ({"eval_run_id": "ppr_paging"}, lambda row: row[3] == "ppr_paging"),
        ({"start": "2026-11-30T08:04:00Z"}, lambda row: row[2] >= 4),
        ({"end": "2026-11-30T08:09:00Z"}, lambda row: row[2] < 9),
        (
            {"agent_name": "beta", "start": "2026-11-30T08:00:00Z", "end": "2026-11-30T08:12:00Z"},
            lambda row: row[1] == "beta" and 0 <= row[2] < 12,
        ),
    ]
    for filters, keep in cases:
        by_time = "start" in filters or "end" in filters

        def order(rows: list[Row], by_time: bool = by_time, keep: Any = keep) -> list[str]:
            """Newest first: by first receipt, or (with a time filter) by start."""
            ranked = [(row[2] if by_time else 0, n, row[0]) for n, row in enumerate(rows)]
            return [ident for _, n, ident in sorted(ranked, reverse=True) if keep(rows[n])]

        expected = order(made)
        listed = await walk(
            client, "/sessions", ingest_key, "sessions", "id", limit=3, between=arrive, **filters
        )
        once_each(listed)
        assert [x for x in listed if x in expected] == expected, filters
        # A session stored while paging is listed only if it sorts after the page being read.
        assert listed == [x for x in order(made) if x in listed], filters
        if not by_time:
            assert listed == expected, "newer sessions come before the first page"
    assert len(made) > 30, "sessions arrived while paging"


async def test_a_session_cursor_keeps_its_place_when_the_row_it_points_at_is_gone(
    client: httpx.AsyncClient, db: Database, ingest_key: CreatedKey
) -> None:
    for n in range(5):
        await _session(client, ingest_key, f"g{n}", "a", n)
    r = await client.get("/sessions", params={"limit": 2}, headers=auth(ingest_key))
    first = r.json()
    async with db.write() as s:
        row = await s.scalar(select(TraceSession).where(TraceSession.trace_id == "g3"))
        assert row is not None
        await s.delete(row)
    r = await client.get(
        "/sessions", params={"limit": 2, "cursor": first["nextCursor"]}, headers=auth(ingest_key)
    )
    assert [x["id"] for x in r.json()["sessions"]] == ["g2", "g1"]


# ---------------------------------------------------------------------------------------------
# Pre-prod runs and their items
# ---------------------------------------------------------------------------------------------

ITEMS = [{"input": f"question {n}", "expected_output": f"answer {n}"} for n in range(7)]


async def test_runs_page_newest_first_by_dataset_while_runs_are_created(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    first, _ = await golden_dataset(client, ingest_key, ITEMS[:2], name="first")
    second, _ = await golden_dataset(client, ingest_key, ITEMS[:2], name="second")
    made: list[tuple[str, str]] = []
    for n in range(8):
        dataset = (first, second)[n % 3 == 0]
        run = await create_run(client, ingest_key, dataset_id=dataset, version_label=f"v{n}")
        made.append((run["id"], dataset))

    async def created(page: int) -> None:
        for dataset in (first, second):
            run = await create_run(
                client, ingest_key, dataset_id=dataset, version_label=f"late{page}"
            )
            made.append((run["id"], dataset))

    expected = [r for r, _ in reversed(made)]
    everything = await walk(
        client, "/preprod-evals", ingest_key, "runs", "id", limit=3, between=created
    )
    assert everything == expected
    for dataset in (first, second):
        expected = [r for r, d in reversed(made) if d == dataset]
        listed = await walk(
            client,
            "/preprod-evals",
            ingest_key,
            "runs",
            "id",
            limit=2,
            dataset_id=dataset,
            between=created,
        )
        assert listed == expected


async def test_run_items_come_whole_without_a_limit_and_page_in_frozen_order_with_one(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset, _ = await golden_dataset(client, ingest_key, ITEMS)
    run = (await create_run(client, ingest_key, dataset_id=dataset))["id"]
    path = f"/preprod-evals/{run}/items"
    whole = (await client.get(path, headers=auth(ingest_key))).json()
    assert whole["next_cursor"] is None
    assert [i["input"] for i in whole["items"]] == [i["input"] for i in ITEMS]
    for limit in (1, 3, 7):
        paged = await walk(
            client, path, ingest_key, "items", "item_id", cursor_field="next_cursor", limit=limit
        )
        assert paged == [i["item_id"] for i in whole["items"]]
    r = await client.get(path, params={"limit": 5}, headers=auth(ingest_key))
    cursor = r.json()["next_cursor"]
    r = await client.get(path, params={"cursor": cursor}, headers=auth(ingest_key))
    assert [i["position"] for i in r.json()["items"]] == [5, 6], "a cursor alone reads on"


# ---------------------------------------------------------------------------------------------
# Scores, insights, deliveries
# ---------------------------------------------------------------------------------------------


async def test_scores_page_newest_first_by_source_run_and_session_while_scores_arrive(
    client: httpx.AsyncClient, db: Database, ingest_key: CreatedKey
) -> None:
    for name in ("one", "two"):
        await _session(client, ingest_key, name, "a", 0)
    async with db.read() as s:
        rows = await s.execute(select(TraceSession.trace_id, TraceSession.pk))
        pks: dict[str, int] = {row.trace_id: row.pk for row in rows}
    counter = iter(range(10_000))

    async def add(count: int) -> list[tuple[str, str, str | None]]:
        made: list[tuple[str, str, str | None]] = []
        async with db.write() as s:
            for _ in range(count):
                n = next(counter)
                session = ("one", "two")[n % 2]
                source = ("production", "preprod")[n % 3 == 0]
                run = "ppr_scored" if source == "preprod" else None
                score = score_values(
                    Verdict.scored(0.5, f"reason {n}"),
                    project_id=ingest_key.project_id,
                    session_pk=pks[session],
                    judge_id="jdg_x",
                    judge_name=f"judge {n}",
                    source=source,
                    run_id=run,
                )
                await insert_scores(s, [score])
                made.append((f"judge {n}", session, source))
        return made

    made = await add(17)

    async def arrive(page: int) -> None:
        made.extend(await add(3))

    Row = tuple[str, str, str | None]
    cases: list[tuple[dict[str, Any], Callable[[Row], bool]]] = [
        ({}, lambda row: True),
        ({"source": "preprod"}, lambda row: row[2] == "preprod"),
        ({"run_id": "ppr_scored"}, lambda row: row[2] == "preprod"),
        ({"session_id": "two"}, lambda row: row[1] == "two"),
        (
            {"source": "production", "session_id": "one"},
            lambda row: row[1] == "one" and row[2] == "production",
        ),
    ]
    for filters, keep in cases:
        expected = [row[0] for row in reversed(made) if keep(row)]
        listed = await walk(
            client, "/scores", ingest_key, "scores", "judgeName", limit=4, between=arrive, **filters
        )
        assert listed == expected, filters


async def test_insights_and_deliveries_page_while_insights_arrive(
    client: httpx.AsyncClient, db: Database, admin_key: CreatedKey
) -> None:
    r = await client.post(
        "/notification-sinks",
        json={"name": "hook", "url": "http://127.0.0.1:9/hook"},
        headers=auth(admin_key),
    )
    assert r.status_code == 201, r.text
    sink = r.json()["id"]
    counter = iter(range(10_000))

    async def add(count: int) -> list[tuple[str, str | None]]:
        made = []
        for _ in range(count):
            n = next(counter)
            run = "ppr_a" if n % 2 else None
            async with db.write() as s:
                made.append(
                    (
                        await add_insight(
                            s, admin_key.project_id, kind="k", title=f"t{n}", run_id=run, details={}
                        ),
                        run,
                    )
                )
        return made

    made = await add(11)

    async def arrive(page: int) -> None:
        made.extend(await add(2))

    for filters in ({}, {"run_id": "ppr_a"}):
        whole = await client.get(
            "/insights", params={"limit": 500, **filters}, headers=auth(admin_key)
        )
        stamps = [i["createdAt"] for i in whole.json()["insights"]]
        assert stamps == sorted(stamps, reverse=True), "newest first"
        expected = [i["id"] for i in whole.json()["insights"]]
        kept = {i for i, run in made if filters.get("run_id", run) == run}
        assert set(expected) == kept
        listed = await walk(
            client, "/insights", admin_key, "insights", "id", limit=2, between=arrive, **filters
        )
        assert listed == expected, filters

    path = f"/notification-sinks/{sink}/deliveries"
    before = [i for i, _ in made]
    delivered = await walk(client, path, admin_key, "deliveries", "insightId", limit=4)
    once_each(delivered)
    assert delivered[: len(before)] == before, "oldest first"
    count = len(delivered)
    grown = await walk(client, path, admin_key, "deliveries", "insightId", limit=3, between=arrive)
    assert grown[:count] == delivered, "rows added while paging come after, never between"
    once_each(grown)


# ---------------------------------------------------------------------------------------------
# Dataset items: offset and cursor
# ---------------------------------------------------------------------------------------------


async def test_dataset_items_page_by_cursor_or_by_offset_alike_but_not_both(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    dataset, version = await golden_dataset(client, ingest_key, ITEMS)
    path = f"/datasets/{dataset}/versions/{version}/items"
    by_cursor = await walk(client, path, ingest_key, "items", "position", limit=3)
    assert by_cursor == list(range(7))
    by_offset: list[int] = []
    offset: int | None = 0
    while offset is not None:
        r = await client.get(path, params={"limit": 3, "offset": offset}, headers=auth(ingest_key))
        body = r.json()
        by_offset += [i["position"] for i in body["items"]]
        offset = body["nextOffset"]
    assert by_offset == by_cursor
    r = await client.get(path, params={"limit": 3}, headers=auth(ingest_key))
    first = r.json()
    assert first["nextOffset"] == 3
    r = await client.get(
        path,
        params={"limit": 3, "offset": 3, "cursor": first["nextCursor"]},
        headers=auth(ingest_key),
    )
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "cursor"
    assert "not both" in r.json()["error"]["message"]


# ---------------------------------------------------------------------------------------------
# Bad cursors
# ---------------------------------------------------------------------------------------------


def _b64(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def _sealed(value: object, db: Database) -> str:
    """`value` sealed as the server seals a cursor (so only its shape can be wrong), for the
    list its first element names."""
    kind = value[0] if isinstance(value, list) and value and isinstance(value[0], str) else ""
    key = AESGCM(db.secrets.derived_keys(paging.PURPOSE)[0])
    nonce = os.urandom(12)
    body = nonce + key.encrypt(nonce, json.dumps(value).encode(), kind.encode())
    return base64.urlsafe_b64encode(body).rstrip(b"=").decode()


async def test_a_garbage_tampered_or_foreign_cursor_is_a_422_naming_cursor_on_every_list(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database
) -> None:
    dataset, version = await golden_dataset(client, admin_key, ITEMS)
    run = (await create_run(client, admin_key, dataset_id=dataset))["id"]
    r = await client.post(
        "/notification-sinks",
        json={"name": "hook", "url": "http://127.0.0.1:9/hook"},
        headers=auth(admin_key),
    )
    sink = r.json()["id"]
    lists = [
        "/sessions",
        "/preprod-evals",
        f"/preprod-evals/{run}/items",
        "/scores",
        "/insights",
        f"/notification-sinks/{sink}/deliveries",
        f"/datasets/{dataset}/versions/{version}/items",
    ]
    bad = [
        "",
        "abc",
        "12345",
        "%%%",
        "é",
        "x" * 600,
        _sealed("sessions", db),
        _sealed(["sessions"], db),
        _sealed(["sessions", -1], db),
        _sealed(["sessions", 2**70], db),
        _sealed(["sessions", 1.5], db),
        _sealed(["sessions", "1"], db),
        _sealed(["sessions", True], db),
        _sealed(["runs", "not a time", "ppr_x"], db),
        _sealed(["runs", "2026-11-30T08:00:00", "ppr_x"], db),  # no offset
        _sealed(["runs", "2026-11-30T08:00:00Z", 7], db),
        _sealed(["insights", "2026-11-30T08:00:00Z", "ins_\u0000"], db),
        _sealed(["scores", 1, 2], db),
        _sealed({"sessions": 1}, db),
        _sealed(["nope", 1], db),
        _b64(["sessions", 5]),  # well formed, but not sealed: forged (or from an older server)
    ]
    for path in lists:
        for cursor in bad:
            r = await client.get(path, params={"cursor": cursor}, headers=auth(admin_key))
            assert r.status_code == 422, (path, cursor, r.text)
            assert r.json()["error"]["field"] == "cursor", (path, cursor)
    # A cursor of one list is refused by every other: it is a position in that list only.
    r = await client.get(
        "/sessions", params={"cursor": _sealed(["sessions", 5], db)}, headers=auth(admin_key)
    )
    assert r.status_code == 200
    by_start = _sealed(["sessions-by-start", "2026-11-30T08:00:00+00:00", 5], db)
    r = await client.get(
        "/sessions",
        params={"cursor": by_start, "start": "2026-11-01T00:00:00Z"},
        headers=auth(admin_key),
    )
    assert r.status_code == 200, "a cursor of the start-ordered list, with a time filter"
    for params in (
        {"cursor": by_start},
        {"cursor": _sealed(["sessions", 5], db), "end": "2026-11-01T00:00:00Z"},
    ):
        r = await client.get("/sessions", params=params, headers=auth(admin_key))
        assert r.status_code == 422, "the other order's cursor is a position in another list"
        assert r.json()["error"]["field"] == "cursor"
    for path in lists[1:]:
        r = await client.get(
            path, params={"cursor": _sealed(["sessions", 5], db)}, headers=auth(admin_key)
        )
        assert r.status_code == 422, path


@pytest.mark.parametrize("limit", [0, 501])
async def test_the_page_size_is_bounded(
    client: httpx.AsyncClient, ingest_key: CreatedKey, limit: int
) -> None:
    r = await client.get("/sessions", params={"limit": limit}, headers=auth(ingest_key))
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "limit"


async def test_a_cursor_tells_nothing_of_the_rows_behind_it(
    client: httpx.AsyncClient, ingest_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    """Sessions are keyed by a row number every project's sessions share: read in the clear, a
    cursor would tell one tenant how many sessions the others add."""
    for n in range(3):
        await _session(client, ingest_key, f"mine-{n}", "bot", n)
    for n in range(20):
        await _session(client, other_project_key, f"theirs-{n}", "bot", n)
    first = await client.get("/sessions", params={"limit": 1}, headers=auth(ingest_key))
    cursor = first.json()["nextCursor"]
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    assert b"sessions" not in raw and not raw.lstrip().startswith(b"[")
    again = await client.get("/sessions", params={"limit": 1}, headers=auth(ingest_key))
    assert again.json()["nextCursor"] != cursor, "sealed afresh each time"
    pages = await client.get(
        "/sessions", params={"limit": 5, "cursor": cursor}, headers=auth(ingest_key)
    )
    assert [s["id"] for s in pages.json()["sessions"]] == ["mine-1", "mine-0"]
