"""Every operation of the OpenAPI document, fuzzed by schemathesis against a live server on each
database, with an admin key and with an ingest key: no answer may be a 5xx, an undocumented
status, or a body that breaks the documented schema.

The database is seeded with one resource of each kind, and schema-valid path parameters are
pointed at them, so updates and reads reach real rows instead of stopping at 404. The server runs
without job workers: nothing fuzzed is ever called (agent, judge and sink URLs stay untouched).
A bounded number of examples per operation keeps the run well under two minutes per database;
the examples come from a fixed seed so a failure reproduces (set NEENS_FUZZ_SEED to try others,
NEENS_FUZZ_EXAMPLES for more examples per operation).

Every schemathesis check runs; the one that sends schema-valid requests expects
2xx/401/403/404/409 and also accepts 422, because a body can satisfy the schema and still break
a rule no schema states (a dataset without a golden version, a judge whose type has no such
field) — the 422 then names the rule.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation

from neens.api.app import create_app
from neens.settings import Settings
from neens.store.db import Database
from neens.store.keys import create_key
from tests.conftest import TEST_SECRET_KEY, _pg_admin, _pg_url_for
from tests.support.live import serve_in_thread
from tests.support.openapi import document as openapi_document

EXAMPLES_PER_OPERATION = int(os.environ.get("NEENS_FUZZ_EXAMPLES", "12"))
"""Kept small so `make test` stays quick; raise NEENS_FUZZ_EXAMPLES for a deeper run."""

FRAMING_HEADERS = frozenset(
    {"transfer-encoding", "content-length", "connection", "host", "upgrade", "te", "trailer"}
)
"""Hop-by-hop and framing headers: a garbage value makes the HTTP parser refuse the request."""
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP token (RFC 9110); a header named otherwise is refused by the HTTP parser too."""

SEED = int(os.environ.get("NEENS_FUZZ_SEED", "7"))
"""Fixed so `make test` is a stable gate; set NEENS_FUZZ_SEED to explore other examples."""

CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": SEED,
        "checks": {
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "401", "403", "404", "409", "422"]
            },
        },
    }
)
schema = schemathesis.openapi.from_dict(openapi_document(), config=CONFIG)


@dataclass(frozen=True)
class Target:
    url: str
    admin: dict[str, str]
    ingest: dict[str, str]
    ids: dict[str, str]
    """A real resource for each path parameter name."""


def _seed(url: str, headers: dict[str, str]) -> dict[str, str]:
    """One resource of each kind, created through the API, by path parameter name."""
    with httpx.Client(base_url=url, headers=headers, timeout=30) as c:

        def post(path: str, body: dict[str, object]) -> dict[str, object]:
            r = c.post(path, json=body)
            assert r.is_success, (path, r.text)
            out: dict[str, object] = r.json()
            return out

        ds = str(post("/datasets", {"name": "fuzz"})["id"])
        items = [{"input": "2+2?", "expected_output": "4"}]
        version = str(post(f"/datasets/{ds}/versions", {"items": items, "golden": True})["id"])
        item = c.get(f"/datasets/{ds}/versions/{version}/items").json()["items"][0]["id"]
        judge = post("/judges", {"name": "exact", "type": "managed", "check": "exact_match"})
        connection = post("/agent-connections", {"name": "agent", "url": "http://127.0.0.1:9/a"})
        sink = post("/notification-sinks", {"name": "sink", "url": "http://127.0.0.1:9/hook"})
        session = post(
            "/sessions",
            {"session": {"id": "s-1"}, "spans": [{"id": "1", "name": "a", "input": "2+2?"}]},
        )
        mode = post("/failure-modes", {"name": "wrong sum"})
        post("/sessions/s-1/failure-modes", {"failureModeId": mode["id"], "confirmed": True})
        suite = post("/stress-test-suites", {"name": "sums", "failureModeIds": [mode["id"]]})
        run = post("/preprod-evals", {"dataset_id": ds, "version_label": "v1"})
        other = post("/agent-connections", {"name": "other", "url": "http://127.0.0.1:9/b"})
        arms = [
            {"label": "a", "agentConnectionId": connection["id"]},
            {"label": "b", "agentConnectionId": other["id"]},
        ]
        sweep = post(
            "/model-sweeps", {"datasetId": ds, "versionLabel": "v1", "passK": 1, "arms": arms}
        )
        assert c.put("/model-pricing/m-1", json={"inputPerMTokUsd": 1, "outputPerMTokUsd": 2})
        return {
            "dataset_id": ds,
            "version_id": version,
            "item_id": str(item),
            "judge_id": str(judge["id"]),
            "connection_id": str(connection["id"]),
            "sink_id": str(sink["id"]),
            "session_id": str(session["sessionId"]),
            "run_id": str(run["id"]),
            "sweep_id": str(sweep["id"]),
            "suite_id": str(suite["id"]),
            "model": "m-1",
        }


async def _keys(url: str) -> tuple[str, str]:
    db = Database(url)
    try:
        admin = await create_key(db, company="Acme", project="Fuzzed agent", role="admin")
        ingest = await create_key(db, company="Acme", project="Fuzzed agent", role="ingest")
        return admin.key, ingest.key
    finally:
        await db.dispose()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    """One live server and database per dialect, shared by every operation's examples."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path_factory.mktemp("fuzz") / "neens.db"
        shutil.copyfile(template, path)
        url, name = f"sqlite+aiosqlite:///{path}", None
    else:
        template_name: str = request.getfixturevalue("pg_template")
        name = f"neens_fuzz_{os.getpid()}"
        with _pg_admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_name}"')
        url = _pg_url_for(name)
    admin_key, ingest_key = asyncio.run(_keys(url))
    settings = Settings(
        database_url=url,
        migrate_on_start=False,
        workers_in_process=False,
        secret_keys=TEST_SECRET_KEY,
    )
    admin = {"Authorization": f"Bearer {admin_key}"}
    try:
        with serve_in_thread(create_app(settings)) as server:
            ids = _seed(server.url, admin)
            yield Target(server.url, admin, {"Authorization": f"Bearer {ingest_key}"}, ids)
    finally:
        if name is not None:
            with _pg_admin() as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@schema.parametrize()
# OTLP protobuf bodies are not generated (tests/ingest sends real ones); the JSON form is fuzzed.
@pytest.mark.filterwarnings("ignore:Skipped test cases with unsupported payload media types")
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_a_server_error_or_breaks_its_schema(
    case: schemathesis.Case, target: Target
) -> None:
    if case.meta is None or not case.meta.generation.mode.is_negative:
        for name in case.path_parameters:
            if name in target.ids:
                case.path_parameters[name] = target.ids[name]
    if case.headers:
        # Headers that frame the HTTP message itself, or whose names are not HTTP tokens, are the
        # HTTP server's to refuse (a plain 400 before any route runs), not an answer of Neens'
        # API: they are not sent.
        for name in [
            n
            for n in case.headers
            if n.strip().lower() in FRAMING_HEADERS or not HEADER_NAME.fullmatch(n)
        ]:
            del case.headers[name]
    if case.meta is not None and case.meta.is_negative_at(ParameterLocation.HEADER):
        # The example drops or breaks a header on purpose (the key among them): send it as is.
        case.call_and_validate(base_url=target.url, timeout=30)
        return
    case.call_and_validate(base_url=target.url, headers=target.admin, timeout=30)
    case.call_and_validate(base_url=target.url, headers=target.ingest, timeout=30)
