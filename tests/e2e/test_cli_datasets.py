"""`neens datasets push` against a live server, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from neens.store.keys import CreatedKey
from tests.support.live import LiveServer

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
    assert result.stderr.startswith(
        f"neens: error: {big}: the upload is 18.0 MB, over the server's request size limit "
        f"(NEENS_MAX_REQUEST_BYTES, 16 MiB by default) [HTTP 413 payload_too_large]; "
    )
    assert "split the file" in result.stderr
    assert "created by this push, has no version yet" in result.stderr
    assert "could not reach" not in result.stderr


def test_a_revoked_or_wrong_key_exits_2(
    live_server: LiveServer, key: CreatedKey, tmp_path: Path
) -> None:
    golden = tmp_path / "g.jsonl"
    golden.write_text('{"input": "q"}\n', encoding="utf-8")
    wrong = CreatedKey("nk_live_wrong", key.key_id, key.company_id, key.project_id, key.role)
    result = push(live_server, wrong, str(golden), "--name", "ds")
    assert result.returncode == 2
    assert "401" in result.stderr or "API key" in result.stderr
