"""The sweep pages show what their JSON twins answer, on both databases: the list, a sweep's
detail, Compare arms (verdict, bar, leaderboard, per agent, frontier table), the regression
drill-down and the public share page, each held value by value against the API's JSON."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from neens.demo.endpoints import Agent, serve
from neens.web import formats
from tests.api.test_sweeps import RIGHT
from tests.web.conftest import Site
from tests.web.pages import csrf_of, one, page, same, shown, sign_in, twin
from tests.web.sweeps import Sweeps, enable_sharing, slow_sweep

pytestmark = pytest.mark.xdist_group("web-sweep-twins")


async def test_the_sweep_list_shows_the_sweeps_the_list_answers(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    html = await page(pages, "/ui/sweeps")
    listed = (await twin(pages, site.admin, "/model-sweeps", limit=50))["sweeps"]
    assert [s.scope["data-sweep"] for s in shown(html, "status", sweep=...)] == [
        s["id"] for s in listed
    ]
    assert {sweeps.priced, sweeps.void} <= {s["id"] for s in listed}
    for sweep in listed:
        at = {"sweep": sweep["id"]}
        same(one(html, "status", **at), sweep["status"])
        assert formats.words(sweep["status"]) in one(html, "status", **at).text
        same(one(html, "arms.length", **at), len(sweep["arms"]))
        same(one(html, "passK", **at), sweep["passK"])
        same(one(html, "itemCount", **at), sweep["itemCount"])
        same(one(html, "spentUsd", **at), sweep["spentUsd"], formats.usd(sweep["spentUsd"]))


async def test_a_sweeps_page_shows_each_arm_as_the_detail_answers(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    for sweep_id in (sweeps.priced, sweeps.void):
        html = await page(pages, f"/ui/sweeps/{sweep_id}")
        live = await page(pages, f"/ui/sweeps/{sweep_id}/live")
        sweep = await twin(pages, site.admin, f"/model-sweeps/{sweep_id}")
        for shown_html in (html, live):
            same(one(shown_html, "status"), sweep["status"])
            same(one(shown_html, "spentUsd"), sweep["spentUsd"])
            assert [s.scope["data-arm"] for s in shown(shown_html, "status", arm=...)] == [
                a["id"] for a in sweep["arms"]
            ]
            for arm in sweep["arms"]:
                at = {"arm": arm["id"]}
                same(one(shown_html, "status", **at), arm["status"])
                same(one(shown_html, "model", **at), arm["model"])
                same(one(shown_html, "modelProvider", **at), arm["modelProvider"])
                same(one(shown_html, "passed", **at), arm["passed"])
                same(one(shown_html, "greenRuns", **at), arm["greenRuns"])
                for field, value in arm["progress"].items():
                    same(one(shown_html, f"progress.{field}", **at), value, formats.count(value))
        if sweep["status"] == "void":
            assert [s.text for s in shown(html, "divergedArms[]")] == sweep["divergedArms"]
            assert one(html, "voidReason").text == sweep["voidReason"]
            assert "Compare arms" not in html
        else:
            assert shown(html, "divergedArms[]") == []
            assert f"/ui/sweeps/{sweep_id}/compare" in html
            # Every arm runs on a connection of provider "simulated", and says so.
            assert {arm["modelProvider"] for arm in sweep["arms"]} == {"simulated"}
            assert html.count('data-simulated="true"') == len(sweep["arms"])


def check_arm(html: str, arm: dict[str, Any], **scope: Any) -> None:
    at = {"arm": arm["armId"], **scope}
    for field in ("n", "flakyItems", "rate", "costPerCaseUsd"):
        same(one(html, field, **at), arm[field])
    assert one(html, "rate", **at).text == formats.percent(arm["rate"])
    assert one(html, "costPerCaseUsd", **at).text == formats.usd(arm["costPerCaseUsd"])


async def test_compare_arms_shows_the_comparison_as_the_api_answers(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    path = f"/ui/sweeps/{sweeps.priced}/compare"
    for params in ({}, {"bar": "0.95"}, {"baselineArm": sweeps.arms["mini"]}):
        html = await page(pages, path, **params)
        c = await twin(pages, site.admin, f"/model-sweeps/{sweeps.priced}/comparison", **params)
        assert c["comparable"] is True
        same(one(html, "verdict.sentence"), c["verdict"]["sentence"], c["verdict"]["sentence"])
        same(one(html, "bar.value"), c["bar"]["value"])
        assert one(html, "bar.value").text == f"bar {formats.percent_short(c['bar']['value'])}"
        same(one(html, "bar.source"), c["bar"]["source"])
        same(one(html, "baselineArmId"), c["baselineArmId"])
        # The leaderboard in the API's order, the unranked arms after it.
        rows = [s.scope["data-arm"] for s in shown(html, "rank", arm=...)]
        assert rows[: len(c["leaderboard"])] == c["leaderboard"]
        assert sorted(rows) == sorted(a["armId"] for a in c["arms"])
        for arm in c["arms"]:
            check_arm(html, arm)
            at = {"arm": arm["armId"]}
            same(one(html, "rank", **at), arm["rank"])
            same(one(html, "passed", **at), arm["passed"])
            same(one(html, "clearsBar", **at), arm["clearsBar"])
            if arm["isBaseline"]:
                assert shown(html, "regressions", **at) == []
            else:
                same(one(html, "regressions", **at), arm["regressions"])
                same(one(html, "costDeltaPct", **at), arm["costDeltaPct"])
            if arm["notDistinguishable"]:
                same(one(html, "notDistinguishable", **at), arm["notDistinguishable"])
        # Per agent, Unattributed included, each with its verdict and arms.
        assert [s.scope["data-agent"] for s in shown(html, "verdict.sentence", agent=...)] == [
            a["label"] for a in c["agents"]
        ]
        assert "Unattributed" in [a["label"] for a in c["agents"]]
        for agent in c["agents"]:
            same(one(html, "verdict.sentence", agent=agent["label"]), agent["verdict"]["sentence"])
            same(one(html, "items", agent=agent["label"]), agent["items"])
            for arm in agent["arms"]:
                check_arm(html, arm, agent=agent["label"])
                same(one(html, "rank", agent=agent["label"], arm=arm["armId"]), arm["rank"])
        # The frontier: the plotted arms with their numbers, the unpriced arm listed, not drawn.
        f = c["frontier"]
        assert [s.scope["data-point"] for s in shown(html, "onFrontier", point=...)] == [
            p["armId"] for p in f["points"]
        ]
        for p in f["points"]:
            for field in ("costPerCaseUsd", "rate", "wilsonLow", "wilsonHigh", "n", "onFrontier"):
                same(one(html, field, point=p["armId"]), p[field])
            assert bool(shown(html, "highlighted", point=p["armId"])) == p["highlighted"]
        assert [s.value for s in shown(html, "unpricedArmIds[]")] == f["unpricedArmIds"]
        assert f["unpricedArmIds"] == [sweeps.arms["self-host"]]
        assert [s.value for s in shown(html, "noDataArmIds[]")] == f["noDataArmIds"]
        assert f"/ui/sweeps/{sweeps.priced}/frontier.svg" in html


async def test_a_void_sweeps_compare_page_ranks_nothing_and_draws_no_frontier(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    html = await page(pages, f"/ui/sweeps/{sweeps.void}/compare")
    c = await twin(pages, site.admin, f"/model-sweeps/{sweeps.void}/comparison")
    sweep = await twin(pages, site.admin, f"/model-sweeps/{sweeps.void}")
    assert c["comparable"] is False and c["frontier"] is None
    assert [s.text for s in shown(html, "divergedArms[]")] == sweep["divergedArms"] != []
    same(one(html, "verdict.sentence"), c["verdict"]["sentence"])
    for arm in c["arms"]:
        check_arm(html, arm)  # each arm's own numbers stay
    for absent in ("rank", "regressions", "clearsBar", "onFrontier", "baselineArmId"):
        assert shown(html, absent, arm=...) == [] and shown(html, absent) == [], absent
    assert "frontier.svg" not in html and "Cost–quality frontier" not in html
    assert "Leaderboard" not in html
    r = await pages.get(f"/ui/sweeps/{sweeps.void}/frontier.svg")
    assert r.status_code == 404 and "no frontier" in r.text


async def test_the_frontier_chart_is_an_svg_of_its_own_with_a_policy_for_its_styles(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    r = await pages.get(f"/ui/sweeps/{sweeps.priced}/frontier.svg", params={"bar": "0.75"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("image/svg+xml")
    assert r.headers["content-security-policy"] == "default-src 'none'; style-src 'unsafe-inline'"
    svg = r.text
    assert svg.startswith("<svg") and "bar 75%" in svg
    for label in ("incumbent", "mini", "broken"):
        assert f">{label}" in svg
    assert "self-host" not in svg, "an unpriced arm is never plotted"
    assert "msa-" not in svg
    async with httpx.AsyncClient(base_url=site.url, timeout=30) as anonymous:
        r = await anonymous.get(f"/ui/sweeps/{sweeps.priced}/frontier.svg")
    assert r.status_code == 303, "the chart needs the same sign-in as its page"


async def test_the_drill_down_shows_where_an_arm_breaks_as_the_api_answers(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    broken = sweeps.arms["broken"]
    compare = await page(pages, f"/ui/sweeps/{sweeps.priced}/compare")
    link = f"/ui/sweeps/{sweeps.priced}/arms/{broken}/regressions"
    assert f'href="{link}"' in compare, "the regression count opens the drill-down"
    html = await page(pages, link)
    r = await twin(
        pages, site.admin, f"/model-sweeps/{sweeps.priced}/arms/{broken}/regressions", limit=50
    )
    assert r["totalRegressions"] == 2
    same(one(html, "totalRegressions"), r["totalRegressions"])
    same(one(html, "newPasses"), r["newPasses"])
    same(one(html, "signal.kind"), r["signal"]["kind"])
    same(one(html, "baselineArmId"), r["baselineArmId"])
    same(one(html, "unclassified", mode=""), r["unclassified"])
    for m in r["failureModes"]:
        same(one(html, "count", mode=m["label"]), m["count"])
    assert [s.scope["data-item"] for s in shown(html, "failureMode", item=...)] == [
        i["itemId"] for i in r["items"]
    ]
    for item in r["items"]:
        at = {"item": item["itemId"]}
        same(one(html, "failureMode", **at), item["failureMode"])
        same(one(html, "baseline.passedRuns", **at), item["baseline"]["passedRuns"])
        same(one(html, "candidate.passedRuns", **at), item["candidate"]["passedRuns"])
        same(one(html, "candidate.scoredRuns", **at), item["candidate"]["scoredRuns"])
        same(one(html, "candidate.score", **at), item["candidate"]["score"])
        assert one(html, "candidate.answer", **at).text == item["candidate"]["answer"]
        assert one(html, "candidate.reason", **at).text == " ".join(
            item["candidate"]["reason"].split()
        )
        assert [s.value for s in shown(html, "candidate.sessionIds[]", **at)] == item["candidate"][
            "sessionIds"
        ]
        assert item["input"] in html and item["expectedOutput"] in html
    # A void sweep has no drill-down: the API's 409, as a page.
    void = await twin(pages, site.admin, f"/model-sweeps/{sweeps.void}")
    r2 = await pages.get(f"/ui/sweeps/{sweeps.void}/arms/{void['arms'][1]['id']}/regressions")
    assert r2.status_code == 409 and "void" in r2.text


async def test_share_is_hidden_while_off_and_its_public_page_is_redacted_as_its_json(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    compare = f"/ui/sweeps/{sweeps.priced}/compare"
    await enable_sharing(pages, site.admin, False)
    html = await page(pages, compare)
    assert "Share (redacted)" not in html and "/share" not in html
    form = {"csrf_token": csrf_of(html)}
    refused = await pages.post(f"/ui/sweeps/{sweeps.priced}/share", data=form)
    assert refused.status_code == 403, "off, a link cannot be made from the page either"

    await enable_sharing(pages, site.admin, True)
    try:
        html = await page(pages, compare)
        assert "Share (redacted)" in html
        made = await pages.post(f"/ui/sweeps/{sweeps.priced}/share", data=form)
        assert made.status_code == 200, made.text
        [page_url] = re.findall(r'id="share-url" class="wide" readonly value="([^"]+)"', made.text)
        token = page_url.rsplit("/", 1)[1]
        assert page_url == f"{site.url}/ui/share/{token}"
        assert f'value="{site.url}/share/{token}"' in made.text
        async with httpx.AsyncClient(base_url=site.url, timeout=30) as anonymous:
            public = await anonymous.get(f"/ui/share/{token}")
            shared = (await anonymous.get(f"/share/{token}")).json()
            assert public.status_code == 200 and "Sign out" not in public.text
            text = public.text
            same(one(text, "verdict.sentence"), shared["verdict"]["sentence"])
            same(one(text, "bar.value"), shared["bar"]["value"])
            for arm in shared["arms"]:
                for field in ("rate", "n", "flakyItems", "costPerCaseUsd", "rank", "model"):
                    same(one(text, field, arm=arm["label"]), arm[field])
            # Redacted as the JSON: no internal id, no prompt, no answer.
            for secret in (sweeps.priced, *sweeps.arms.values(), "question 1", "answer 1"):
                assert secret not in text, secret
            assert "msa-" not in text and "msw-" not in text and "ppr_" not in text
            assert 'name="robots" content="noindex' in text
            # An unknown link is 404; once sharing is off, 410: as pages.
            assert (await anonymous.get("/ui/share/not-a-token")).status_code == 404
            await enable_sharing(pages, site.admin, False)
            gone = await anonymous.get(f"/ui/share/{token}")
            assert gone.status_code == 410 and "Gone" in gone.text
    finally:
        await enable_sharing(pages, site.admin, False)


async def test_a_void_share_page_names_the_diverged_arms_and_ranks_nothing(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    await enable_sharing(pages, site.admin, True)
    try:
        r = await pages.post(
            "/share-links",
            json={"resourceType": "sweep_decision", "resourceId": sweeps.void},
            headers={"Authorization": f"Bearer {site.admin.key}"},
        )
        token = r.json()["url"].rsplit("/", 1)[1]
        async with httpx.AsyncClient(base_url=site.url, timeout=30) as anonymous:
            html = await page(anonymous, f"/ui/share/{token}")
            shared = (await anonymous.get(f"/share/{token}")).json()
        assert [s.text for s in shown(html, "void.divergedArms[]")] == shared["void"][
            "divergedArms"
        ]
        assert shown(html, "rank", arm=...) == [] and "Cost–quality frontier" not in html
    finally:
        await enable_sharing(pages, site.admin, False)


async def test_another_projects_sweeps_are_not_found_and_pages_need_sign_in(
    site: Site, sweeps: Sweeps
) -> None:
    paths = [
        f"/ui/sweeps/{sweeps.priced}",
        f"/ui/sweeps/{sweeps.priced}/live",
        f"/ui/sweeps/{sweeps.priced}/compare",
        f"/ui/sweeps/{sweeps.priced}/frontier.svg",
        f"/ui/sweeps/{sweeps.priced}/arms/{sweeps.arms['broken']}/regressions",
    ]
    async with httpx.AsyncClient(base_url=site.url, timeout=30) as other:
        for path in paths:
            r = await other.get(path)
            assert r.status_code == 303 and r.headers["location"].startswith("/ui/sign-in"), path
        await sign_in(other, site.other)
        for path in paths:
            assert (await other.get(path)).status_code == 404, path
        assert sweeps.priced not in await page(other, "/ui/sweeps")


async def test_cancel_sweep_on_its_page_needs_the_form_token_this_site_and_the_project(
    site: Site, pages: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    agent = Agent(RIGHT, latency_s=2.0)
    with serve(agent) as server:
        sweep_id = await slow_sweep(pages, site.admin, server.url(agent.path))
        html = await page(pages, f"/ui/sweeps/{sweep_id}")
        action = f"/ui/sweeps/{sweep_id}/cancel"
        assert f'action="{action}"' in html
        token = csrf_of(html)
        await sign_in(anonymous, site.other)
        foreign_token = csrf_of(await page(anonymous, "/ui/sweeps"))
        refused = [
            await pages.post(action, data={}),
            await pages.post(action, data={"csrf_token": "guess"}),
            await pages.post(action, data={"csrf_token": foreign_token}),
            await pages.post(
                action, data={"csrf_token": token}, headers={"Origin": "https://evil.example"}
            ),
            await pages.post(action, data={"csrf_token": token}, headers={"Origin": "null"}),
        ]
        assert [r.status_code for r in refused] == [403] * len(refused)
        why = ["posted as", "out of date", "out of date", "another site", "another site"]
        assert all(words in r.text for words, r in zip(why, refused, strict=True))
        # Another project's key, with a token of its own session, finds no such sweep.
        r = await anonymous.post(action, data={"csrf_token": foreign_token})
        assert r.status_code == 404 and "Followed live" not in r.text
        going = await twin(pages, site.admin, f"/model-sweeps/{sweep_id}")
        assert going["status"] == "running", "a refused form changed nothing"

        r = await pages.post(action, data={"csrf_token": token})
        assert (r.status_code, r.headers["location"]) == (303, f"/ui/sweeps/{sweep_id}")
        html = await page(pages, r.headers["location"])
    cancelled = await twin(pages, site.admin, f"/model-sweeps/{sweep_id}")
    assert (cancelled["status"], cancelled["reason"]) == ("cancelled", "cancelled by request")
    same(one(html, "status"), "cancelled")
    assert one(html, "reason").text == "cancelled by request"
    assert "Cancel sweep" not in html
