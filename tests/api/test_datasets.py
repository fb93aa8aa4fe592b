"""Datasets: creating them, immutable versions, the golden mark, and reading items back."""

from __future__ import annotations

import httpx

from neens.store.keys import CreatedKey
from tests.conftest import auth


async def _dataset(client: httpx.AsyncClient, key: CreatedKey, name: str = "golden") -> str:
    r = await client.post("/datasets", json={"name": name}, headers=auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _version(
    client: httpx.AsyncClient,
    key: CreatedKey,
    ds: str,
    items: list[dict[str, object]],
    golden: bool = False,
) -> dict[str, object]:
    r = await client.post(
        f"/datasets/{ds}/versions", json={"items": items, "golden": golden}, headers=auth(key)
    )
    assert r.status_code == 201, r.text
    body: dict[str, object] = r.json()
    return body


async def test_created_dataset_has_a_ds_id_and_no_golden_version(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    r = await client.post("/datasets", json={"name": "support golden"}, headers=auth(ingest_key))
    assert r.status_code == 201
    body = r.json()
    assert body["id"].startswith("ds_")
    assert body["name"] == "support golden"
    assert body["goldenVersionId"] is None
    assert body["versionCount"] == 0
    listed = (await client.get("/datasets", headers=auth(ingest_key))).json()["datasets"]
    assert [d["id"] for d in listed] == [body["id"]]


async def test_dataset_name_is_unique_within_a_project(
    client: httpx.AsyncClient, ingest_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    await _dataset(client, ingest_key, "golden")
    r = await client.post("/datasets", json={"name": "golden"}, headers=auth(ingest_key))
    assert r.status_code == 409
    assert r.json()["error"]["field"] == "name"
    # Another project may use the same name.
    await _dataset(client, other_project_key, "golden")


async def test_datasets_can_be_found_by_name(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    ds = await _dataset(client, ingest_key, "a")
    await _dataset(client, ingest_key, "b")
    r = await client.get("/datasets", params={"name": "a"}, headers=auth(ingest_key))
    assert [d["id"] for d in r.json()["datasets"]] == [ds]


async def test_pushing_a_golden_version_makes_it_the_datasets_golden_version(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    ds = await _dataset(client, ingest_key)
    v1 = await _version(
        client,
        ingest_key,
        ds,
        [{"input": "Where is order 17?", "expected_output": "Shipped"}],
        golden=True,
    )
    assert str(v1["id"]).startswith("dsv_")
    assert v1["number"] == 1
    assert v1["itemCount"] == 1
    assert v1["golden"] is True
    dataset = (await client.get(f"/datasets/{ds}", headers=auth(ingest_key))).json()
    assert dataset["goldenVersionId"] == v1["id"]
    assert dataset["latestVersionId"] == v1["id"]


async def test_a_new_version_does_not_move_the_golden_mark_until_asked(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    ds = await _dataset(client, ingest_key)
    v1 = await _version(client, ingest_key, ds, [{"input": "one"}], golden=True)
    v2 = await _version(client, ingest_key, ds, [{"input": "one"}, {"input": "two"}])
    assert v2["number"] == 2
    dataset = (await client.get(f"/datasets/{ds}", headers=auth(ingest_key))).json()
    assert dataset["goldenVersionId"] == v1["id"]
    assert dataset["latestVersionId"] == v2["id"]

    r = await client.post(f"/datasets/{ds}/versions/{v2['id']}/golden", headers=auth(ingest_key))
    assert r.status_code == 200
    assert r.json()["golden"] is True
    versions = (await client.get(f"/datasets/{ds}/versions", headers=auth(ingest_key))).json()
    assert [(v["number"], v["golden"]) for v in versions["versions"]] == [(1, False), (2, True)]
    # The old version is untouched: same items, same count.
    items = await client.get(f"/datasets/{ds}/versions/{v1['id']}/items", headers=auth(ingest_key))
    assert [i["input"] for i in items.json()["items"]] == ["one"]


async def test_items_round_trip_unicode_empty_strings_and_long_inputs(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    long_input = "é🙂" * 100_000  # 200,000 characters
    items = [
        {"input": "Ünïcødé — 你好 — 🙂 — \u202e", "expected_output": "", "metadata": {"k": "ß"}},
        {"input": "", "expected_output": None},
        {"input": long_input, "metadata": {"nested": {"list": [1, 2.5, None, True]}}},
    ]
    ds = await _dataset(client, ingest_key)
    version = await _version(client, ingest_key, ds, items)
    r = await client.get(f"/datasets/{ds}/versions/{version['id']}/items", headers=auth(ingest_key))
    got = r.json()["items"]
    assert [i["position"] for i in got] == [0, 1, 2]
    assert got[0]["input"] == items[0]["input"]
    assert got[0]["expectedOutput"] == ""
    assert got[0]["metadata"] == {"k": "ß"}
    assert got[1]["input"] == ""
    assert got[1]["expectedOutput"] is None
    assert got[2]["input"] == long_input
    assert len(got[2]["input"]) == 200_000
    assert got[2]["metadata"] == items[2]["metadata"]
    assert all(i["id"].startswith("dsi_") for i in got)


async def test_items_are_paged_in_frozen_order(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    ds = await _dataset(client, ingest_key)
    version = await _version(client, ingest_key, ds, [{"input": f"q{i}"} for i in range(7)])
    url = f"/datasets/{ds}/versions/{version['id']}/items"
    first = (await client.get(url, params={"limit": 5}, headers=auth(ingest_key))).json()
    assert [i["input"] for i in first["items"]] == [f"q{i}" for i in range(5)]
    assert first["nextOffset"] == 5
    rest = (
        await client.get(url, params={"limit": 5, "offset": 5}, headers=auth(ingest_key))
    ).json()
    assert [i["input"] for i in rest["items"]] == ["q5", "q6"]
    assert rest["nextOffset"] is None


async def test_a_version_without_items_is_refused_naming_the_field(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    ds = await _dataset(client, ingest_key)
    r = await client.post(f"/datasets/{ds}/versions", json={"items": []}, headers=auth(ingest_key))
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "items"


async def test_bad_items_are_refused_naming_the_item_and_field(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    ds = await _dataset(client, ingest_key)
    cases = [
        ({"items": [{"input": "ok"}, {"expected_output": "x"}]}, "items[1].input"),
        ({"items": [{"input": 5}]}, "items[0].input"),
        ({"items": [{"input": "ok", "expected": "typo"}]}, "items[0].expected"),
        ({"items": [{"input": "nul \x00 inside"}]}, "items[0].input"),
        ({"items": [{"input": "ok"}], "golden": "maybe"}, "golden"),
    ]
    for body, field in cases:
        r = await client.post(f"/datasets/{ds}/versions", json=body, headers=auth(ingest_key))
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["field"] == field, r.text
        assert field in r.json()["error"]["message"]
    # Nothing was stored by the refused requests.
    assert (await client.get(f"/datasets/{ds}", headers=auth(ingest_key))).json()[
        "versionCount"
    ] == 0


async def test_malformed_json_is_a_400(client: httpx.AsyncClient, ingest_key: CreatedKey) -> None:
    r = await client.post(
        "/datasets",
        content=b'{"name": ',
        headers={**auth(ingest_key), "Content-Type": "application/json"},
    )
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_input"


async def test_another_projects_dataset_is_not_found_anywhere(
    client: httpx.AsyncClient, ingest_key: CreatedKey, other_project_key: CreatedKey
) -> None:
    ds = await _dataset(client, ingest_key)
    version = await _version(client, ingest_key, ds, [{"input": "secret prompt"}])
    theirs = auth(other_project_key)
    for method, url in [
        ("GET", f"/datasets/{ds}"),
        ("GET", f"/datasets/{ds}/versions"),
        ("GET", f"/datasets/{ds}/versions/{version['id']}"),
        ("GET", f"/datasets/{ds}/versions/{version['id']}/items"),
        ("POST", f"/datasets/{ds}/versions/{version['id']}/golden"),
    ]:
        r = await client.request(method, url, headers=theirs)
        assert r.status_code == 404, (method, url)
        assert "secret" not in r.text
    r = await client.post(
        f"/datasets/{ds}/versions", json={"items": [{"input": "x"}]}, headers=theirs
    )
    assert r.status_code == 404
    assert (await client.get("/datasets", headers=theirs)).json()["datasets"] == []


async def test_unknown_version_is_404_naming_the_version(
    client: httpx.AsyncClient, ingest_key: CreatedKey
) -> None:
    ds = await _dataset(client, ingest_key)
    r = await client.post(f"/datasets/{ds}/versions/dsv_nope/golden", headers=auth(ingest_key))
    assert r.status_code == 404
    assert r.json()["error"]["field"] == "version_id"
