"""`neens import … --server` against a live server: the run is saved locally and sent as a
read-only pre-prod run, on a new dataset made from its cases or on an existing one."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.exp.conftest import saved_trials
from tests.imports.conftest import FIXTURES, Result
from tests.support.live import LiveServer

pytestmark = pytest.mark.e2e

Neens = Callable[..., Result]
INSPECT = str(FIXTURES / "inspect_arith.eval")
PROMPTFOO = str(FIXTURES / "promptfoo_arith.json")


@pytest.fixture
def server(
    live_server: LiveServer, ingest_key: CreatedKey, monkeypatch: pytest.MonkeyPatch
) -> Iterator[httpx.Client]:
    monkeypatch.setenv("NEENS_BASE_URL", live_server.url)
    monkeypatch.setenv("NEENS_API_KEY", ingest_key.key)
    headers = {"Authorization": f"Bearer {ingest_key.key}"}
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as client:
        yield client


def _get(server: httpx.Client, path: str) -> Any:
    r = server.get(path)
    assert r.status_code == 200, r.text
    return r.json()


def test_an_import_is_sent_as_a_run_on_a_dataset_made_from_its_cases(
    neens: Neens, server: httpx.Client
) -> None:
    done = neens("import", "inspect", INSPECT, "--server", "--json")
    assert done.code == 0, done.err
    body = done.json()
    sent = body["server"]
    assert sent["datasetCreated"] is True and sent["status"] == "completed"
    run = _get(server, f"/preprod-evals/{sent['runId']}")
    assert run["runnerMode"] == "import" and run["name"] == body["name"]
    assert run["imported"]["tool"] == "inspect_ai" and run["imported"]["repeats"] == 2
    assert run["imported"]["unknown"] == body["unknown"]
    assert "cost_usd" in run["imported"]["unknown"]
    dataset = _get(server, f"/datasets/{sent['datasetId']}")
    assert dataset["name"] == body["name"]
    assert dataset["goldenVersionId"] == sent["datasetVersionId"]

    items = _get(server, f"/preprod-evals/{sent['runId']}/items")["items"]
    assert len(items) == body["cases"] == 4
    trials = [t for item in items for t in item["trials"]]
    assert len(trials) == body["caseTrials"] == 8
    assert sum(t["passed"] is True for t in trials) == body["passed"] == 6
    assert all(t["cost_usd"] is None for t in trials)  # the log records no cost: unknown
    # An item passes only when both of its epochs did.
    for item in items:
        assert item["passed"] == all(t["passed"] for t in item["trials"])
        assert item["output"] == item["trials"][0]["output"]
    assert sum(item["passed"] is True for item in items) == 2
    gate = _get(server, f"/preprod-evals/{sent['runId']}/gate")
    assert gate["passRate"] == 0.5

    local = neens("exp", "list", "--json").json()["experiments"]
    assert [e["id"] for e in local] == [body["id"]]


def test_a_second_tool_s_run_of_the_same_cases_lands_on_the_same_dataset(
    neens: Neens, server: httpx.Client
) -> None:
    first = neens("import", "inspect", INSPECT, "--server", "--json").json()["server"]
    done = neens("import", "promptfoo", PROMPTFOO, "--server", "--dataset-id", first["datasetId"])
    assert done.code == 0, done.err
    last = done.out.splitlines()[-1]
    assert last.startswith("server run ppr_") and f"on dataset {first['datasetId']}" in last
    run_id = last.split()[2]
    run = _get(server, f"/preprod-evals/{run_id}")
    assert run["datasetVersionId"] == first["datasetVersionId"]
    assert run["imported"]["tool"] == "promptfoo"
    items = _get(server, f"/preprod-evals/{run_id}/items")["items"]
    # Paired by case key: promptfoo's metadata.id is Inspect's sample id; q4 failed there.
    inspect_items = _get(server, f"/preprod-evals/{first['runId']}/items")["items"]
    assert [i["item_id"] for i in items] == [i["item_id"] for i in inspect_items]
    assert [i["passed"] for i in items] == [True, True, True, False]
    assert all(len(i["trials"]) == 1 for i in items)
    runs = _get(server, "/preprod-evals")["runs"]
    assert {r["id"] for r in runs} == {run_id, first["runId"]}
    params = {"runs": f"{first['runId']},{run_id}", "baseline": first["runId"]}
    compared = server.get("/preprod-compare", params=params)
    assert compared.status_code == 200, compared.text
    summaries = {r["runId"]: r for r in compared.json()["runs"]}
    assert summaries[run_id]["passRate"] == 0.75 and summaries[first["runId"]]["passRate"] == 0.5
    # As `neens exp compare` counts them on "every repeat passed": q4 regressed, q2 and q3 fixed.
    assert summaries[run_id]["regressionsVsBaseline"] == 1
    assert summaries[run_id]["newPassesVsBaseline"] == 2


def test_bad_server_flags_exit_2_before_anything_is_saved(
    neens: Neens, server: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = neens("import", "inspect", INSPECT, "--dataset-id", "ds_x")
    assert done.code == 2 and "--dataset-id is for --server" in done.err
    done = neens("import", "inspect", INSPECT, "--server", "--dataset-version-id", "dsv_x")
    assert done.code == 2 and "needs --dataset-id" in done.err
    monkeypatch.delenv("NEENS_API_KEY")
    done = neens("import", "inspect", INSPECT, "--server")
    assert done.code == 2 and "NEENS_API_KEY is not set" in done.err
    assert done.err.count("\n") == 1
    assert neens("exp", "list", "--json").json()["experiments"] == []
    assert _get(server, "/preprod-evals")["runs"] == []


def test_a_dataset_whose_items_are_not_the_cases_is_refused(
    neens: Neens, server: httpx.Client
) -> None:
    r = server.post("/datasets", json={"name": "other"})
    dataset_id = r.json()["id"]
    items = [{"input": "something else"}]
    server.post(f"/datasets/{dataset_id}/versions", json={"items": items, "golden": True})
    done = neens("import", "inspect", INSPECT, "--server", "--dataset-id", dataset_id)
    assert done.code == 2
    assert "matches no item of version" in done.err and done.err.count("\n") == 1
    assert _get(server, "/preprod-evals")["runs"] == []
    done = neens("import", "inspect", INSPECT, "--server", "--dataset-id", "ds_nope")
    assert done.code == 2 and "dataset_id" in done.err


def test_a_run_the_server_would_refuse_makes_nothing_on_it(
    neens: Neens, server: httpx.Client, tmp_path: Any
) -> None:
    """Checked against the server's own schemas before anything is sent: no dataset is left
    behind for a run that was never stored."""
    body = json.loads((FIXTURES / "promptfoo_arith.json").read_text())
    body["evalId"] = "e" * 501  # the tool's run id, past the server's 500 characters
    for result in body["results"]["results"]:
        result["evalId"] = body["evalId"]
    bad = tmp_path / "long-run-id.json"
    bad.write_text(json.dumps(body))
    done = neens("import", "promptfoo", str(bad), "--server", "--name", "long run id")
    assert done.code == 2, done.err
    assert done.err.startswith(
        "neens: error: the server would refuse this run, so nothing was sent: source.run_id: "
        "String should have at most 500 characters\n"
    ), done.err
    assert done.err.count("\n") == 1
    assert _get(server, "/datasets")["datasets"] == []
    assert _get(server, "/preprod-evals")["runs"] == []


def test_an_error_longer_than_the_server_keeps_is_sent_cut_saying_so(
    neens: Neens, server: httpx.Client, tmp_path: Any, database_url: str
) -> None:
    """A trial's error (a stack trace, say) past the server's 10,000 characters is sent as its
    start and a note naming its whole length, never silently shortened; the local import keeps
    it whole."""
    body = json.loads((FIXTURES / "promptfoo_arith.json").read_text())
    trace = "Traceback: " + "frame\n" * 3_000  # 18,011 characters
    body["results"]["results"][0].update(success=False, failureReason=2, error=trace)
    path = tmp_path / "long-error.json"
    path.write_text(json.dumps(body))

    done = neens("import", "promptfoo", str(path), "--server", "--json")

    assert done.code == 0, done.err
    sent = done.json()["server"]
    items = _get(server, f"/preprod-evals/{sent['runId']}/items")["items"]
    [error] = [t["error"] for item in items for t in item["trials"] if t["error"]]
    note = " … [cut here: 18,011 characters in all; the local import keeps them all]"
    assert len(error) == 10_000 and error.endswith(note)
    assert trace.startswith(error.removesuffix(note))
    [local] = [t.error for t in saved_trials(database_url, done.json()["id"]) if t.error]
    assert local == trace
