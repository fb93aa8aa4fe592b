"""Input that used to crash or be quietly bent is refused with one line and exit 2: JSON nested
too deeply, repeated keys, text no store can hold, negative seeds, blank names, a concurrency
past its bound, too short an id; and an answer that is not UTF-8 is an agent error."""

from __future__ import annotations

import json
import sys

import pytest

from tests.exp.conftest import Project, saved_trials
from tests.support.sqlite_only import sqlite_only

pytestmark = sqlite_only("refused before anything is written; the store is test_run.py's")


def _refused(project: Project, *args: str) -> str:
    result = project.exp(*args)
    assert result.code == 2, (result.out, result.err)
    assert result.out == ""
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("neens: error: ")
    return lines[0].removeprefix("neens: error: ")


def _usage_error(project: Project, *args: str) -> str:
    """The last line of an argparse refusal (after the usage), exit 2."""
    result = project.exp(*args)
    assert result.code == 2, (result.out, result.err)
    assert result.out == "" and "Traceback" not in result.err
    return result.err.strip().splitlines()[-1]


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("levels", [10_000, 200])
def test_a_dataset_line_nested_too_deeply_is_refused_naming_the_line(
    project: Project, levels: int
) -> None:
    (project.path / "datasets" / "qa.jsonl").write_text(
        '{"id": "a", "input": "a"}\n{"id": "d", "input": ' + _deep(levels) + "}\n"
    )
    message = _refused(project, "run", "spec.json")
    assert message.endswith(
        "datasets/qa.jsonl line 2: JSON nested too deeply to read (at most 128 levels)"
    )


def test_a_case_nested_within_the_bound_runs(project: Project) -> None:
    project.write_dataset([{"id": "d", "input": json.loads(_deep(100)), "expected": "x"}])
    assert project.exp_json("run", "spec.json")["done"] == 1


def test_a_spec_nested_too_deeply_is_refused(project: Project) -> None:
    (project.path / "spec.json").write_text('{"name": ' + _deep(10_000) + "}")
    assert _refused(project, "run", "spec.json") == (
        "spec.json: JSON nested too deeply to read (at most 128 levels)"
    )


def test_a_repeated_key_in_the_spec_is_refused(project: Project) -> None:
    (project.path / "spec.json").write_text(
        '{"dataset": "qa", "task": {"kind": "command", "command": "true"},'
        ' "graders": [{"kind": "exact"}], "graders": [{"kind": "contains"}]}'
    )
    assert _refused(project, "run", "spec.json") == (
        "spec.json: duplicate key 'graders' (each key may appear once in an object)"
    )


def test_a_repeated_key_in_a_dataset_line_or_a_grader_is_refused(project: Project) -> None:
    (project.path / "datasets" / "qa.jsonl").write_text(
        '{"id": "a", "input": "a", "expected": "A"}\n'
        '{"id": "b", "input": "b", "expected": "B", "expected": "X"}\n'
    )
    assert _refused(project, "run", "spec.json").endswith(
        "datasets/qa.jsonl line 2: duplicate key 'expected' (each key may appear once in an object)"
    )
    project.write_dataset([{"id": "a", "input": "a", "expected": "A"}])
    grader = '{"kind": "exact", "kind": "regex"}'
    assert _refused(project, "run", "spec.json", "-g", grader) == (
        f"-g {grader}: duplicate key 'kind' (each key may appear once in an object)"
    )


@pytest.mark.parametrize(
    ("overrides", "where"),
    [
        (
            {"task": {"kind": "command", "command": "cat\u0000 x"}},
            "['task']['command'] contains a NUL",
        ),
        ({"name": "a\u0000b"}, "['name'] contains a NUL"),
        ({"name": "a\ud800b"}, "['name']"),
        (
            {"task": {"kind": "command", "command": "cat", "env": {"X": "\u0000"}}},
            "['task']['env']['X'] contains a NUL",
        ),
    ],
)
def test_text_no_store_can_hold_is_refused_anywhere_in_the_spec(
    project: Project, overrides: dict[str, object], where: str
) -> None:
    spec = {
        "dataset": "qa",
        "task": {"kind": "command", "command": "cat"},
        "graders": [{"kind": "exact"}],
        **overrides,
    }
    (project.path / "spec.json").write_text(json.dumps(spec))  # ensure_ascii: \u0000, \ud800
    message = _refused(project, "run", "spec.json")
    assert message.startswith(f"spec.json: cannot be stored: {where}")
    assert project.exp_json("list")["experiments"] == []


