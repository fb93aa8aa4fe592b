"""The pages as an attacker and a clumsy user try them, on both databases: ids no page knows
(odd ones too), share tokens that are malformed or revoked, huge and NUL-holding query
parameters, a key of the wrong role, and no session at all. Each answers a page of its own (not
found, gone, what was wrong) or the sign-in redirect — never a server error, never data."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.web.conftest import Site
from tests.web.pages import csrf_of, one, page, sign_in, twin
from tests.web.sweeps import Sweeps, enable_sharing

pytestmark = pytest.mark.xdist_group("web-hostile-input")

HUGE = "9" * 5_000
ODD_IDS = ["unknown", "%00", "x%00y", "%C3%A9t%C3%A9", "%E2%80%AE", "a" * 190, "%25", "-1"]
"""Path segments that name nothing: as typed, a NUL, non-ASCII, a bidi control, long."""
SLASHES = ["%2F", "..%2F..", "x%2F..%2F..%2F..%2Fdatasets", "%5C%5Cevil.example"]
"""Encoded slashes (and backslashes): a segment that reads as a path."""


def get_routes(site: Site, sweeps: Sweeps, bad: str) -> list[str]:
    """Every page route that takes an id, with `bad` in place of one id at a time."""
    sc = site.scenario
    arm = sweeps.arms["broken"]
    return [
        f"/ui/preprod-evals/{bad}",
        f"/ui/preprod-evals/{bad}/live",
        f"/ui/datasets/{bad}",
        f"/ui/datasets/{bad}/versions/{bad}",
        f"/ui/datasets/{sc.dataset_id}/versions/{bad}",
        f"/ui/sessions/{bad}",
        f"/ui/sweeps/msw-{bad}",
        f"/ui/sweeps/{bad}",
        f"/ui/sweeps/msw-{bad}/live",
        f"/ui/sweeps/msw-{bad}/compare",
        f"/ui/sweeps/msw-{bad}/frontier.svg",
        f"/ui/sweeps/msw-{bad}/arms/{arm}/regressions",
        f"/ui/sweeps/{sweeps.priced}/arms/{bad}/regressions",
        f"/ui/compare/trajectory?run={bad}&baseline={sc.runner_v1}&item={sc.item_ids[0]}",
        f"/ui/compare/trajectory?run={sc.runner_v2}&baseline={sc.runner_v1}&item={bad}",
    ]


def post_routes(site: Site, sweeps: Sweeps, bad: str) -> list[str]:
    sc = site.scenario
    return [
        f"/ui/preprod-evals/{bad}/cancel",
        f"/ui/datasets/{bad}/versions/{bad}/golden",
        f"/ui/datasets/{sc.dataset_id}/versions/{bad}/golden",
        f"/ui/sweeps/msw-{bad}/cancel",
        f"/ui/sweeps/msw-{bad}/share",
    ]


def not_found_or_inside(r: httpx.Response, site: Site) -> None:
    """404, or a redirect to a page path of this server (a trailing slash dropped)."""
    if r.status_code == 404:
        is_page(r, 404)
        return
    assert r.status_code in (307, 308), (r.request.url, r.status_code, r.text[:300])
    assert r.headers["location"].startswith(f"{site.url}/ui/"), r.headers["location"]


def is_page(r: httpx.Response, status: int) -> None:
    assert r.status_code == status, (r.request.url, r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("text/html"), r.request.url
    assert "Content-Security-Policy" in r.headers


@pytest.mark.parametrize("bad", ODD_IDS)
async def test_an_id_no_page_knows_is_not_found(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient, bad: str
) -> None:
    for path in get_routes(site, sweeps, bad):
        r = await pages.get(path)
        if "%00" in path.partition("?")[2]:  # an id in the query: refused, naming it
            is_page(r, 422)
            assert "holds a NUL character" in r.text
        else:
            is_page(r, 404)
            assert "Not found" in r.text
    token = csrf_of(await page(pages, "/ui/sweeps"))
    await enable_sharing(pages, site.admin, True)
    try:
        for path in post_routes(site, sweeps, bad):
            r = await pages.post(path, data={"csrf_token": token})
            is_page(r, 404)
    finally:
        await enable_sharing(pages, site.admin, False)


async def test_an_encoded_slash_in_an_id_finds_nothing_and_leads_nowhere_else(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    for bad in SLASHES:
        for path in get_routes(site, sweeps, bad):
            not_found_or_inside(await pages.get(path), site)


@pytest.mark.parametrize(
    "token", ["not-a-token", "%00", "a%00b", "x" * 5_000, "%E2%80%AE", "%FF", *SLASHES]
)
async def test_a_share_token_neens_never_made_is_not_found(
    site: Site, anonymous: httpx.AsyncClient, token: str
) -> None:
    not_found_or_inside(await anonymous.get(f"/ui/share/{token}"), site)


async def test_a_revoked_share_link_is_gone(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    bearer = {"Authorization": f"Bearer {site.admin.key}"}
    await enable_sharing(pages, site.admin, True)
    try:
        r = await pages.post(
            "/share-links",
            json={"resourceType": "sweep_decision", "resourceId": sweeps.priced},
            headers=bearer,
        )
        assert r.status_code == 201, r.text
        made = r.json()
        token = made["url"].rsplit("/", 1)[1]
        is_page(await anonymous.get(f"/ui/share/{token}"), 200)
        r = await pages.post(f"/share-links/{made['id']}/revoke", headers=bearer)
        assert r.status_code == 200, r.text
        gone = await anonymous.get(f"/ui/share/{token}")
        is_page(gone, 410)
        assert "Model selection" not in gone.text
    finally:
        await enable_sharing(pages, site.admin, False)


BAD_BARS = [
    *[HUGE, "1" + "0" * 400, "1e309", "nan", "inf", "-0.5", "1.5", "0.5%00", "%00", "½"],
    *["0.1_0", "%D9%A0.%D9%A5", "0.%EF%BC%95", "1e-1"],  # an underscore, ٠.٥, 0.５, an exponent
]
BAD_ARMS = ["%00", "msa-%00", "msa-" + "x" * 5_000, "msa-unknown", "%E2%80%AE"]


async def test_bar_and_baseline_arm_that_make_no_sense_are_refused_naming_them(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    base = f"/ui/sweeps/{sweeps.priced}"
    for path in (f"{base}/compare", f"{base}/frontier.svg"):
        for bar in BAD_BARS:
            r = await pages.get(f"{path}?bar={bar}")
            is_page(r, 422)
            assert "bar" in r.text
        for arm in BAD_ARMS:
            r = await pages.get(f"{path}?baselineArm={arm}")
            is_page(r, 422)
            assert "baselineArm" in r.text
    regressions = f"{base}/arms/{sweeps.arms['broken']}/regressions"
    for arm in BAD_ARMS:
        r = await pages.get(f"{regressions}?baselineArm={arm}")
        is_page(r, 422)
        assert "baselineArm" in r.text
    # Another sweep's arm is no arm of this one.
    void = await twin(pages, site.admin, f"/model-sweeps/{sweeps.void}")
    r = await pages.get(f"{base}/compare", params={"baselineArm": void["arms"][0]["id"]})
    is_page(r, 422)
    assert "baselineArm" in r.text


async def test_a_bar_of_minus_zero_is_shown_as_zero(
    site: Site, sweeps: Sweeps, pages: httpx.AsyncClient
) -> None:
    html = await page(pages, f"/ui/sweeps/{sweeps.priced}/compare", bar="-0")
    bar = one(html, "bar.value")
    assert bar.value == 0 and bar.text == "bar 0%"
    assert 'name="bar" type="number"' in html and 'value="0.0"' in html
    assert "-0.0" not in html and "bar -0%" not in html and "bar=-0" not in html
    r = await pages.get(f"/ui/sweeps/{sweeps.priced}/frontier.svg", params={"bar": "-0"})
    assert r.status_code == 200 and "bar -0%" not in r.text and "bar 0%" in r.text


@pytest.mark.parametrize(
    ("field", "typed"),
    [
        ("max_regressions", "1_0"),
        ("max_regressions", "٣"),
        ("min_pass_rate", "0.7_5"),
        ("min_pass_rate", "٠.٥"),
        ("max_avg_usd", "1e-3"),
        ("max_delta_pct", "１0"),
    ],
)
async def test_the_new_run_form_takes_numbers_in_ascii_digits_only(
    site: Site, pages: httpx.AsyncClient, field: str, typed: str
) -> None:
    before = await twin(pages, site.admin, "/preprod-evals", limit=500)
    form = await page(pages, "/ui/preprod-evals/new")
    judges = (await twin(pages, site.admin, "/judges"))["judges"]
    r = await pages.post(
        "/ui/preprod-evals",
        data={
            "csrf_token": csrf_of(form),
            "version_label": "typed-label",
            "dataset": site.scenario.dataset_id,
            "runner_mode": "runner",
            "judge": next(j["id"] for j in judges if j["isPrimary"]),
            "baseline": "none",
            field: typed,
        },
    )
    is_page(r, 422)
    assert f"{field} must be" in r.text and typed in r.text
    after = await twin(pages, site.admin, "/preprod-evals", limit=500)
    assert [run["id"] for run in after["runs"]] == [run["id"] for run in before["runs"]]


QUERIES = [
    "/ui/preprod-evals?cursor=",
    "/ui/sweeps?cursor=",
    "/ui/sessions?cursor=",
    "/ui/sessions?agent_name=",
    "/ui/sessions?eval_run_id=",
    "/ui/insights?cursor=",
    "/ui/insights?run_id=",
    "/ui/compare?runs=",
    "/ui/compare?baseline=",
    "/ui/preprod-evals/{run}?cursor=",
    "/ui/datasets/{dataset}/versions/{version}?cursor=",
]


@pytest.mark.parametrize("value", ["%00", "a%00b", HUGE, "%FF", "%E2%80%AE"])
async def test_query_parameters_with_nul_huge_or_broken_text_never_fail_the_server(
    site: Site, pages: httpx.AsyncClient, value: str
) -> None:
    sc = site.scenario
    for query in QUERIES:
        path = query.format(run=sc.good_run, dataset=sc.dataset_id, version=sc.version_id)
        r = await pages.get(path + value)
        assert r.status_code in (200, 404, 422), (path, value, r.status_code, r.text[:300])
        is_page(r, r.status_code)


def every_page(site: Site, sweeps: Sweeps) -> list[str]:
    sc = site.scenario
    arm = sweeps.arms["broken"]
    return [
        "/ui/preprod-evals",
        "/ui/preprod-evals/new",
        f"/ui/preprod-evals/{sc.worse_run}",
        f"/ui/preprod-evals/{sc.worse_run}/live",
        f"/ui/compare?runs={sc.good_run}&runs={sc.worse_run}",
        f"/ui/compare/trajectory?run={sc.runner_v2}&baseline={sc.runner_v1}&item={sc.item_ids[0]}",
        "/ui/sweeps",
        f"/ui/sweeps/{sweeps.priced}",
        f"/ui/sweeps/{sweeps.priced}/live",
        f"/ui/sweeps/{sweeps.priced}/compare",
        f"/ui/sweeps/{sweeps.priced}/frontier.svg",
        f"/ui/sweeps/{sweeps.priced}/arms/{arm}/regressions",
        "/ui/datasets",
        f"/ui/datasets/{sc.dataset_id}",
        f"/ui/datasets/{sc.dataset_id}/versions/{sc.version_id}",
        "/ui/sessions",
        f"/ui/sessions/{sc.session_id}",
        "/ui/insights",
    ]


async def test_an_ingest_key_reads_every_page_the_api_lets_it_read(
    site: Site, sweeps: Sweeps, anonymous: httpx.AsyncClient
) -> None:
    await sign_in(anonymous, site.ingest)
    for path in every_page(site, sweeps):
        r = await anonymous.get(path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
    # Sharing is an admin's setting: an ingest key makes no link while it is off.
    token = csrf_of(await page(anonymous, "/ui/sweeps"))
    r = await anonymous.post(f"/ui/sweeps/{sweeps.priced}/share", data={"csrf_token": token})
    is_page(r, 403)


async def test_signed_out_every_page_leads_to_sign_in_and_shows_no_data(
    site: Site, sweeps: Sweeps, anonymous: httpx.AsyncClient
) -> None:
    secrets: list[Any] = [
        sweeps.priced,
        *sweeps.arms.values(),
        site.scenario.worse_run,
        site.scenario.dataset_id,
        "Model selection",
        "Where is order 17",
    ]
    for path in every_page(site, sweeps):
        r = await anonymous.get(path)
        assert r.status_code == 303, (path, r.status_code)
        assert r.headers["location"].startswith("/ui/sign-in?next=%2Fui%2F"), path
        assert r.text == "", path
    for path in [
        f"/ui/preprod-evals/{site.scenario.worse_run}/cancel",
        f"/ui/sweeps/{sweeps.priced}/cancel",
        f"/ui/sweeps/{sweeps.priced}/share",
        "/ui/preprod-evals",
        f"/ui/datasets/{site.scenario.dataset_id}/versions/{site.scenario.version_id}/golden",
    ]:
        r = await anonymous.post(path, data={"csrf_token": "x"})
        assert (r.status_code, r.headers["location"]) == (303, "/ui/sign-in"), path
        assert not any(secret in r.text for secret in secrets)


def numbered(chars: int, tag: str) -> str:
    """`chars` characters in which every position is told apart: `tag` and a count, repeated."""
    text = "".join(f"{tag}{n:07d} " for n in range(chars // (len(tag) + 8) + 1))
    return text[:chars]


async def test_a_huge_prompt_is_cut_on_the_pages_that_show_it_and_whole_in_the_api(
    site: Site, pages: httpx.AsyncClient
) -> None:
    """A 300,000-character prompt and answer: the sessions list reads and shows 2,000 of each,
    linking to the session; the session's page and a dataset's items show 10,000 and say how
    many there are. The API answers every character."""
    auth = {"Authorization": f"Bearer {site.admin.key}"}
    prompt, answer = numbered(300_000, "in"), numbered(300_000, "out")
    session_id = "huge-prompt"
    r = await pages.post(
        "/sessions",
        headers=auth,
        json={
            "session": {"id": session_id, "agent_name": "support-agent"},
            "spans": [
                {
                    "id": "root",
                    "name": "agent.run",
                    "kind": "agent",
                    "input": prompt,
                    "output": answer,
                    "start_time": "2026-11-30T09:00:00Z",
                    "end_time": "2026-11-30T09:00:01Z",
                }
            ],
        },
    )
    assert r.status_code == 200, r.text

    listed = await page(pages, "/ui/sessions")
    assert len(listed) < 100_000, len(listed)
    for text in (prompt, answer):
        assert text[:2_000] in listed and text[:2_001] not in listed
    assert (
        listed.count(
            f'The first 2,000 characters are shown: <a href="/ui/sessions/{session_id}">more</a>.'
        )
        == 2
    )

    detail = await page(pages, f"/ui/sessions/{session_id}")
    assert len(detail) < 100_000, len(detail)
    for text in (prompt, answer):
        assert text[:10_000] in detail and text[:10_001] not in detail
    note = "The first 10,000 of 300,000 characters are shown; the API returns the whole text."
    assert note in detail

    stored = await twin(pages, site.admin, f"/sessions/{session_id}")
    assert (stored["input"], stored["output"]) == (prompt, answer)
    [first, *_] = (await twin(pages, site.admin, "/sessions", limit=1))["sessions"]
    assert (first["id"], first["input"], first["output"]) == (session_id, prompt, answer)

    dataset = (await pages.post("/datasets", headers=auth, json={"name": "huge"})).json()
    version = await pages.post(
        f"/datasets/{dataset['id']}/versions",
        headers=auth,
        json={"items": [{"input": prompt, "expected_output": answer}]},
    )
    assert version.status_code in (200, 201), version.text
    items = await page(pages, f"/ui/datasets/{dataset['id']}/versions/{version.json()['id']}")
    assert len(items) < 100_000, len(items)
    assert items.count(note) == 2 and prompt[:10_001] not in items
