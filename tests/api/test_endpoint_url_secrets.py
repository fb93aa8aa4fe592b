"""An endpoint URL's credentials stay with whoever may edit the endpoint: item errors, unscored
judge reasons, the judges an ingest key reads and the worker's request log name an agent
connection or a judge endpoint without userinfo, query string or fragment."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from neens.demo.endpoints import ChatModel, agent_suite, refused_url, serve, serve_one
from neens.domain.judges import JudgeCase
from neens.engine.destinations import shown_url
from neens.engine.llm_judge import LlmEndpoint, judge_with_llm
from neens.engine.worker_process import shape_http_logs
from neens.store.db import Database
from neens.store.keys import CreatedKey
from neens.store.models import Judge
from tests.api.test_sweeps import create_sweep, wait_for_sweep
from tests.support.preprod import (
    auth,
    connection,
    create_run,
    golden_dataset,
    items_of,
    wait_for_run,
)

ITEMS = [{"input": "Where is order 17?", "expected_output": "Order 17 shipped on 3 June."}]
RIGHT = {ITEMS[0]["input"]: ITEMS[0]["expected_output"]}
SECRETS = ("usr", "PASSW0RD", "api_key", "SECRETQ4")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://usr:PASSW0RD@127.0.0.1:1/x?api_key=SECRETQ4", "http://127.0.0.1:1/x"),
        ("https://api.example.com/v1", "https://api.example.com/v1"),
        ("https://token@api.example.com", "https://api.example.com"),
        ("https://api.example.com?key=k#frag", "https://api.example.com"),
        ("http://u:p%40ss@[::1]:8080/a/@b#f", "http://[::1]:8080/a/@b"),
        ("http://a@b@host/p?q", "http://host/p"),
        ("not a url?x", "not a url"),
    ],
)
def test_a_url_is_shown_as_scheme_host_port_and_path(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def with_credentials(url: str) -> str:
    """`url` (`http://127.0.0.1:<port>/<path>`) with a user, a password and a query secret."""
    return url.replace("http://", "http://usr:PASSW0RD@") + "?api_key=SECRETQ4"


def assert_no_secret(text: str) -> None:
    leaked = [secret for secret in SECRETS if secret in text]
    assert not leaked, f"{leaked} in {text!r}"


async def push_errors(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey, url: str
) -> list[str]:
    """The item errors of a push run the ingest key starts and reads, on a connection to `url`
    the admin key makes."""
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    conn = await connection(client, admin_key, url, name="leak")
    run = await create_run(
        client, ingest_key, dataset_id=dataset_id, runner_mode="push", agent_connection_id=conn
    )
    done = await wait_for_run(client, ingest_key, run["id"])
    assert done["status"] == "failed"
    return [str(item["error"]) for item in await items_of(client, ingest_key, run["id"])]


async def test_an_unreachable_connection_errors_its_items_naming_it_without_credentials(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    dead = refused_url("/x")
    [error] = await push_errors(client, admin_key, ingest_key, with_credentials(dead))
    assert error.startswith(f"could not reach {dead}: "), error
    assert "Cannot connect to host" in error
    assert_no_secret(error)


@contextmanager
def malformed_http_server(reply: bytes) -> Iterator[str]:
    """A server that answers every request with `reply`, bytes that are not valid HTTP; yields
    its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.settimeout(0.05)
    stopping = threading.Event()

    def answer() -> None:
        while not stopping.is_set():
            try:
                peer, _ = sock.accept()
            except TimeoutError:
                continue
            with peer:
                peer.settimeout(1.0)
                try:
                    peer.recv(65536)
                    peer.sendall(reply)
                except OSError:
                    pass

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stopping.set()
        thread.join(5.0)
        sock.close()