def test_a_nul_in_a_command_line_grader_is_refused(project: Project) -> None:
    grader = json.dumps({"kind": "command", "command": "true\u0000"})
    assert "cannot be stored: ['command'] contains a NUL" in _refused(
        project, "run", "spec.json", "-g", grader
    )


@pytest.mark.parametrize(
    "args",
    [
        ("compare", "exp_a", "exp_b", "--seed", "-5"),
        ("compare", "exp_a", "exp_b", "--seed", "-1"),
        ("run", "spec.json", "--sample", "1", "--seed", "-1"),
        ("run", "--arm", "a=spec.json", "--arm", "b=spec.json", "--seed", "-1"),
        ("aa", "spec.json", "--seed", "-1"),
        ("sweep", "a=spec.json", "b=spec.json", "--budget", "8", "--seed", "-1"),
        ("replay", "latest", "--vary", "model=x", "--seed", "-1"),
    ],
)
def test_every_seed_is_a_whole_number_from_zero(project: Project, args: tuple[str, ...]) -> None:
    assert _usage_error(project, *args).endswith(f"error: argument --seed: {args[-1]} is negative")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("run", "spec.json", "-d", ""), "-d/--dataset"),
        (("run", "spec.json", "--database-url", " "), "--database-url"),
        (("list", "--database-url", ""), "--database-url"),
        (("run", ""), "SPEC"),
        (("run", "spec.json", "--failing", ""), "--failing"),
        (("compare", "", "exp_b"), "A"),
        (("sweep", "a=spec.json", "b=spec.json", "--budget", "8", "-d", ""), "-d/--dataset"),
    ],
)
def test_a_blank_value_for_a_flag_that_names_something_is_refused(
    project: Project, args: tuple[str, ...], flag: str
) -> None:
    assert _usage_error(project, *args).endswith(f"error: argument {flag}: must not be empty")


def test_session_new_refuses_a_blank_name(project: Project) -> None:
    assert _refused(project, "session", "new", "--name", "") == "--name: must not be empty"


@pytest.mark.parametrize("command", ["run", "aa", "regrade", "sweep"])
def test_concurrency_has_a_documented_upper_bound(project: Project, command: str) -> None:
    args = {
        "run": ("run", "spec.json"),
        "aa": ("aa", "spec.json"),
        "regrade": ("regrade", "exp_a", "spec.json"),
        "sweep": ("sweep", "a=spec.json", "b=spec.json", "--budget", "8"),
    }[command]
    assert _usage_error(project, *args, "--concurrency", "100000000").endswith(
        "error: argument --concurrency: 100000000 is above the most allowed, 1000"
    )


def test_too_short_a_start_of_an_id_says_so(project: Project) -> None:
    first = project.exp_json("run", "spec.json")["id"]
    second = project.exp_json("run", "spec.json")["id"]
    message = _refused(project, "compare", "exp_", second)
    assert message.startswith(
        "A exp_: too short to stand for an id: give at least 6 characters of the experiment id "
        "(it is the start of "
    )
    assert first in message and second in message
    assert _refused(project, "compare", "exp_9", second) == (
        "A exp_9: no such experiment in this store (`neens exp list`)"
    )
    shared = next(i for i in range(6, len(first)) if first[:i] != second[:i])
    if shared > 6:  # two ids made in one run share at least "exp_01"
        assert "the start of more than one experiment id" in _refused(
            project, "compare", first[: shared - 1], second
        )


@pytest.mark.parametrize(
    ("writes", "error"),
    [
        (
            "sys.stdout.buffer.write(b'caf\\xe9 ' + sys.stdin.read().upper().encode())",
            "the answer is not UTF-8 text (byte 0xe9 at offset 3 of standard output)",
        ),
        (
            "sys.stdout.write('ok\\x00' + sys.stdin.read().upper())",
            "the answer contains a NUL character (\\x00) at offset 2",
        ),
    ],
    ids=["not-utf8", "nul"],
)
def test_an_answer_no_store_can_hold_is_an_agent_error_naming_where(
    project: Project, database_url: str, writes: str, error: str
) -> None:
    """Replacing the bytes would grade (and store) an answer the agent never gave."""
    (project.path / "answer.py").write_text(f"import sys\n{writes}\n")
    project.write_spec(task={"kind": "command", "command": f"{sys.executable} answer.py"})
    done = project.exp_json("run", "spec.json")
    assert done["errors"] == {"infra": 0, "agent": 4} and done["graded"] == 0
    saved = saved_trials(database_url, done["id"])
    assert {(t.status, t.output, t.error) for t in saved} == {("error", None, error)}
