"""The pages as an attacker tries them: no session, a forged or stale one, a foreign form, a
redirect elsewhere after sign-in, another project's ids, a revoked key, markup in stored text."""

from __future__ import annotations

import re

import httpx
import pytest

from neens.api.app import create_app
from neens.secrets import generate_key
from neens.store.db import Database
from neens.store.keys import revoke_key
from neens.web import cookies
from tests.web.conftest import Site, make_key, run_async
from tests.web.pages import csrf_of, page, sign_in, twin
from tests.web.scenario import MARKUP, plant_markup

pytestmark = pytest.mark.xdist_group("web-security")


async def test_a_page_without_a_session_sends_to_sign_in_and_back(
    site: Site, anonymous: httpx.AsyncClient
) -> None:
    r = await anonymous.get(f"/ui/preprod-evals/{site.scenario.good_run}?cursor=x")
    assert r.status_code == 303
    assert r.headers["location"] == (
        f"/ui/sign-in?next=%2Fui%2Fpreprod-evals%2F{site.scenario.good_run}%3Fcursor%3Dx"
    )
    for path in ("/ui/datasets", "/ui/sessions", "/ui/insights", "/ui/compare", "/ui/"):
        r = await anonymous.get(path)
        assert r.status_code == 303, path
        assert r.headers["location"].startswith("/ui/sign-in") or path == "/ui/"
    r = await anonymous.post("/ui/sign-out", data={})
    assert (r.status_code, r.headers["location"]) == (303, "/ui/sign-in")


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/ui/datasets",
        "//evil.example/ui/datasets",
        "/\\evil.example",
        "\\\\evil.example",
        "javascript:alert(1)",
        "/ui\t/datasets",
        "/api-looking/path",
        "/datasets",
        "ui/datasets",
        "/ui/sign-in?next=//evil.example",
        "/ui/..//evil.example",
        "/ui/%2e%2e/%2e%2e//evil.example",
        "/ui/%252e%252e//evil.example",
        "/ui/..%2f%2fevil.example",
        "/ui/..%5c..%5cevil.example",
        "/ui/..\\/evil.example",
    ],
)
async def test_after_sign_in_next_only_ever_leads_to_a_page_here(
    site: Site, anonymous: httpx.AsyncClient, target: str
) -> None:
    form = await page(anonymous, "/ui/sign-in", next=target)
    r = await anonymous.post(
        "/ui/sign-in", data={"csrf_token": csrf_of(form), "key": site.admin.key, "next": target}
    )
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/preprod-evals"


async def test_next_leads_back_to_the_page_asked_for(
    site: Site, anonymous: httpx.AsyncClient
) -> None:
    target = f"/ui/datasets/{site.scenario.dataset_id}"
    form = await page(anonymous, "/ui/sign-in", next=target)
    assert f'name="next" value="{target}"' in form
    r = await anonymous.post(
        "/ui/sign-in", data={"csrf_token": csrf_of(form), "key": site.admin.key, "next": target}
    )
    assert (r.status_code, r.headers["location"]) == (303, target)


async def test_next_with_a_query_leads_back_as_it_was_asked(
    site: Site, anonymous: httpx.AsyncClient
) -> None:
    target = "/ui/sweeps/msw-01JB2X?x=1"
    form = await page(anonymous, "/ui/sign-in", next=target)
    r = await anonymous.post(
        "/ui/sign-in", data={"csrf_token": csrf_of(form), "key": site.admin.key, "next": target}
    )
    assert (r.status_code, r.headers["location"]) == (303, target)


async def test_sign_in_is_refused_without_the_token_of_its_own_form(
    site: Site, anonymous: httpx.AsyncClient
) -> None:
    """A foreign page cannot sign a browser in with the attacker's key."""
    r = await anonymous.post("/ui/sign-in", data={"key": site.other.key, "next": ""})
    assert r.status_code == 403
    async with httpx.AsyncClient(base_url=site.url, timeout=30) as attacker:
        stolen = csrf_of(await page(attacker, "/ui/sign-in"))
    await page(anonymous, "/ui/sign-in")
    r = await anonymous.post("/ui/sign-in", data={"csrf_token": stolen, "key": site.other.key})
    assert r.status_code == 403
    assert cookies.COOKIE not in r.headers.get("set-cookie", "")


