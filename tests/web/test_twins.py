"""Every page shows what its JSON twin answers: each page is fetched with a signed-in browser
session and its twin with the same key as a Bearer, over the same data, and every value the page
shows is held against the JSON — the value it carries and the text a person reads."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import pytest

from neens.web import formats
from tests.web.conftest import Site
from tests.web.pages import csrf_of, one, page, same, shown, twin

pytestmark = pytest.mark.xdist_group("web-twins")


async def test_the_run_page_shows_the_run_its_gate_comparison_metrics_and_items(
    site: Site, pages: httpx.AsyncClient
) -> None:
    sc = site.scenario
    for run_id in (sc.worse_run, sc.flaky_run, sc.good_run, sc.runner_v2):
        html = await page(pages, f"/ui/preprod-evals/{run_id}")
        run = await twin(pages, site.admin, f"/preprod-evals/{run_id}")
        gate = await twin(pages, site.admin, f"/preprod-evals/{run_id}/gate")
        comparison = await twin(pages, site.admin, f"/preprod-evals/{run_id}/comparison")
        metrics = (await twin(pages, site.admin, f"/preprod-evals/{run_id}/metrics"))["metrics"]
        items = (await twin(pages, site.admin, f"/preprod-evals/{run_id}/items"))["items"]

        same(one(html, "model"), run["model"])
        assert (run["model"] or "Model not recorded") in one(html, "model").text
        same(one(html, "status"), run["status"])
        assert formats.words(run["status"]) in one(html, "status").text
        same(one(html, "itemCount"), run["itemCount"])
        for status, n in run["counts"].items():
            same(one(html, f"counts.{status}"), n, formats.count(n))

        same(one(html, "passed"), gate["passed"])
        same(one(html, "regressions"), gate["regressions"])
        same(one(html, "passRate"), gate["passRate"], formats.percent(gate["passRate"]))
        assert [s.text for s in shown(html, "reasons[]")] == gate["reasons"]
        for rule in gate.get("costRules", []):
            same(one(html, "status", rule=rule["rule"]), rule["status"])
            same(one(html, "observed", rule=rule["rule"]), rule["observed"])

        for side in ("candidate", "baseline"):
            cohort = comparison[side]
            if cohort is None:
                assert shown(html, "avgCostUsd", cohort=side) == []
                continue
            same(one(html, "avgCostUsd", cohort=side), cohort["avgCostUsd"])
            assert one(html, "avgCostUsd", cohort=side).text == formats.usd(cohort["avgCostUsd"])
            same(one(html, "pricedSessions", cohort=side), cohort["pricedSessions"])
            same(one(html, "sessions", cohort=side), cohort["sessions"])
            same(one(html, "avgLatencyMs", cohort=side), cohort["avgLatencyMs"])
            same(one(html, "avgStepCount", cohort=side), cohort["avgStepCount"])
        for field in ("costUsdDelta", "latencyMsDelta", "stepCountDelta"):
            same(one(html, field, cohort="delta"), comparison[field])
        same(one(html, "regressions.length"), len(comparison["regressions"]))
        same(one(html, "newPasses.length"), len(comparison["newPasses"]))

        assert [s.scope["data-metric"] for s in shown(html, "avgScore", metric=...)] == [
            m["judgeId"] for m in metrics
        ]
        for m in metrics:
            for field in ("avgScore", "passRate", "sessionsScored", "sessionsUnscored"):
                same(one(html, field, metric=m["judgeId"]), m[field])

        rows = {row["itemId"]: row for row in comparison["rows"]}
        assert [s.scope["data-item"] for s in shown(html, "status", item=...)] == [
            i["item_id"] for i in items
        ]
        for item in items:
            at = {"item": item["item_id"]}
            same(one(html, "status", **at), item["status"])
            same(one(html, "score", **at), item["score"])
            same(one(html, "passed", **at), item["passed"])
            same(one(html, "baseline_passed", **at), item["baseline_passed"])
            same(one(html, "session_id", **at), item["session_id"])
            same(one(html, "error", **at), item["error"])
            output = rows[item["item_id"]]["output"]
            assert one(html, "output", **at).text == (
                " ".join(output.split()) if output is not None else "no output captured"
            )
        captured = next(i["session_id"] for i in items if i["session_id"])
        trace = await page(pages, f"/ui/sessions/{quote(captured, safe='')}")
        assert captured in trace


async def test_the_run_list_shows_the_runs_the_list_answers(
    site: Site, pages: httpx.AsyncClient
) -> None:
    html = await page(pages, "/ui/preprod-evals")
    runs = (await twin(pages, site.admin, "/preprod-evals", limit=50))["runs"]
    assert [s.scope["data-run"] for s in shown(html, "status", run=...)] == [r["id"] for r in runs]
    for run in runs:
        at = {"run": run["id"]}
        same(one(html, "status", **at), run["status"])
        same(one(html, "model", **at), run["model"])
        same(one(html, "itemCount", **at), run["itemCount"])
        same(one(html, "counts.scored", **at), run["counts"]["scored"])
        same(one(html, "counts.error", **at), run["counts"]["error"])


async def test_dataset_pages_show_the_datasets_versions_and_items(
    site: Site, pages: httpx.AsyncClient
) -> None:
    sc = site.scenario
    html = await page(pages, "/ui/datasets")
    datasets = (await twin(pages, site.admin, "/datasets"))["datasets"]
    assert [s.scope["data-dataset"] for s in shown(html, "versionCount", dataset=...)] == [
        d["id"] for d in datasets
    ]
    for d in datasets:
        same(one(html, "versionCount", dataset=d["id"]), d["versionCount"])
        same(one(html, "goldenVersionId", dataset=d["id"]), d["goldenVersionId"])

    assert {d["versionCount"] for d in datasets} >= {0, 1, 2}
    for d in datasets:
        html = await page(pages, f"/ui/datasets/{d['id']}")
        versions = (await twin(pages, site.admin, f"/datasets/{d['id']}/versions"))["versions"]
        assert [s.scope["data-version"] for s in shown(html, "itemCount", version=...)] == [
            v["id"] for v in versions
        ]
        for v in versions:
            same(one(html, "itemCount", version=v["id"]), v["itemCount"])
            same(one(html, "golden", version=v["id"]), v["golden"])
            assert ("golden" in one(html, "golden", version=v["id"]).text) is v["golden"]

    html = await page(pages, f"/ui/datasets/{sc.dataset_id}/versions/{sc.version_id}")
    items = await twin(
        pages, site.admin, f"/datasets/{sc.dataset_id}/versions/{sc.version_id}/items", limit=100
    )
    assert [s.scope["data-item"] for s in shown(html, "position", item=...)] == [
        i["id"] for i in items["items"]
    ]
    for item in items["items"]:
        same(one(html, "position", item=item["id"]), item["position"])
        assert one(html, "input", item=item["id"]).text == item["input"]
        expected = item["expectedOutput"]
        assert one(html, "expectedOutput", item=item["id"]).text == (
            expected if expected is not None else "no expected output"
        )


async def test_session_pages_show_the_list_and_the_span_tree(
    site: Site, pages: httpx.AsyncClient
) -> None:
    html = await page(pages, "/ui/sessions")
    sessions = (await twin(pages, site.admin, "/sessions", limit=50))["sessions"]
    assert [s.scope["data-session"] for s in shown(html, "latencyMs", session=...)] == [
        s["id"] for s in sessions
    ]
    for s in sessions:
        at = {"session": s["id"]}
        for field in ("latencyMs", "stepCount", "costUsd", "inputTokens", "outputTokens"):
            same(one(html, field, **at), s[field])
        assert one(html, "latencyMs", **at).text == formats.ms(s["latencyMs"])
        cost = one(html, "costUsd", **at).text
        assert cost == (
            formats.usd(s["costUsd"])
            if s["costUsd"] is not None
            else formats.words(s["costStatus"])
        )

    session_id = site.scenario.session_id
    html = await page(pages, f"/ui/sessions/{session_id}")
    detail = await twin(pages, site.admin, f"/sessions/{session_id}")
    for field in ("latencyMs", "stepCount", "spanCount", "inputTokens", "outputTokens", "costUsd"):
        same(one(html, field), detail[field])
    assert detail["costUsd"] is None and one(html, "costUsd").text == "unpriced"

    def walk(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [x for span in spans for x in [span, *walk(span["children"])]]

    spans = walk(detail["spans"])
    assert [s.scope["data-span"] for s in shown(html, "durationMs", span=...)] == [
        s["spanId"] for s in spans
    ]
    for span in spans:
        same(one(html, "durationMs", span=span["spanId"]), span["durationMs"])
        same(one(html, "costUsd", span=span["spanId"]), span["costUsd"])
    assert [s["costUsd"] is not None for s in spans if s["kind"] == "llm"] == [True, False]


async def test_compare_versions_shows_the_comparison_and_the_trajectory_diff(
    site: Site, pages: httpx.AsyncClient
) -> None:
    sc = site.scenario
    runs = [sc.good_run, sc.worse_run, sc.flaky_run]
    html = await page(pages, "/ui/compare", runs=runs, baseline=sc.good_run)
    versions = await twin(
        pages, site.admin, "/preprod-compare", runs=",".join(runs), baseline=sc.good_run
    )
    summary_fields = (
        "passRate",
        "avgCostUsd",
        "pricedSessions",
        "sessions",
        "avgLatencyMs",
        "avgStepCount",
        "regressionsVsBaseline",
        "newPassesVsBaseline",
        "model",
    )
    for run in versions["runs"]:
        for field in summary_fields:
            same(one(html, field, run=run["runId"]), run[field])
        assert one(html, "passRate", run=run["runId"]).text == formats.percent(run["passRate"])
    assert versions["runs"][1]["regressionsVsBaseline"] == 1
    for row in versions["rows"]:
        for cell in row["cells"]:
            at = {"item": row["itemId"], "run": cell["runId"]}
            same(one(html, "passed", **at), cell["passed"])
            same(one(html, "score", **at), cell["score"])
            output = cell["output"]
            assert one(html, "output", **at).text == (
                " ".join(output.split()) if output is not None else "no output captured"
            )

    item = sc.item_ids[0]
    html = await page(
        pages, "/ui/compare/trajectory", run=sc.runner_v2, baseline=sc.runner_v1, item=item
    )
    diff = await twin(
        pages,
        site.admin,
        "/preprod-compare/trajectory",
        run=sc.runner_v2,
        baseline=sc.runner_v1,
        item=item,
    )
    assert [s.value for s in shown(html, "status", step=...)] == [
        d["status"] for d in diff["steps"]
    ]
    assert [d["status"] for d in diff["steps"]] == ["removed", "same"]


async def test_the_insights_feed_shows_the_insights_the_list_answers(
    site: Site, pages: httpx.AsyncClient
) -> None:
    html = await page(pages, "/ui/insights")
    insights = (await twin(pages, site.admin, "/insights", limit=50))["insights"]
    assert insights, "the regression raised no insight"
    assert [(s.scope["data-insight"], s.text) for s in shown(html, "title", insight=...)] == [
        (i["id"], i["title"]) for i in insights
    ]


async def test_the_new_run_form_offers_the_projects_datasets_judges_and_connections(
    site: Site, pages: httpx.AsyncClient
) -> None:
    html = await page(pages, "/ui/preprod-evals/new")
    datasets = (await twin(pages, site.admin, "/datasets"))["datasets"]
    judges = (await twin(pages, site.admin, "/judges"))["judges"]
    connections = (await twin(pages, site.admin, "/agent-connections"))["agentConnections"]
    for d in datasets:
        assert f'value="{d["id"]}"' in html or d["goldenVersionId"] is None
    for j in judges:
        offered = f'name="judge" value="{j["id"]}"' in html
        assert offered == (j["enabled"] and j["type"] != "classifier")
    primary = next(j for j in judges if j["isPrimary"])
    assert f'name="judge" value="{primary["id"]}" checked' in html
    newest = connections[-1]
    assert f'<option value="{newest["id"]}" selected>' in html
    assert 'name="runner_mode" value="push" checked' in html


async def test_the_new_run_form_creates_the_run_post_preprod_evals_creates(
    site: Site, pages: httpx.AsyncClient
) -> None:
    sc = site.scenario
    form = await page(pages, "/ui/preprod-evals/new")
    connections = (await twin(pages, site.admin, "/agent-connections"))["agentConnections"]
    judges = (await twin(pages, site.admin, "/judges"))["judges"]
    primary = next(j["id"] for j in judges if j["isPrimary"])
    r = await pages.post(
        "/ui/preprod-evals",
        data={
            "csrf_token": csrf_of(form),
            "version_label": "from-the-form",
            "dataset": sc.dataset_id,
            "runner_mode": "runner",
            "judge": primary,
            "baseline": f"run:{sc.good_run}",
            "max_regressions": "0",
            "min_pass_rate": "0.75",
        },
    )
    assert r.status_code == 303, r.text
    run_id = r.headers["location"].rsplit("/", 1)[1]
    made = await twin(pages, site.admin, f"/preprod-evals/{run_id}")
    r = await pages.post(
        "/preprod-evals",
        json={
            "dataset_id": sc.dataset_id,
            "version_label": "from-the-form",
            "judge_deployment_ids": [primary],
            "baseline": {"kind": "preprod_run", "value": sc.good_run},
            "gate": {"max_regressions": 0, "min_pass_rate": 0.75},
        },
        headers={"Authorization": f"Bearer {site.admin.key}"},
    )
    assert r.status_code == 201, r.text
    by_api = r.json()
    different = {"id", "createdAt", "startedAt", "completedAt", "waitingFor", "status", "counts"}
    assert {k: v for k, v in made.items() if k not in different} == {
        k: v for k, v in by_api.items() if k not in different
    }
    assert made["model"] is None and made["runnerMode"] == "runner"

    push = await pages.post(
        "/ui/preprod-evals",
        data={
            "csrf_token": csrf_of(form),
            "version_label": "pushed-from-the-form",
            "dataset": f"{sc.dataset_id}:{sc.first_version_id}",
            "runner_mode": "push",
            "agent_connection_id": connections[0]["id"],
            "judge": primary,
            "baseline": "none",
        },
    )
    assert push.status_code == 303, push.text
    pushed = await twin(pages, site.admin, push.headers["location"].removeprefix("/ui"))
    assert pushed["model"] == connections[0]["model"]
    assert (pushed["datasetVersionId"], pushed["itemCount"]) == (sc.first_version_id, 2)
    assert pushed["baseline"] is None


async def test_a_refused_form_says_why_keeps_what_was_typed_and_creates_nothing(
    site: Site, pages: httpx.AsyncClient
) -> None:
    before = await twin(pages, site.admin, "/preprod-evals", limit=500)
    form = await page(pages, "/ui/preprod-evals/new")
    r = await pages.post(
        "/ui/preprod-evals",
        data={
            "csrf_token": csrf_of(form),
            "version_label": "typed-label",
            "dataset": site.scenario.dataset_id,
            "runner_mode": "runner",
            "judge": "jdg_nope",
            "min_pass_rate": "1.5",
        },
    )
    assert r.status_code == 422
    assert "gate.min_pass_rate must be a number between 0 and 1" in r.text
    assert 'value="typed-label"' in r.text
    assert 'id="min_pass_rate" name="min_pass_rate" value="1.5"' in r.text
    r = await pages.post(
        "/ui/preprod-evals",
        data={"csrf_token": csrf_of(form), "version_label": "", "dataset": "", "judge": "x"},
    )
    assert r.status_code == 422 and "pick a dataset" in r.text
    after = await twin(pages, site.admin, "/preprod-evals", limit=500)
    # Nothing was created (the runs already there may still be moving on, so ids are compared).
    assert [run["id"] for run in after["runs"]] == [run["id"] for run in before["runs"]]
