"""The destination policy: metadata and link-local addresses never, loopback and private ones
only while NEENS_ALLOW_PRIVATE_DESTINATIONS is on; no redirects; bounded error text; sink
headers checked like connection headers."""

from __future__ import annotations

import asyncio
import ipaddress

import httpx
import pytest
from sqlalchemy import select, text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from neens.demo.endpoints import ChatModel, serve_one
from neens.domain.judges import JudgeCase
from neens.engine.destinations import classify, excerpt
from neens.engine.llm_judge import LlmEndpoint, judge_with_llm
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.api.test_connection_changes import header_recorder
from tests.conftest import auth
from tests.support.live import app_client, serve_in_thread
from tests.support.preprod import create_run, golden_dataset, items_of, wait_for_run

REFUSED_URLS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/",
    "http://[::ffff:169.254.169.254]/",
    "http://100.100.100.200/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://0.0.0.0:8000/",
    "http://[fe80::1]/",
]


@pytest.mark.parametrize(
    ("address", "verdict"),
    [
        ("169.254.169.254", "refused"),
        ("169.254.1.1", "refused"),
        ("fd00:ec2::254", "refused"),
        ("::ffff:169.254.169.254", "refused"),
        ("0.0.0.0", "refused"),
        ("224.0.0.1", "refused"),
        ("127.0.0.1", "private"),
        ("::1", "private"),
        ("10.1.2.3", "private"),
        ("192.168.1.1", "private"),
        ("fd12::1", "private"),
        ("100.64.0.1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("8.8.8.8", "public"),
        ("2606:4700::1111", "public"),
    ],
)
def test_addresses_are_classified_by_the_policy(address: str, verdict: str) -> None:
    assert classify(ipaddress.ip_address(address)) == verdict


@pytest.mark.parametrize("url", REFUSED_URLS)
async def test_metadata_and_link_local_urls_are_refused_when_saved_naming_the_field(
    client: httpx.AsyncClient, admin_key: CreatedKey, url: str
) -> None:
    h = auth(admin_key)
    attempts = [
        ("/agent-connections", {"name": "a", "url": url}, "url"),
        ("/notification-sinks", {"name": "s", "url": url}, "url"),
        (
            "/judges",
            {"name": "j", "type": "llm_prompt", "template": "{output}",
             "endpoint": {"baseUrl": url, "model": "m"}},
            "endpoint.baseUrl",
        ),
    ]  # fmt: skip
    for path, body, field in attempts:
        r = await client.post(path, json=body, headers=h)
        assert r.status_code == 422, (path, r.text)
        assert r.json()["error"]["field"] == field
        assert "never sends requests there" in r.json()["error"]["message"]
    conn = await client.post(
        "/agent-connections", json={"name": "ok", "url": "http://127.0.0.1:9/a"}, headers=h
    )
    r = await client.patch(f"/agent-connections/{conn.json()['id']}", json={"url": url}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "url"


async def test_with_private_destinations_off_loopback_is_refused_when_saved_and_when_called(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    closed = settings.model_copy(update={"allow_private_destinations": False})
    with header_recorder() as (url, seen):
        async with app_client(settings, db) as client:
            dataset, _ = await golden_dataset(client, admin_key, [{"input": "q"}])
            body = {"name": "local", "url": url.replace("127.0.0.1", "localhost"),
                    "requestFormat": "neens"}  # fmt: skip
            r = await client.post("/agent-connections", json=body, headers=auth(admin_key))
            assert r.status_code == 201, "allowed while private destinations are on"
            by_name = r.json()["id"]
            r = await client.post(
                "/agent-connections",
                json={"name": "literal", "url": url, "requestFormat": "neens"},
                headers=auth(admin_key),
            )
            by_address = r.json()["id"]
        async with app_client(closed, db) as client:
            for bad in (url, body["url"]):
                r = await client.post(
                    "/agent-connections", json={"name": "x", "url": bad}, headers=auth(admin_key)
                )
                assert r.status_code == 422, r.text
                assert "NEENS_ALLOW_PRIVATE_DESTINATIONS" in r.json()["error"]["message"]
            errors = []
            for conn in (by_name, by_address):
                run = await create_run(
                    client, admin_key, dataset_id=dataset, runner_mode="push",
                    agent_connection_id=conn,
                )  # fmt: skip
                await wait_for_run(client, admin_key, run["id"])
                [item] = await items_of(client, admin_key, run["id"])
                assert item["status"] == "error"
                errors.append(item["error"])
    assert seen == [], "no request was sent"
    assert all("refused to call" in e for e in errors), errors
    assert "resolves to 127.0.0.1 is a loopback or private address" in errors[0]
    assert "127.0.0.1 is a loopback or private address" in errors[1]
    assert all("NEENS_ALLOW_PRIVATE_DESTINATIONS is off" in e for e in errors), errors


async def test_a_stored_metadata_url_is_refused_at_call_time_with_the_items_reason(
    client: httpx.AsyncClient, db: Database, admin_key: CreatedKey
) -> None:
    dataset, _ = await golden_dataset(client, admin_key, [{"input": "q"}])
    body = {"name": "a", "url": "http://127.0.0.1:9/a", "requestFormat": "neens"}
    conn = (await client.post("/agent-connections", json=body, headers=auth(admin_key))).json()
    async with db.write() as s:  # a row saved before the policy existed
        await s.execute(
            text("UPDATE agent_connections SET url = :u WHERE id = :id"),
            {"u": "http://169.254.169.254/latest/meta-data/", "id": conn["id"]},
        )
    run = await create_run(
        client, admin_key, dataset_id=dataset, runner_mode="push", agent_connection_id=conn["id"]
    )
    await wait_for_run(client, admin_key, run["id"])
    [item] = await items_of(client, admin_key, run["id"])
    assert item["status"] == "error"
    assert "169.254.169.254 is a link-local, cloud metadata or reserved address" in item["error"]


async def test_redirects_are_not_followed_and_reply_text_in_errors_is_bounded(
    client: httpx.AsyncClient, admin_key: CreatedKey
) -> None:
    hits: list[str] = []

    async def redirect(request: Request) -> Response:
        hits.append("redirect")
        return RedirectResponse("/target", status_code=307)

    async def target(request: Request) -> Response:
        hits.append("target")
        return Response('{"output": "stolen"}', media_type="application/json")

    async def noisy(request: Request) -> Response:
        return Response("\x1b[31mpage\r\n" + "x" * 5000, status_code=502)

    routes = [
        Route("/redirect", redirect, methods=["POST"]),
        Route("/target", target, methods=["POST"]),
        Route("/noisy", noisy, methods=["POST"]),
    ]
    dataset, _ = await golden_dataset(client, admin_key, [{"input": "q"}])
    with serve_in_thread(Starlette(routes=routes)) as server:
        errors = []
        for path in ("/redirect", "/noisy"):
            body = {"name": path, "url": server.url + path, "requestFormat": "neens"}
            r = await client.post("/agent-connections", json=body, headers=auth(admin_key))
            run = await create_run(
                client, admin_key, dataset_id=dataset, runner_mode="push",
                agent_connection_id=r.json()["id"], version_label=path,
            )  # fmt: skip
            await wait_for_run(client, admin_key, run["id"])
            [item] = await items_of(client, admin_key, run["id"])
            errors.append(item["error"])
    assert hits == ["redirect"]
    assert errors[0].startswith("endpoint answered HTTP 307")
    assert errors[1].startswith("endpoint answered HTTP 502: [31mpage")
    assert errors[1].endswith("… (truncated)")
    assert len(errors[1]) < 600
    assert not any(c in errors[1] for c in "\x1b\r\n")


def test_an_excerpt_keeps_short_text_and_marks_cut_text() -> None:
    assert excerpt("fine") == "fine"
    assert excerpt(b"a\x00b") == "a b"
    assert excerpt("y" * 501) == "y" * 500 + "… (truncated)"


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({"bad name": "v"}, "not a valid HTTP header name"),
        ({"X-Nul\x00": "v"}, "not a valid HTTP header name"),
        ({"X-Token": "a\r\nInjected: 1"}, "printable ASCII"),
        ({"X-Token": "caf\u00e9"}, "printable ASCII"),
        # HTTP has no such value: the sink's client refused to send it, failing every delivery.
        ({"X-Token": "   "}, "must not start or end with a space or tab"),
        ({"X-Token": "tok\t"}, "must not start or end with a space or tab"),
        ({"Host": "elsewhere"}, "set by Neens itself"),
    ],
)
async def test_sink_and_connection_headers_are_checked_alike(
    client: httpx.AsyncClient, admin_key: CreatedKey, headers: dict[str, str], says: str
) -> None:
    for path in ("/notification-sinks", "/agent-connections"):
        body = {"name": "n", "url": "http://127.0.0.1:9/h", "headers": headers}
        r = await client.post(path, json=body, headers=auth(admin_key))
        assert r.status_code == 422, (path, r.text)
        assert r.json()["error"]["field"] == "headers"
        assert says in r.json()["error"]["message"]


async def test_an_llm_judge_on_a_refused_destination_is_unscored_without_a_request() -> None:
    case = JudgeCase("q", "a", None)
    with serve_one(ChatModel('{"score": 1, "reason": "ok"}')) as server:
        closed = LlmEndpoint(base_url=server.base_url, model="m", api_key=None, allow_private=False)
        verdict = await judge_with_llm(closed, "{output}", case)
        assert server.calls == []
        assert verdict.unscored_reason == "judge_call_failed"
        assert "refused to call" in verdict.reason
        assert "loopback or private" in verdict.reason
        opened = LlmEndpoint(base_url=server.base_url, model="m", api_key=None)
        assert (await judge_with_llm(opened, "{output}", case)).score == 1


async def _settled_deliveries(
    client: httpx.AsyncClient, key: CreatedKey, sink_id: str
) -> list[dict[str, object]]:
    """The sink's deliveries once the first is no longer pending (or after 10 s)."""
    deliveries: list[dict[str, object]] = []
    for _ in range(200):
        r = await client.get(f"/notification-sinks/{sink_id}/deliveries", headers=auth(key))
        deliveries = r.json()["deliveries"]
        if deliveries and deliveries[0]["status"] != "pending":
            break
        await asyncio.sleep(0.05)
    return deliveries


async def test_a_sink_delivery_the_policy_refuses_fails_at_once_instead_of_retrying(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    from neens.store.insights import add_insight

    closed = settings.model_copy(update={"allow_private_destinations": False})
    with header_recorder() as (url, seen):
        async with app_client(settings, db) as client:
            r = await client.post(
                "/notification-sinks", json={"name": "local", "url": url}, headers=auth(admin_key)
            )
            assert r.status_code == 201, "allowed while private destinations are on"
            sink_id = r.json()["id"]
        async with app_client(closed, db) as client:
            async with db.write() as s:
                await add_insight(
                    s, admin_key.project_id, kind="k", title="t", run_id=None, details={}
                )
            deliveries = await _settled_deliveries(client, admin_key, sink_id)
    assert seen == [], "no request was sent"
    [delivery] = deliveries
    assert delivery["status"] == "failed"
    assert delivery["attempts"] == 1, "a refused destination is not retried"
    assert "refused to call" in str(delivery["lastError"])


async def test_a_sink_whose_stored_header_cannot_be_sent_fails_at_once(
    settings: Settings, db: Database, admin_key: CreatedKey
) -> None:
    """A header value saved before such values were refused (here, spaces only) makes a request
    the HTTP client refuses to send: the same on every attempt, so the delivery fails on the
    first, with the reason, instead of retrying."""
    from neens.store.insights import add_insight
    from neens.store.models import NotificationSink

    with header_recorder() as (url, seen):
        async with app_client(settings, db) as client:
            r = await client.post(
                "/notification-sinks",
                json={"name": "old", "url": url, "headers": {"X-Token": "t"}},
                headers=auth(admin_key),
            )
            assert r.status_code == 201, r.text
            sink_id = r.json()["id"]
            async with db.write() as s:
                sink = await s.scalar(
                    select(NotificationSink).where(NotificationSink.id == sink_id)
                )
                assert sink is not None
                sink.headers = db.secrets.seal_headers({"X-Token": "   "})
                await add_insight(
                    s, admin_key.project_id, kind="k", title="t", run_id=None, details={}
                )
            deliveries = await _settled_deliveries(client, admin_key, sink_id)
    assert seen == []
    [delivery] = deliveries
    assert delivery["status"] == "failed"
    assert delivery["attempts"] == 1
    assert "LocalProtocolError" in str(delivery["lastError"])