async def test_a_malformed_reply_errors_its_item_without_the_url_the_http_client_quotes(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    """aiohttp names the request's URL, query string included, in an error about the reply."""
    with malformed_http_server(b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n") as base:
        [error] = await push_errors(client, admin_key, ingest_key, with_credentials(f"{base}/x"))
    assert error.startswith(f"could not reach {base}/x: "), error
    assert f"url='{base}/x'" in error, "the client's own words are kept, the URL shortened"
    assert_no_secret(error)


async def test_a_sweep_arm_on_an_unreachable_connection_errors_without_credentials(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    dataset_id, _ = await golden_dataset(client, admin_key, ITEMS)
    dead = [refused_url("/a"), refused_url("/b")]
    conns = [
        await connection(client, admin_key, with_credentials(url), name=f"arm-{n}")
        for n, url in enumerate(dead)
    ]
    sweep = await create_sweep(
        client,
        ingest_key,
        datasetId=dataset_id,
        arms=[
            {"label": "first", "agentConnectionId": conns[0]},
            {"label": "second", "agentConnectionId": conns[1]},
        ],
    )
    done = await wait_for_sweep(client, ingest_key, sweep["id"])
    assert done["status"] == "failed"
    assert_no_secret(str(done))
    for arm, url in zip(done["arms"], dead, strict=True):
        [run_id] = arm["runIds"]
        [item] = await items_of(client, ingest_key, run_id)
        assert item["error"].startswith(f"could not reach {url}: "), item["error"]
        assert_no_secret(item["error"])


async def llm_judge(
    client: httpx.AsyncClient, key: CreatedKey, base_url: str, api_key: str | None = "sk-hidden"
) -> dict[str, Any]:
    endpoint = {"baseUrl": base_url, "model": "judge-1"}
    if api_key is not None:  # not with a user and password in the URL: they would replace it
        endpoint["apiKey"] = api_key
    body = {
        "name": "faithfulness",
        "type": "llm_prompt",
        "template": "Answer: {output}",
        "endpoint": endpoint,
    }
    r = await client.post("/judges", json=body, headers=auth(key))
    assert r.status_code == 201, r.text
    judge: dict[str, Any] = r.json()
    return judge


async def test_an_ingest_key_reads_a_judge_base_url_without_credentials_an_admin_key_whole(
    client: httpx.AsyncClient, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    saved = "http://usr:PASSW0RD@127.0.0.1:9/v1?api_key=SECRETQ4"
    judge = await llm_judge(client, admin_key, saved, api_key=None)
    assert judge["config"]["endpoint"]["baseUrl"] == saved, "the admin who saved it sees it"
    reads = {
        "list": lambda h: client.get("/judges", headers=h),
        "one": lambda h: client.get(f"/judges/{judge['id']}", headers=h),
    }
    for how, read in reads.items():
        shown: dict[str, Any] = {}
        for key in (admin_key, ingest_key):
            r = await read(auth(key))
            assert r.status_code == 200, r.text
            found = r.json() if how == "one" else _by_id(r.json()["judges"], judge["id"])
            shown[key.role] = found["config"]["endpoint"]
            assert "sk-hidden" not in r.text
        assert shown["admin"]["baseUrl"] == saved, how
        assert shown["ingest"]["baseUrl"] == "http://127.0.0.1:9/v1", how
        assert shown["ingest"]["model"] == "judge-1", "the rest of the endpoint is shown"
        r = await read(auth(ingest_key))
        assert_no_secret(r.text)


def _by_id(judges: list[dict[str, Any]], judge_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(j for j in judges if j["id"] == judge_id)
    return found


async def test_a_judge_endpoint_refused_at_call_time_is_unscored_naming_it_without_credentials(
    client: httpx.AsyncClient, db: Database, admin_key: CreatedKey, ingest_key: CreatedKey
) -> None:
    judge = await llm_judge(client, admin_key, "http://127.0.0.1:9/v1")
    refused = "http://usr:PASSW0RD@169.254.169.254/v1?api_key=SECRETQ4"
    async with db.write() as s:  # a URL saved before the destination policy refused it
        row = await s.get(Judge, judge["id"])
        assert row is not None
        row.config = {**row.config, "endpoint": {**row.config["endpoint"], "baseUrl": refused}}
    dataset_id, _ = await golden_dataset(client, ingest_key, ITEMS)
    with serve(*agent_suite(RIGHT)) as agents:
        conn = await connection(client, admin_key, agents.url("/neens"))
        run = await create_run(
            client, ingest_key, dataset_id=dataset_id, runner_mode="push",
            agent_connection_id=conn, judge_deployment_ids=[judge["id"]],
        )  # fmt: skip
        await wait_for_run(client, ingest_key, run["id"])
    [item] = await items_of(client, ingest_key, run["id"])
    r = await client.get("/scores", params={"run_id": run["id"]}, headers=auth(ingest_key))
    [score] = r.json()["scores"]
    assert score["unscoredReason"] == "judge_call_failed"
    for text in (score["reason"], item["error"]):
        assert "refused to call http://169.254.169.254/v1: " in text, text
        assert_no_secret(text)


async def test_the_worker_logs_judge_requests_without_the_endpoints_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loggers = [logging.getLogger(name) for name in ("httpx", "httpx2")]
    kept = [list(logger.filters) for logger in loggers]
    shape_http_logs()
    try:
        with serve_one(ChatModel('{"score": 1, "reason": "ok"}')) as model:
            base_url = model.base_url
            endpoint = LlmEndpoint(base_url=with_credentials(base_url), model="m", api_key=None)
            with caplog.at_level(logging.DEBUG):
                await judge_with_llm(endpoint, "{output}", JudgeCase("q", "a", None))
    finally:
        for logger, filters in zip(loggers, kept, strict=True):
            logger.filters = filters
    requests = [r.getMessage() for r in caplog.records if r.name in ("httpx", "httpx2")]
    assert any(f"POST {base_url}" in line for line in requests), requests
    assert_no_secret("\n".join(requests))
