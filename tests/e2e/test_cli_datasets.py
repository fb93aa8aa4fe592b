"""`neens datasets push` against a live server, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from neens.api.app import create_app
from neens.settings import Settings
from neens.store.keys import CreatedKey
from tests.support.live import LiveServer, serve_in_thread

pytestmark = pytest.mark.e2e


def push(server: LiveServer, key: CreatedKey, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NEENS_BASE_URL": server.url, "NEENS_API_KEY": key.key}
    return subprocess.run(
        [sys.executable, "-m", "neens_eval", "datasets", "push", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_pushing_a_jsonl_file_creates_the_dataset_and_a_golden_version(
    live_server: LiveServer, key: CreatedKey, tmp_path: Path
) -> None:
    lines = [
        {"input": "Where is order 17?", "expected_output": "Shipped on 3 June."},
        {"input": "Remboursement ? — 🙂", "metadata": {"source": "ticket-4411"}},
        {"input": "x" * 200_000},
    ]
    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n", encoding="utf-8"
    )

    first = push(live_server, key, str(golden), "--name", "support-golden", "--golden", "--json")
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["createdDataset"] is True
    assert result["versionNumber"] == 1
    assert result["itemCount"] == 3
    assert result["golden"] is True

    second = push(live_server, key, str(golden), "--name", "support-golden", "--json")
    assert second.returncode == 0, second.stderr
    again = json.loads(second.stdout)
    assert again["createdDataset"] is False
    assert again["datasetId"] == result["datasetId"]
    assert again["versionNumber"] == 2

    headers = {"Authorization": f"Bearer {key.key}"}
    dataset = httpx.get(f"{live_server.url}/datasets/{result['datasetId']}", headers=headers)
    assert dataset.json()["goldenVersionId"] == result["versionId"]
    items = httpx.get(
        f"{live_server.url}/datasets/{result['datasetId']}/versions/{result['versionId']}/items",
        headers=headers,
    ).json()["items"]
    assert [i["input"] for i in items] == [line["input"] for line in lines]
    assert items[0]["expectedOutput"] == "Shipped on 3 June."
    assert items[1]["metadata"] == {"source": "ticket-4411"}


def test_text_the_server_cannot_store_names_the_line_and_creates_nothing(
    live_server: LiveServer, key: CreatedKey, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "fine"}\n{"input": "nul \\u0000 here"}\n', encoding="utf-8")
    result = push(live_server, key, str(bad), "--name", "ds")
    assert result.returncode == 2
    assert result.stderr == (
        f"neens: error: {bad}:2: input: contains a NUL character (\\x00) at offset 4; Neens "
        f"cannot store it, remove it\n"
    )
    headers = {"Authorization": f"Bearer {key.key}"}
    listed = httpx.get(f"{live_server.url}/datasets", headers=headers).json()["datasets"]
    assert listed == []  # checked before anything was sent: not even an empty dataset


def test_a_file_over_the_servers_size_limit_exits_2_at_once_saying_so(
    live_server: LiveServer, key: CreatedKey, tmp_path: Path
) -> None:
    big = tmp_path / "big.jsonl"
    line = json.dumps({"input": "x" * 900_000})
    big.write_text("\n".join([line] * 20) + "\n", encoding="utf-8")  # 18 MB, over 16 MiB

    started = time.monotonic()
    result = push(live_server, key, str(big), "--name", "big")

    assert result.returncode == 2, result.stderr
    assert time.monotonic() - started < 20  # not retried for the whole window
    # The server's /healthz tells its limit, so the file is refused before anything is sent.
    assert result.stderr == (
        f"neens: error: {big}: the upload is {sent_size(big)} bytes (18.0 MB), over the server's "
        f"request size limit (NEENS_MAX_REQUEST_BYTES) of 16777216 bytes (16.8 MB); nothing was "
        f"created; {SPLIT_HINT}\n"
    )
    assert datasets(live_server, key) == []


SMALL_LIMIT = 64 * 1024
SPLIT_HINT = (
    "split the file into smaller datasets (each push sends one whole version in one request), "
    "or ask the server's operator to raise NEENS_MAX_REQUEST_BYTES"
)


@pytest.fixture
def small_server(database_url: str) -> Iterator[LiveServer]:
    """`neens serve`'s app with NEENS_MAX_REQUEST_BYTES at 64 KiB, on the same database as `key`."""
    settings = Settings(
        database_url=database_url, migrate_on_start=False, max_request_bytes=SMALL_LIMIT
    )
    with serve_in_thread(create_app(settings)) as server:
        yield server


def datasets(server: LiveServer, key: CreatedKey) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key.key}"}
    listed: list[dict[str, Any]] = httpx.get(f"{server.url}/datasets", headers=headers).json()[
        "datasets"
    ]
    return listed