async def test_a_form_posted_without_the_token_or_from_another_site_changes_nothing(
    site: Site, pages: httpx.AsyncClient
) -> None:
    sc = site.scenario
    action = f"/ui/datasets/{sc.dataset_id}/versions/{sc.first_version_id}/golden"
    token = csrf_of(await page(pages, f"/ui/datasets/{sc.dataset_id}"))
    refused = [
        await pages.post(action, data={}),
        await pages.post(action, data={"csrf_token": "guess"}),
        await pages.post(action, data={"csrf_token": "é" * 10}),
        await pages.post(
            action, data={"csrf_token": token}, headers={"Origin": "https://evil.example"}
        ),
        await pages.post(action, data={"csrf_token": token}, headers={"Origin": "null"}),
        await pages.post(action, json={"csrf_token": token}),
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    dataset = await twin(pages, site.admin, f"/datasets/{sc.dataset_id}")
    assert dataset["goldenVersionId"] == sc.version_id
    sign_out = await pages.post("/ui/sign-out", data={"csrf_token": "guess"})
    assert sign_out.status_code == 403
    assert (await pages.get("/ui/datasets")).status_code == 200


async def test_another_projects_ids_are_not_found_and_its_lists_are_empty(
    site: Site, anonymous: httpx.AsyncClient
) -> None:
    sc = site.scenario
    await sign_in(anonymous, site.other)
    for path in (
        f"/ui/preprod-evals/{sc.worse_run}",
        f"/ui/preprod-evals/{sc.worse_run}/live",
        f"/ui/datasets/{sc.dataset_id}",
        f"/ui/datasets/{sc.dataset_id}/versions/{sc.version_id}",
        f"/ui/sessions/{sc.session_id}",
        f"/ui/compare/trajectory?run={sc.runner_v2}&baseline={sc.runner_v1}&item={sc.item_ids[0]}",
    ):
        r = await anonymous.get(path)
        assert r.status_code == 404, path
        assert "support-golden" not in r.text and "Where is order 17" not in r.text
    r = await anonymous.get("/ui/compare", params={"runs": [sc.good_run, sc.worse_run]})
    assert r.status_code == 200 and "v1.5.0-rc1" not in r.text
    for path in (
        "/ui/preprod-evals",
        "/ui/preprod-evals/new",
        "/ui/compare",
        "/ui/datasets",
        "/ui/sessions",
        "/ui/insights",
    ):
        html = await page(anonymous, path)
        assert sc.good_run not in html and sc.dataset_id not in html, path
        assert "support-session-1" not in html
    token = csrf_of(await page(anonymous, "/ui/datasets"))
    r = await anonymous.post(
        f"/ui/datasets/{sc.dataset_id}/versions/{sc.first_version_id}/golden",
        data={"csrf_token": token},
    )
    assert r.status_code == 404
    r = await anonymous.post(f"/ui/preprod-evals/{sc.good_run}/cancel", data={"csrf_token": token})
    assert r.status_code == 404


async def test_a_revoked_key_is_signed_out_at_its_next_request(
    site: Site, anonymous: httpx.AsyncClient
) -> None:
    key = make_key(site.database_url, "ingest")
    await sign_in(anonymous, key)
    assert (await anonymous.get("/ui/datasets")).status_code == 200

    async def revoke() -> None:
        db = Database(site.database_url)
        try:
            assert await revoke_key(db, key.key_id)
        finally:
            await db.dispose()

    run_async(revoke())
    r = await anonymous.get("/ui/datasets")
    assert (r.status_code, r.headers["location"]) == (303, "/ui/sign-in?next=%2Fui%2Fdatasets")
    assert re.search(rf"{cookies.COOKIE}=\"?\"?;.*Max-Age=0", r.headers["set-cookie"])
    form = await page(anonymous, "/ui/sign-in")
    r = await anonymous.post("/ui/sign-in", data={"csrf_token": csrf_of(form), "key": key.key})
    assert r.status_code == 401 and "unknown or revoked" in r.text


async def test_the_cookie_is_signed_http_only_and_names_the_key_id_never_the_key(
    site: Site, anonymous: httpx.AsyncClient
) -> None:
    form = await page(anonymous, "/ui/sign-in")
    r = await anonymous.post(
        "/ui/sign-in", data={"csrf_token": csrf_of(form), "key": site.admin.key}
    )
    header = r.headers["set-cookie"]
    assert "HttpOnly" in header and "SameSite=lax" in header and "Path=/ui" in header
    value = anonymous.cookies[cookies.COOKIE]
    assert site.admin.key not in value and site.admin.key[8:] not in value
    keys = cookies_keys(site)
    session = cookies.decode(value, keys, __import__("time").time())
    assert session is not None and session.key_id == site.admin.key_id

    forged = cookies.encode(
        cookies.PageSession(site.other.key_id, session.csrf, session.issued_at),
        b"\x00" * 32,
    )
    payload_only = forged.split(".")[0] + "." + value.split(".")[1]
    for cookie in (forged, payload_only, value[:-2], "", "a.b"):
        anonymous.cookies.set(cookies.COOKIE, cookie, path="/ui")
        r = await anonymous.get("/ui/datasets")
        assert r.status_code == 303, cookie
        anonymous.cookies.clear()


def cookies_keys(site: Site) -> list[bytes]:
    from neens.secrets import load_secret_box

    return load_secret_box(site.settings).derived_keys(cookies.PURPOSE)


async def test_a_restart_keeps_the_session_and_another_secret_key_ends_it(
    site: Site, pages: httpx.AsyncClient
) -> None:
    cookie = pages.cookies[cookies.COOKIE]
    for settings, status in (
        (site.settings, 200),
        (site.settings.model_copy(update={"secret_keys": generate_key()}), 303),
        (
            site.settings.model_copy(
                update={"secret_keys": f"{generate_key()},{site.settings.secret_keys}"}
            ),
            200,
        ),
    ):
        db = Database(site.database_url)
        app = create_app(settings, database=db)
        try:
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url=site.url) as restarted:
                    restarted.cookies.set(cookies.COOKIE, cookie, path="/ui")
                    assert (await restarted.get("/ui/datasets")).status_code == status
        finally:
            await db.dispose()


