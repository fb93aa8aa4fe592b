"""`neens datasets push` checks the upload against the server's request size limit first.

The server tells its limit in `GET /healthz` (`maxRequestBytes`); an upload over it is refused
before anything is created, rather than after the dataset was created (the 413 path). Here the
server is a loopback stub speaking the API's documented shape (the conformance table's scripted
server, conformance.py, which records every request, /healthz included), so a server older than
the field, or one whose /healthz fails, can be played. The same push against the real server (a
live one with a small limit) is in tests/e2e/test_cli_datasets.py, and the cases both CLIs share
are in sdk/conformance/datasets.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from conformance import ScriptedServer, serve

from neens_eval import cli
from neens_eval.datasets import SMALLEST_LIMIT_BYTES

DATASET = {"id": "ds_1", "name": "support-golden", "goldenVersionId": None}
CREATED = {**DATASET, "createdAt": "2025-01-01T00:00:00Z"}
SPLIT_HINT = (
    "split the file into smaller datasets (each push sends one whole version in one request), "
    "or ask the server's operator to raise NEENS_MAX_REQUEST_BYTES"
)


Stub = Callable[..., ScriptedServer]


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stub]:
    """`stub(route, ...)` starts a loopback stub answering these routes (each `(method, path,
    status, body)`; anything else gets a 404 in Neens' error shape) and points the CLI at it."""
    with ExitStack() as stack:

        def start(*routes: tuple[str, str, int, Any]) -> ScriptedServer:
            script = [
                {"method": method, "path": path, "replies": [{"status": status, "body": reply}]}
                for method, path, status, reply in routes
            ]
            server = stack.enter_context(serve(script))
            monkeypatch.setenv("NEENS_BASE_URL", server.url)
            monkeypatch.setenv("NEENS_API_KEY", "nk_live_test")
            return server

        yield start


def paths(server: ScriptedServer) -> list[str]:
    return [f"{request.method} {request.path}" for request in server.requests]


def health(**fields: Any) -> dict[str, Any]:
    return {"status": "ok", "version": "0.1.0", "database": "sqlite", **fields}


def version(item_count: int) -> dict[str, Any]:
    return {
        "id": "dsv_1",
        "datasetId": "ds_1",
        "number": 1,
        "itemCount": item_count,
        "golden": False,
        "createdAt": "2025-01-01T00:00:00Z",
    }


def write_items(tmp_path: Path, inputs: list[str], name: str = "big.jsonl") -> tuple[Path, int]:
    """A JSONL file of one item per input, and the size of the body the CLI sends for it."""
    path = tmp_path / name
    path.write_text("".join(json.dumps({"input": text}) + "\n" for text in inputs), "utf-8")
    items = [{"input": text} for text in inputs]
    body = json.dumps({"items": items, "golden": False}, ensure_ascii=False).encode("utf-8")
    return path, len(body)


def push(path: Path, *extra: str) -> int:
    return cli.main(["datasets", "push", str(path), "--name", "support-golden", *extra])


def test_an_upload_over_the_limit_exits_2_before_anything_is_created(
    tmp_path: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub(
        ("GET", "/healthz", 200, health(maxRequestBytes=2048)),
        ("GET", "/datasets", 200, {"datasets": []}),
        ("POST", "/datasets", 201, CREATED),
    )
    path, size = write_items(tmp_path, ["Où est ma commande ? 🙂 " * 20] * 5)
    assert size > 2048

    assert push(path, "--json") == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"neens: error: {path}: the upload is {size} bytes, over the server's request size "
        f"limit (NEENS_MAX_REQUEST_BYTES) of 2048 bytes; nothing was created; {SPLIT_HINT}\n"
    )
    assert paths(server) == ["GET /healthz"]


def test_sizes_of_a_megabyte_or_more_are_also_given_in_mb(
    tmp_path: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stub(("GET", "/healthz", 200, health(maxRequestBytes=1_000_000)))
    path, size = write_items(tmp_path, ["x" * 500_000] * 3)

    assert push(path) == 2

    err = capsys.readouterr().err
    assert f": the upload is {size} bytes (1.5 MB), over the server's request size limit " in err
    assert "limit (NEENS_MAX_REQUEST_BYTES) of 1000000 bytes (1.0 MB); nothing was created" in err
    assert paths(server) == ["GET /healthz"]


@pytest.mark.parametrize(("over_by", "code"), [(0, 0), (1, 2)])
def test_an_upload_at_the_limit_is_pushed_and_one_byte_more_is_refused(
    tmp_path: Path, stub: Stub, capsys: pytest.CaptureFixture[str], over_by: int, code: int
) -> None:
    """The limit is on the body as sent: json.dumps' separators, UTF-8, and `golden`."""
    path, size = write_items(tmp_path, ["Grüße 🙂 " * 10] * 20)
    server = stub(
        ("GET", "/healthz", 200, health(maxRequestBytes=size - over_by)),
        ("GET", "/datasets", 200, {"datasets": [DATASET]}),
        ("POST", "/datasets/ds_1/versions", 201, version(20)),
    )

    assert push(path, "--json") == code

    pushed = ["GET /healthz", "GET /datasets", "POST /datasets/ds_1/versions"]
    assert paths(server) == (pushed if code == 0 else ["GET /healthz"])
    if code == 0:
        assert json.loads(capsys.readouterr().out)["itemCount"] == 20
    else:
        assert f"the upload is {size} bytes, over" in capsys.readouterr().err


def test_the_limit_is_asked_only_for_an_upload_that_can_be_over_one(
    tmp_path: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    """No server's limit is below 1024 bytes (NEENS_MAX_REQUEST_BYTES' lowest value), so an
    upload that small is sent without asking; one byte more and the limit is asked for."""
    server = stub(
        ("GET", "/healthz", 200, health(maxRequestBytes=16_777_216)),
        ("GET", "/datasets", 200, {"datasets": [DATASET]}),
        ("POST", "/datasets/ds_1/versions", 201, version(1)),
    )
    _, empty = write_items(tmp_path, [""])
    fits = SMALLEST_LIMIT_BYTES - empty
    small, small_size = write_items(tmp_path, ["s" * fits], "small.jsonl")
    larger, larger_size = write_items(tmp_path, ["s" * (fits + 1)], "larger.jsonl")
    assert (small_size, larger_size) == (1024, 1025)

    assert push(small) == 0
    assert paths(server) == ["GET /datasets", "POST /datasets/ds_1/versions"]
    assert push(larger) == 0
    assert paths(server)[2:] == ["GET /healthz", "GET /datasets", "POST /datasets/ds_1/versions"]


def test_a_server_without_the_field_gets_the_upload_and_its_413_is_reported_as_before(
    tmp_path: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server older than `maxRequestBytes`: its /healthz (played by the stub) lacks the field,
    so the push goes on, and the 413 it answers is reported as it was before the check."""
    too_large = {"error": {"code": "payload_too_large", "message": "request body is over"}}
    server = stub(
        ("GET", "/healthz", 200, health()),
        ("GET", "/datasets", 200, {"datasets": []}),
        ("POST", "/datasets", 201, CREATED),
        ("POST", "/datasets/ds_1/versions", 413, too_large),
    )
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps({"input": "x" * 2_500_000}) + "\n", encoding="utf-8")

    assert push(path) == 2

    assert capsys.readouterr().err == (
        f"neens: error: {path}: the upload is 2.5 MB, over the server's request size limit "
        f"(NEENS_MAX_REQUEST_BYTES, 16 MiB by default) [HTTP 413 payload_too_large]; "
        f"{SPLIT_HINT}; the dataset support-golden (ds_1), created by this push, has no "
        f"version yet\n"
    )
    assert paths(server) == [
        "GET /healthz",
        "GET /datasets",
        "POST /datasets",
        "POST /datasets/ds_1/versions",
    ]


@pytest.mark.parametrize(
    ("status", "answer"),
    [
        (404, {"error": {"code": "not_found", "message": "Not Found"}}),
        (500, {"error": {"code": "internal", "message": "database down"}}),
        (200, health(maxRequestBytes="2048")),
        (200, health(maxRequestBytes=None)),
        (200, health(maxRequestBytes=True)),
        (200, health(maxRequestBytes=0)),
        (200, ["not", "an", "object"]),
        (200, "<html>a proxy's page</html>"),
    ],
    ids=["404", "500", "a string", "null", "a boolean", "zero", "not an object", "a JSON string"],
)
def test_a_healthz_that_does_not_tell_a_limit_lets_the_push_go_on(
    tmp_path: Path, stub: Stub, status: int, answer: Any
) -> None:
    server = stub(
        ("GET", "/healthz", status, answer),
        ("GET", "/datasets", 200, {"datasets": [DATASET]}),
        ("POST", "/datasets/ds_1/versions", 201, version(5)),
    )
    path, _ = write_items(tmp_path, ["x" * 1000] * 5)

    assert push(path) == 0

    assert paths(server) == ["GET /healthz", "GET /datasets", "POST /datasets/ds_1/versions"]


def test_a_server_that_does_not_answer_is_reported_at_the_limit_request(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    closed_port: int,
) -> None:
    """Nothing is created when the server cannot be reached: exit 3 then, not after waiting
    a second retry window for the next request."""
    monkeypatch.setenv("NEENS_BASE_URL", f"http://127.0.0.1:{closed_port}")
    monkeypatch.setenv("NEENS_API_KEY", "nk_live_test")
    monkeypatch.setenv("NEENS_RETRY_WINDOW", "1")
    path, _ = write_items(tmp_path, ["x" * 1000] * 5)

    assert push(path) == 3

    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("neens: Neens does not answer GET /healthz (connection refused)")
    assert not any("GET /datasets" in line for line in lines)
    assert lines[-1].startswith("neens: error: could not reach Neens")