def items_file(path: Path, count: int, pad: int) -> Path:
    """`count` items whose inputs are `pad` characters long (some of them not ASCII)."""
    lines = [json.dumps({"input": f"{n:03d} Grüße 🙂 " + "x" * pad}) for n in range(count)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sent_size(path: Path) -> int:
    """The body `neens datasets push` sends for `path`, in bytes (json.dumps, UTF-8)."""
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return len(json.dumps({"items": items, "golden": False}, ensure_ascii=False).encode())


def test_healthz_tells_the_servers_request_size_limit(small_server: LiveServer) -> None:
    health = httpx.get(f"{small_server.url}/healthz")  # no key, as a load balancer probes it
    assert health.status_code == 200
    assert health.json()["maxRequestBytes"] == SMALL_LIMIT


def test_a_file_over_the_limit_creates_nothing_and_the_split_file_then_pushes(
    small_server: LiveServer, key: CreatedKey, tmp_path: Path
) -> None:
    big = items_file(tmp_path / "big.jsonl", 40, 2_000)
    size = sent_size(big)
    assert size > SMALL_LIMIT

    refused = push(small_server, key, str(big), "--name", "support-golden")

    assert refused.returncode == 2, refused.stderr
    assert refused.stdout == ""
    assert refused.stderr == (
        f"neens: error: {big}: the upload is {size} bytes, over the server's request size limit "
        f"(NEENS_MAX_REQUEST_BYTES) of {SMALL_LIMIT} bytes; nothing was created; {SPLIT_HINT}\n"
    )
    assert datasets(small_server, key) == []  # not even an empty dataset

    # Split as told: the first half is under the limit, and creates the dataset now.
    half = tmp_path / "half.jsonl"
    half.write_text("".join(big.read_text(encoding="utf-8").splitlines(True)[:20]), "utf-8")
    pushed = push(small_server, key, str(half), "--name", "support-golden", "--json")

    assert pushed.returncode == 0, pushed.stderr
    result = json.loads(pushed.stdout)
    assert (result["createdDataset"], result["versionNumber"], result["itemCount"]) == (True, 1, 20)
    assert [d["name"] for d in datasets(small_server, key)] == ["support-golden"]


def test_the_size_checked_is_the_size_the_server_counts(
    small_server: LiveServer, key: CreatedKey, tmp_path: Path
) -> None:
    """A body of exactly the limit is accepted by the server, so it must not be refused by the
    check; one byte more is refused before anything is created."""
    base = items_file(tmp_path / "base.jsonl", 20, 0)
    pad = (SMALL_LIMIT - sent_size(base)) // 20
    exact = items_file(tmp_path / "exact.jsonl", 20, pad)
    rest = SMALL_LIMIT - sent_size(exact)  # under 20: put it on the first item
    lines = exact.read_text(encoding="utf-8").splitlines(True)
    first = json.loads(lines[0])
    lines[0] = json.dumps({"input": first["input"] + "y" * rest}) + "\n"
    exact.write_text("".join(lines), encoding="utf-8")
    over = tmp_path / "over.jsonl"
    lines[0] = json.dumps({"input": first["input"] + "y" * (rest + 1)}) + "\n"
    over.write_text("".join(lines), encoding="utf-8")
    assert (sent_size(exact), sent_size(over)) == (SMALL_LIMIT, SMALL_LIMIT + 1)

    refused = push(small_server, key, str(over), "--name", "edge")
    assert refused.returncode == 2, refused.stderr
    assert f"the upload is {SMALL_LIMIT + 1} bytes, over" in refused.stderr
    assert datasets(small_server, key) == []

    accepted = push(small_server, key, str(exact), "--name", "edge", "--json")
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["itemCount"] == 20


@pytest.mark.parametrize("dialect", ["sqlite"], indirect=True)  # the CLI's check, not storage
def test_the_packed_typescript_cli_checks_the_limit_before_creating_anything(
    small_server: LiveServer, key: CreatedKey, tmp_path: Path
) -> None:
    """`npx neens-eval datasets-push` from the npm tarball (sdk/python/tests/
    typescript_package.py), against the same server: the same line as the Python CLI's, with
    the size of the body it sends (JSON.stringify, without json.dumps' spaces)."""
    binary = installed_typescript_bin(tmp_path)
    big = items_file(tmp_path / "big.jsonl", 40, 2_000)
    items = [json.loads(line) for line in big.read_text(encoding="utf-8").splitlines()]
    body = {"items": items, "golden": False}
    size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    env = {**os.environ, "NEENS_BASE_URL": small_server.url, "NEENS_API_KEY": key.key}

    refused = subprocess.run(
        [str(binary), "datasets-push", str(big), "--name", "support-golden"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )

    assert refused.returncode == 2, refused.stderr
    assert refused.stderr == (
        f"neens: error: {big}: the upload is {size} bytes, over the server's request size limit "
        f"(NEENS_MAX_REQUEST_BYTES) of {SMALL_LIMIT} bytes; nothing was created; {SPLIT_HINT}\n"
    )
    assert datasets(small_server, key) == []


def installed_typescript_bin(tmp_path: Path) -> Path:
    sdk_tests = str(Path(__file__).resolve().parents[2] / "sdk" / "python" / "tests")
    sys.path.insert(0, sdk_tests)
    try:
        from typescript_package import installed_bin
    finally:
        sys.path.remove(sdk_tests)
    project = tmp_path / "ci-job"
    project.mkdir()
    return installed_bin(project)


def test_a_revoked_or_wrong_key_exits_2(
    live_server: LiveServer, key: CreatedKey, tmp_path: Path
) -> None:
    golden = tmp_path / "g.jsonl"
    golden.write_text('{"input": "q"}\n', encoding="utf-8")
    wrong = CreatedKey("nk_live_wrong", key.key_id, key.company_id, key.project_id, key.role)
    result = push(live_server, wrong, str(golden), "--name", "ds")
    assert result.returncode == 2
    assert "401" in result.stderr or "API key" in result.stderr
