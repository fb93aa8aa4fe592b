"""`neens datasets push`: the JSONL checks, the requests it makes, its output and exit codes.

The server side is `fake_neens` (conftest.py), a loopback stand-in for the Neens
server's documented wire contract; end-to-end tests against the real server are written
separately.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from neens.demo.endpoints import Reply, Scripted

from neens_eval import cli
from neens_eval.client import Client
from neens_eval.datasets import read_items
from neens_eval.errors import ConfigError

DATASET = {
    "id": "ds_1",
    "name": "support-golden",
    "goldenVersionId": None,
    "createdAt": "2025-01-01T00:00:00Z",
}


def version(number: int = 3, item_count: int = 2, golden: bool = True) -> dict[str, object]:
    return {
        "id": "dsv_9",
        "datasetId": "ds_1",
        "number": number,
        "itemCount": item_count,
        "golden": golden,
        "createdAt": "2025-01-01T00:00:00Z",
    }


def write(tmp_path: Path, text: str | bytes, name: str = "golden.jsonl") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def push(path: Path, *extra: str) -> int:
    return cli.main(["datasets", "push", str(path), "--name", "support-golden", *extra])


GOOD_LINES = (
    '{"input": "Where is my order?", "expected_output": "It ships today."}\n'
    "\n"
    '{"input": "Refund?", "expected_output": null, "metadata": {"tier": 2, "tags": ["a"]}}\n'
)


def test_items_are_read_exactly_as_written(tmp_path: Path) -> None:
    path = write(tmp_path, "\ufeff" + GOOD_LINES + "   \n")

    assert read_items(path) == [
        {"input": "Where is my order?", "expected_output": "It ships today."},
        {"input": "Refund?", "expected_output": None, "metadata": {"tier": 2, "tags": ["a"]}},
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"input": "a",}', "not valid JSON (Expecting property name enclosed in double quotes"),
        ('["input"]', 'expected a JSON object such as {"input": "..."}, got an array'),
        ('{"expected_output": "b"}', 'missing "input"'),
        ('{"input": 7}', '"input" must be a string, got a number'),
        ('{"input": null}', '"input" must be a string, got null'),
        ('{"input": "a", "expected_output": 1}', '"expected_output" must be a string or null'),
        ('{"input": "a", "metadata": "x"}', '"metadata" must be an object, got a string'),
        ('{"input": "a", "metadata": {"score": NaN}}', "NaN is not valid JSON"),
        (
            '{"input": "a", "expected_ouput": "b"}',
            'unknown key "expected_ouput" (did you mean "expected_output"?)',
        ),
        ('{"input": "a", "tags": []}', 'unknown key "tags"; the keys are "input"'),
        (
            '{"input": "first", "input": "second"}',
            "the key 'input' is given twice in one object; give each key once",
        ),
        ('{"input": "a", "metadata": {"k": 1, "k": 2}}', "the key 'k' is given twice"),
        # cut short at the line break: the column is the line's end, not the next line's start
        ('{"input": ', "not valid JSON (Expecting value at column 11)"),
    ],
)
def test_a_bad_line_is_reported_with_file_and_line_number(
    tmp_path: Path, line: str, message: str
) -> None:
    # Line 3 after a blank line 2: blank lines still count, so the number matches the editor.
    path = write(tmp_path, '{"input": "fine"}\n\n' + line + "\n" + '{"input": "also fine"}\n')

    with pytest.raises(ConfigError) as caught:
        read_items(path)

    assert str(caught.value).startswith(f"{path}:3: {message}")
    assert "\n" not in str(caught.value)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, b'{"input": "a"}\n{"input": "caf\xe9"}\n')
    with pytest.raises(ConfigError, match=r"golden\.jsonl:2: not valid UTF-8"):
        read_items(path)


@pytest.mark.parametrize("text", ["", "\n  \n\t\n"])
def test_an_empty_file_is_a_usage_error(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = write(tmp_path, text)

    assert push(path) == 2

    assert f"{path}: no items" in capsys.readouterr().err
    assert env.calls == []


def test_a_bad_file_is_refused_before_anything_is_sent(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, '{"input": "a"}\n{"input": 3}\n')

    assert push(path) == 2

    assert (
        capsys.readouterr().err
        == f'neens: error: {path}:2: "input" must be a string, got a number\n'
    )
    assert env.calls == []


def test_a_missing_file_is_a_usage_error(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    assert push(tmp_path / "nope.jsonl") == 2
    assert "nope.jsonl: no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("variables", "missing"),
    [({}, "NEENS_BASE_URL"), ({"NEENS_BASE_URL": "http://127.0.0.1:1"}, "NEENS_API_KEY")],
)
def test_missing_environment_exits_2_naming_the_variable(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variables: dict[str, str],
    missing: str,
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)

    assert push(write(tmp_path, GOOD_LINES)) == 2

    err = capsys.readouterr().err
    assert err.startswith(f"neens: error: {missing} is not set;")
    assert err.count("\n") == 1


def test_push_to_an_existing_dataset(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", "/datasets", Reply(200, {"datasets": [DATASET]}))
    env.reply("POST", "/datasets/ds_1/versions", Reply(201, version()))

    assert push(write(tmp_path, GOOD_LINES), "--golden") == 0

    assert capsys.readouterr().out == (
        "Pushed 2 items to support-golden (ds_1) as version 3 (dsv_9), marked golden.\n"
    )
    assert env.paths() == ["GET /datasets", "POST /datasets/ds_1/versions"]
    lookup, upload = env.calls
    assert lookup.query == {"name": ["support-golden"]}
    assert upload.body == {"items": read_items(tmp_path / "golden.jsonl"), "golden": True}
    assert upload.headers["authorization"] == "Bearer nk_live_test"


def test_push_creates_the_dataset_and_prints_json(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    # The listing filter is not trusted to be exact: a dataset with another name is not a match.
    other = {**DATASET, "id": "ds_0", "name": "support-golden-old"}
    env.reply("GET", "/datasets", Reply(200, {"datasets": [other]}))
    env.reply("POST", "/datasets", Reply(201, DATASET))
    env.reply("POST", "/datasets/ds_1/versions", Reply(201, version(1, 1, golden=False)))

    assert push(write(tmp_path, '{"input": "hi"}\n'), "--json") == 0

    captured = capsys.readouterr()
    assert json.loads(captured.out) == {
        "datasetId": "ds_1",
        "datasetName": "support-golden",
        "versionId": "dsv_9",
        "versionNumber": 1,
        "itemCount": 1,
        "golden": False,
        "createdDataset": True,
    }
    assert captured.out.count("\n") == 1
    assert env.paths() == ["GET /datasets", "POST /datasets", "POST /datasets/ds_1/versions"]
    assert env.calls[1].body == {"name": "support-golden"}
    assert env.calls[2].body == {"items": [{"input": "hi"}], "golden": False}


def test_human_output_for_a_new_dataset_and_one_item(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", "/datasets", Reply(200, {"datasets": []}))
    env.reply("POST", "/datasets", Reply(201, DATASET))
    env.reply("POST", "/datasets/ds_1/versions", Reply(201, version(1, 1, golden=False)))

    assert push(write(tmp_path, '{"input": "hi"}\n')) == 0

    assert capsys.readouterr().out == (
        "Pushed 1 item to new dataset support-golden (ds_1) as version 1 (dsv_9).\n"
    )


def test_a_dataset_created_concurrently_is_used(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply(
        "GET",
        "/datasets",
        Reply(200, {"datasets": []}),
        Reply(200, {"datasets": [DATASET]}),
    )
    conflict = {"error": {"code": "conflict", "message": "A dataset with this name exists."}}
    env.reply("POST", "/datasets", Reply(409, conflict))
    env.reply("POST", "/datasets/ds_1/versions", Reply(201, version()))

    assert push(write(tmp_path, GOOD_LINES), "--json") == 0

    assert json.loads(capsys.readouterr().out)["createdDataset"] is False
    assert env.paths() == [
        "GET /datasets",
        "POST /datasets",
        "GET /datasets",
        "POST /datasets/ds_1/versions",
    ]


def test_422_about_an_item_points_at_its_line(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", "/datasets", Reply(200, {"datasets": [DATASET]}))
    body = {
        "error": {
            "code": "unprocessable",
            "message": "items[1].input: too long",
            "field": "items[1].input",
        }
    }
    env.reply("POST", "/datasets/ds_1/versions", Reply(422, body))
    path = write(tmp_path, GOOD_LINES)  # the second item is on line 3

    assert push(path) == 2

    assert capsys.readouterr().err == (
        f"neens: error: {path}:3: items[1].input: too long [HTTP 422 unprocessable]\n"
    )


def test_other_422_exits_2_with_the_server_message(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", "/datasets", Reply(200, {"datasets": []}))
    body = {"error": {"code": "unprocessable", "message": "is too long", "field": "name"}}
    env.reply("POST", "/datasets", Reply(422, body))

    assert push(write(tmp_path, GOOD_LINES)) == 2

    assert capsys.readouterr().err == (
        "neens: error: is too long (field name) [HTTP 422 unprocessable]\n"
    )


def test_refused_key_exits_2(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {"error": {"code": "not_authenticated", "message": "Unknown API key."}}
    env.reply("GET", "/datasets", Reply(401, body))

    assert push(write(tmp_path, GOOD_LINES)) == 2

    assert "check NEENS_API_KEY" in capsys.readouterr().err
    assert env.paths() == ["GET /datasets"]


def test_unreachable_server_exits_3(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    closed_port: int,
) -> None:
    monkeypatch.setenv("NEENS_BASE_URL", f"http://127.0.0.1:{closed_port}")
    monkeypatch.setenv("NEENS_API_KEY", "nk_live_test")

    monkeypatch.setenv("NEENS_RETRY_WINDOW", "1")

    assert push(write(tmp_path, GOOD_LINES)) == 3

    first, *_, last = capsys.readouterr().err.splitlines()
    assert first.startswith(
        "neens: Neens does not answer GET /datasets (connection refused); retrying for up to 1 s"
    )
    assert last.startswith("neens: error: could not reach Neens")
    assert "connection refused" in last and "(retries last 1 s" in last


def test_upload_meeting_a_gateway_error_exits_3(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", "/datasets", Reply(200, {"datasets": [DATASET]}))
    env.reply("POST", "/datasets/ds_1/versions", Reply(502))

    assert push(write(tmp_path, GOOD_LINES)) == 3

    err = capsys.readouterr().err
    assert "may or may not have been applied" in err
    assert (
        "check the versions of dataset support-golden (ds_1) (GET /datasets/ds_1/versions) "
        "before pushing again" in err
    )
    assert env.paths() == ["GET /datasets", "POST /datasets/ds_1/versions"]


def test_an_interrupted_upload_says_to_check_the_versions_before_pushing_again(
    tmp_path: Path,
    env: Scripted,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env.reply("GET", "/datasets", Reply(200, {"datasets": [DATASET]}))

    def interrupted(self: Client, path: str, body: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(Client, "post", interrupted)

    assert push(write(tmp_path, GOOD_LINES)) == 130

    err = capsys.readouterr().err
    assert "neens: interrupted while uploading" in err
    assert "the new version may or may not have been created; check the dataset's versions " in err
    assert "(GET /datasets/ds_1/versions) before pushing again" in err


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"input": "a\\u0000b"}', "input: contains a NUL character (\\x00) at offset 1"),
        ('{"input": "a", "expected_output": "\\ud83d"}',
         "expected_output: contains a lone surrogate (\\ud83d) at offset 0"),
        ('{"input": "a", "metadata": {"tags": ["ok", "\\u0000"]}}',
         "metadata.tags[1]: contains a NUL character (\\x00) at offset 0"),
        ('{"input": "a", "metadata": {"k\\u0000": 1}}',
         'metadata key "k\\u0000": contains a NUL character (\\x00) at offset 1'),
    ],
)  # fmt: skip
def test_text_the_server_cannot_store_is_refused_before_anything_is_sent(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str], line: str, problem: str
) -> None:
    path = write(tmp_path, '{"input": "fine"}\n' + line + "\n")

    assert push(path) == 2

    assert capsys.readouterr().err == (
        f"neens: error: {path}:2: {problem}; Neens cannot store it, remove it\n"
    )
    assert env.calls == []


def test_a_413_on_the_upload_says_the_size_and_how_to_split(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", "/datasets", Reply(200, {"datasets": []}))
    env.reply("POST", "/datasets", Reply(201, DATASET))
    too_large = {"error": {"code": "payload_too_large", "message": "request body is over"}}
    env.reply("POST", "/datasets/ds_1/versions", Reply(413, too_large))
    path = write(tmp_path, json.dumps({"input": "x" * 2_500_000}) + "\n")

    assert push(path) == 2

    assert capsys.readouterr().err == (
        f"neens: error: {path}: the upload is 2.5 MB, over the server's request size limit "
        f"(NEENS_MAX_REQUEST_BYTES, 16 MiB by default) [HTTP 413 payload_too_large]; split the "
        f"file into smaller datasets (each push sends one whole version in one request), or ask "
        f"the server's operator to raise NEENS_MAX_REQUEST_BYTES; the dataset support-golden "
        f"(ds_1), created by this push, has no version yet\n"
    )


def test_an_answer_of_the_wrong_shape_is_reported(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    env.reply("GET", "/datasets", Reply(200, {"items": []}))

    assert push(write(tmp_path, GOOD_LINES)) == 2

    assert "unexpected answer to GET /datasets" in capsys.readouterr().err


def test_blank_name_is_a_usage_error(
    tmp_path: Path, env: Scripted, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, GOOD_LINES)
    assert cli.main(["datasets", "push", str(path), "--name", "  "]) == 2
    assert "--name must not be empty" in capsys.readouterr().err
    assert env.calls == []