async def test_the_cookie_is_no_key_to_the_api(site: Site, pages: httpx.AsyncClient) -> None:
    r = await pages.get("/datasets")
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "not_authenticated"


async def test_an_ingest_key_sees_what_the_api_lets_it_see(
    site: Site, anonymous: httpx.AsyncClient
) -> None:
    connections = (await twin(anonymous, site.admin, "/agent-connections"))["agentConnections"]
    await sign_in(anonymous, site.ingest)
    form = await page(anonymous, "/ui/preprod-evals/new")
    assert "ingest key" in form
    assert (
        '<input id="agent_connection_id"' in form and '<select id="agent_connection_id"' not in form
    )
    for conn in connections:
        assert conn["id"] not in form and conn["url"] not in form
    assert 'name="runner_mode" value="runner" checked' in form
    html = await page(anonymous, f"/ui/preprod-evals/{site.scenario.worse_run}")
    assert site.scenario.worse_run in html


async def test_stored_markup_is_printed_as_text(site: Site, pages: httpx.AsyncClient) -> None:
    planted = await plant_markup(pages, site.admin)
    escaped = "&lt;script&gt;alert(&#34;item&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    for path in (
        "/ui/datasets",
        f"/ui/datasets/{planted.dataset_id}",
        f"/ui/datasets/{planted.dataset_id}/versions/{planted.version_id}",
        "/ui/preprod-evals",
        f"/ui/preprod-evals/{planted.run_id}",
        f"/ui/preprod-evals/{planted.run_id}/live",
        f"/ui/compare?runs={planted.run_id}",
        "/ui/sessions",
        f"/ui/sessions/{planted.session_id}",
        "/ui/preprod-evals/new",
    ):
        html = await page(pages, path)
        assert MARKUP not in html and "<img" not in html, path
        assert escaped in html, path


