"""Stress-test suites on both databases: built from confirmed sessions only, one item per
session with its input, frozen as a golden version; refusals naming the field; and a sweep given
the suite's id replaying exactly that frozen version."""

from __future__ import annotations

from typing import Any

import httpx

from neens.demo.endpoints import serve, steady
from neens.store.keys import CreatedKey
from tests.api.test_failure_modes import annotate, new_mode, new_session
from tests.api.test_sweeps import arm, create_sweep, wait_for_sweep
from tests.support.preprod import auth, connection, golden_dataset, items_of


async def build(client: httpx.AsyncClient, key: CreatedKey, **body: Any) -> httpx.Response:
    return await client.post("/stress-test-suites", json=body, headers=auth(key))


async def version_items(
    client: httpx.AsyncClient, key: CreatedKey, dataset_id: str, version_id: str
) -> list[dict[str, Any]]:
    r = await client.get(f"/datasets/{dataset_id}/versions/{version_id}/items", headers=auth(key))
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


async def test_a_suite_holds_one_item_per_confirmed_session_and_nothing_else(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    refund = (await new_mode(client, admin_key, "wrong refund amount"))["id"]
    fraud = (await new_mode(client, admin_key, "settles fraud alone"))["id"]
    other = (await new_mode(client, admin_key, "rude tone"))["id"]
    await new_session(client, admin_key, "s-refund", "Refund order 1001, it arrived broken")
    await new_session(client, admin_key, "s-both", "Chargeback on order 1002, refund it now")
    await new_session(client, admin_key, "s-refuted", "Where is order 1003?")
    await new_session(client, admin_key, "s-later-refuted", "Refund order 1004 twice")
    await new_session(client, admin_key, "s-other-mode", "You are useless")
    await annotate(client, ingest_key, "s-refund", refund, expectedOutput="Refund of $40 issued.")
    await annotate(client, ingest_key, "s-both", fraud)
    await annotate(client, ingest_key, "s-both", refund)
    await annotate(client, ingest_key, "s-refuted", refund, confirmed=False)
    await annotate(client, ingest_key, "s-later-refuted", refund)
    await annotate(client, ingest_key, "s-later-refuted", refund, confirmed=False)
    await annotate(client, ingest_key, "s-other-mode", other)

    r = await build(client, ingest_key, name="Q3 incidents", failureModeIds=[refund, fraud])
    assert r.status_code == 201, r.text
    suite = r.json()
    assert suite["id"].startswith("sts_")
    assert suite["failureModeIds"] == [refund, fraud]
    assert suite["itemCount"] == 2 and suite["skippedSessions"] == []
    items = await version_items(client, ingest_key, suite["datasetId"], suite["datasetVersionId"])
    assert [(i["input"], i["expectedOutput"]) for i in items] == [
        ("Refund order 1001, it arrived broken", "Refund of $40 issued."),
        ("Chargeback on order 1002, refund it now", None),
    ], "unconfirmed and refuted sessions, and other modes' sessions, are left out"
    assert items[0]["metadata"] == {
        "stressTestSuiteId": suite["id"],
        "sourceSessionId": "s-refund",
        "failureModes": ["wrong refund amount"],
        "failureModeIds": [refund],
    }
    assert items[1]["metadata"]["failureModes"] == ["wrong refund amount", "settles fraud alone"]
    assert items[1]["metadata"]["sourceSessionId"] == "s-both"

    dataset = (await client.get(f"/datasets/{suite['datasetId']}", headers=auth(ingest_key))).json()
    assert dataset["name"] == "Q3 incidents"
    assert dataset["goldenVersionId"] == suite["datasetVersionId"]
    r = await client.get(f"/stress-test-suites/{suite['id']}", headers=auth(ingest_key))
    assert r.status_code == 200 and r.json() == suite

    # Frozen: annotating more sessions later changes the taxonomy's counts, not the suite.
    await new_session(client, admin_key, "s-late", "Refund order 1005")
    await annotate(client, ingest_key, "s-late", refund)
    again = await version_items(client, ingest_key, suite["datasetId"], suite["datasetVersionId"])
    assert again == items


async def test_sessions_that_cannot_be_replayed_are_listed_never_dropped(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    refund = (await new_mode(client, admin_key, "wrong refund amount"))["id"]
    fraud = (await new_mode(client, admin_key, "settles fraud alone"))["id"]
    await new_session(client, admin_key, "s-no-input", prompt=None)
    await new_session(client, admin_key, "s-disagree", "Refund order 7")
    await new_session(client, admin_key, "s-fine", "Refund order 8")
    await annotate(client, admin_key, "s-no-input", refund)
    await annotate(client, admin_key, "s-disagree", refund, expectedOutput="Refund issued.")
    await annotate(client, admin_key, "s-disagree", fraud, expectedOutput="Escalated to a human.")
    await annotate(client, admin_key, "s-fine", refund)
    r = await build(client, admin_key, name="replayable", failureModeIds=[refund, fraud])
    assert r.status_code == 201, r.text
    suite = r.json()
    assert suite["itemCount"] == 1
    skipped = {k["sessionId"]: k["reason"] for k in suite["skippedSessions"]}
    assert set(skipped) == {"s-no-input", "s-disagree"}
    assert "no input" in skipped["s-no-input"]
    assert "different expected outputs" in skipped["s-disagree"]

    # Only sessions without a prompt: nothing to build, and the answer says why.
    r = await build(client, admin_key, name="empty", failureModeIds=[refund])
    assert r.status_code == 201, "s-fine is confirmed in refund"
    only_blank = (await new_mode(client, admin_key, "blank"))["id"]
    await annotate(client, admin_key, "s-no-input", only_blank)
    r = await build(client, admin_key, name="blank", failureModeIds=[only_blank])
    assert r.status_code == 422 and r.json()["error"]["field"] == "failureModeIds", r.text
    assert "s-no-input" in r.json()["error"]["message"]


async def test_a_suite_is_refused_naming_the_field(
    client: httpx.AsyncClient, admin_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    refund = (await new_mode(client, admin_key, "wrong refund amount"))["id"]
    theirs = (await new_mode(client, other_project_key, "theirs"))["id"]
    await new_session(client, admin_key, "s-refuted", "Where is my order?")
    await annotate(client, admin_key, "s-refuted", refund, confirmed=False)
    cases = [
        ({"failureModeIds": [refund]}, 422, "failureModeIds"),
        ({"failureModeIds": []}, 422, "failureModeIds"),
        ({"failureModeIds": [refund, theirs]}, 404, "failureModeIds[1]"),
        ({"failureModeIds": [refund, refund]}, 422, "failureModeIds[1]"),
        ({"failureModeIds": [refund], "datasetId": "ds_nope"}, 404, "datasetId"),
    ]
    for extra, status, field in cases:
        r = await build(client, admin_key, name="suite", **extra)
        assert r.status_code == status and r.json()["error"]["field"] == field, (extra, r.text)
    r = await build(client, admin_key, name="suite", failureModeIds=[refund])
    assert "no session is confirmed" in r.json()["error"]["message"]
    listed = (await client.get("/datasets", headers=auth(admin_key))).json()["datasets"]
    assert listed == [], "a refused suite leaves no dataset behind"


async def test_a_suite_can_be_the_next_golden_version_of_an_existing_dataset(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    dataset_id, first = await golden_dataset(client, admin_key, [{"input": "hello"}], name="gold")
    refund = (await new_mode(client, admin_key, "wrong refund amount"))["id"]
    await new_session(client, admin_key, "s-1", "Refund order 9")
    await annotate(client, admin_key, "s-1", refund)
    r = await build(client, admin_key, name="gold", failureModeIds=[refund])
    assert r.status_code == 409 and r.json()["error"]["field"] == "name", r.text
    assert "datasetId" in r.json()["error"]["message"]
    r = await build(client, admin_key, name="gold", failureModeIds=[refund], datasetId=dataset_id)
    assert r.status_code == 201, r.text
    suite = r.json()
    assert suite["datasetId"] == dataset_id and suite["datasetVersionId"] != first
    versions = (
        await client.get(f"/datasets/{dataset_id}/versions", headers=auth(admin_key))
    ).json()["versions"]
    assert [(v["id"], v["number"], v["golden"]) for v in versions] == [
        (first, 1, False),
        (suite["datasetVersionId"], 2, True),
    ]
    first_items = await version_items(client, admin_key, dataset_id, first)
    assert [i["input"] for i in first_items] == ["hello"], "the earlier version is untouched"


async def test_another_projects_suite_answers_like_a_missing_one(
    client: httpx.AsyncClient, admin_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    refund = (await new_mode(client, admin_key, "wrong refund amount"))["id"]
    await new_session(client, admin_key, "s-1", "Refund order 9")
    await annotate(client, admin_key, "s-1", refund)
    suite = (await build(client, admin_key, name="mine", failureModeIds=[refund])).json()
    answers = []
    for suite_id in (suite["id"], "sts_" + "0" * 24):
        r = await client.get(f"/stress-test-suites/{suite_id}", headers=auth(other_project_key))
        answers.append((r.status_code, r.text.replace(suite_id, "<id>")))
    assert answers[0] == answers[1] and answers[0][0] == 404


async def _suite_and_arms(
    client: httpx.AsyncClient, key: CreatedKey, url_a: str, url_b: str
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    refund = (await new_mode(client, key, "wrong refund amount"))["id"]
    for n in range(3):
        await new_session(client, key, f"s-{n}", f"Refund order {n}")
        await annotate(
            client, key, f"s-{n}", refund, confirmed=n != 1, expectedOutput="Refund issued."
        )
    suite = (await build(client, key, name="incidents", failureModeIds=[refund])).json()
    conns = [
        await connection(client, key, url_a, name="sonnet", model="claude-sonnet-4-5"),
        await connection(client, key, url_b, name="mini", model="gpt-4o-mini"),
    ]
    arms = [
        {"label": "sonnet", "agentConnectionId": conns[0]},
        {"label": "mini", "agentConnectionId": conns[1]},
    ]
    return suite, arms


async def test_a_sweep_given_a_suite_replays_exactly_its_frozen_version(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    answers = {f"Refund order {n}": "Refund issued." for n in range(3)}
    with serve(steady(answers, path="/a"), steady(answers, path="/b")) as agents:
        suite, arms = await _suite_and_arms(client, admin_key, agents.url("/a"), agents.url("/b"))
        # A later golden version of the same dataset must not be what the sweep replays.
        r = await client.post(
            f"/datasets/{suite['datasetId']}/versions",
            json={"items": [{"input": "something else"}], "golden": True},
            headers=auth(admin_key),
        )
        assert r.status_code == 201, r.text
        body = {"suiteId": suite["id"], "passK": 1, "arms": arms}
        r = await client.post("/model-sweeps/preview", json=body, headers=auth(ingest_key))
        assert r.status_code == 200, r.text
        preview = r.json()
        assert (preview["datasetId"], preview["datasetVersionId"], preview["itemCount"]) == (
            suite["datasetId"], suite["datasetVersionId"], 2,
        )  # fmt: skip
        sweep = await create_sweep(client, ingest_key, **body)
        assert sweep["datasetVersionId"] == suite["datasetVersionId"]
        assert sweep["datasetId"] == suite["datasetId"]
        done = await wait_for_sweep(client, ingest_key, sweep["id"])
    assert done["status"] == "completed", [(a["status"], a.get("error")) for a in done["arms"]]
    items = await items_of(client, ingest_key, arm(done, "sonnet")["runIds"][0])
    assert [i["input"] for i in items] == ["Refund order 0", "Refund order 2"]


async def test_a_suite_id_beside_another_dataset_is_refused_naming_suite_id(
    client: httpx.AsyncClient, admin_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    suite, arms = await _suite_and_arms(
        client, admin_key, "http://127.0.0.1:9/a", "http://127.0.0.1:9/b"
    )
    other_dataset, other_version = await golden_dataset(
        client, admin_key, [{"input": "x"}], name="other"
    )
    base = {"versionLabel": "v1", "passK": 1, "arms": arms}
    refused = [
        ({"suiteId": suite["id"], "datasetId": other_dataset}, 422),
        ({"suiteId": suite["id"], "datasetVersionId": other_version}, 422),
        ({"suiteId": "sts_" + "0" * 24}, 404),
    ]
    for extra, status in refused:
        for path in ("/model-sweeps", "/model-sweeps/preview"):
            r = await client.post(path, json={**base, **extra}, headers=auth(admin_key))
            assert r.status_code == status, (path, extra, r.text)
            assert r.json()["error"]["field"] == "suiteId", r.text
    # Naming the suite's own dataset and version beside it is no conflict.
    same = {
        "suiteId": suite["id"],
        "datasetId": suite["datasetId"],
        "datasetVersionId": suite["datasetVersionId"],
    }
    r = await client.post("/model-sweeps/preview", json={**base, **same}, headers=auth(admin_key))
    assert r.status_code == 200 and r.json()["datasetVersionId"] == suite["datasetVersionId"]
    # Another project's suite is missing here.
    theirs = (await new_mode(client, other_project_key, "theirs"))["id"]
    await new_session(client, other_project_key, "t-1", "Their prompt")
    await annotate(client, other_project_key, "t-1", theirs)
    their_suite = (
        await build(client, other_project_key, name="theirs", failureModeIds=[theirs])
    ).json()
    r = await client.post(
        "/model-sweeps/preview", json={**base, "suiteId": their_suite["id"]},
        headers=auth(admin_key),
    )  # fmt: skip
    assert r.status_code == 404 and r.json()["error"]["field"] == "suiteId"
    listed = (await client.get("/model-sweeps", headers=auth(admin_key))).json()
    assert listed["sweeps"] == [], "nothing was created"