async def test_pages_forbid_inline_scripts_and_framing(
    site: Site, pages: httpx.AsyncClient
) -> None:
    r = await pages.get("/ui/datasets")
    policy = r.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["cache-control"] == "no-store"
    assert "<script>" not in r.text  # the one script is a file


async def test_no_page_path_shadows_an_api_path(site: Site, anonymous: httpx.AsyncClient) -> None:
    schema = (await anonymous.get("/openapi.json")).json()
    assert schema["paths"], "no API paths"
    assert [p for p in schema["paths"] if p == "/ui" or p.startswith("/ui/")] == []
    r = await anonymous.get("/ui")
    assert (r.status_code, r.headers["location"]) == (308, "/ui/")
    r = await anonymous.get("/ui/no-such-page")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    r = await anonymous.get("/ui/static/neens.css")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/css")


@pytest.mark.parametrize(
    ("origin", "host", "accepted"),
    [
        (None, None, True),
        ("{url}", None, True),
        ("http://neens.example.com:80", "neens.example.com", True),
        ("http://neens.example.com", "neens.example.com:80", True),
        ("https://neens.example.com", "neens.example.com", True),
        ("http://neens.example.com:8080", "neens.example.com", False),
        ("http://evil.example", None, False),
        ("{url}.evil.example", None, False),
        ("null", None, False),
        ("file://", None, False),
    ],
)
async def test_a_form_is_taken_only_from_this_servers_own_origin(
    site: Site, anonymous: httpx.AsyncClient, origin: str | None, host: str | None, accepted: bool
) -> None:
    await sign_in(anonymous, site.admin)
    token = csrf_of(await page(anonymous, "/ui/datasets"))
    headers = {}
    if origin is not None:
        headers["Origin"] = origin.format(url=site.url)
    if host is not None:
        headers["Host"] = host
    r = await anonymous.post("/ui/sign-out", data={"csrf_token": token}, headers=headers)
    assert r.status_code == (303 if accepted else 403)


async def test_signing_out_ends_the_session_for_every_copy_of_its_cookie(
    site: Site, anonymous: httpx.AsyncClient
) -> None:
    """The cookie is signed, not stored: without a record of the sign-out, a copy taken before
    (from a shared machine, a proxy log) kept reading and posting for the rest of its 12 hours."""
    await sign_in(anonymous, site.admin)
    token = csrf_of(await page(anonymous, "/ui/datasets"))
    async with httpx.AsyncClient(base_url=site.url, timeout=30) as copy:
        copy.cookies.update(anonymous.cookies)
        assert (await copy.get("/ui/datasets")).status_code == 200
        out = await anonymous.post("/ui/sign-out", data={"csrf_token": token})
        assert (out.status_code, out.headers["location"]) == (303, "/ui/sign-in")
        after = await copy.get("/ui/datasets")
        assert after.status_code == 303 and after.headers["location"].startswith("/ui/sign-in")
        sc = site.scenario
        action = f"/ui/datasets/{sc.dataset_id}/versions/{sc.first_version_id}/golden"
        posted = await copy.post(action, data={"csrf_token": token})
        assert posted.status_code in (303, 403) and "/ui/sign-in" in posted.headers.get(
            "location", "/ui/sign-in"
        )
        dataset = await twin(copy, site.admin, f"/datasets/{sc.dataset_id}")
        assert dataset["goldenVersionId"] == sc.version_id, "the copy changed nothing"
    await sign_in(anonymous, site.admin)  # a new session, with a new form token, works
    assert (await anonymous.get("/ui/datasets")).status_code == 200
