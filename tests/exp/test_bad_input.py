"""Bad input exits 2 with one line on stderr naming the problem: never a traceback."""

from __future__ import annotations

import json

import pytest

from tests.exp.conftest import Project
from tests.support.sqlite_only import sqlite_only

HUGE = 10**400
"""A valid JSON integer no float can hold."""


def _refused(project: Project, *args: str) -> str:
    result = project.exp(*args)
    assert result.code == 2, (result.out, result.err)
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("neens: error: ")
    return lines[0].removeprefix("neens: error: ")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {
                "name": "x",
                "dataset": "qa",
                "task": {"kind": "command", "command": "true"},
                "grader": [{"kind": "exact"}],
            },
            "spec.json: grader: unknown key (known keys: name, dataset, task, graders, trials)",
        ),
        (
            {"dataset": "qa", "task": {"kind": "command", "command": "true", "timout": 3}},
            "spec.json: task.timout: unknown key (known keys: kind, command, env, timeout)",
        ),
        (
            {
                "dataset": "qa",
                "task": {"kind": "command", "command": "true"},
                "graders": [{"kind": "regex", "patern": "x"}],
            },
            "spec.json: graders[0].patern: unknown key (known keys: kind, name, threshold, "
            "pattern)",
        ),
        (
            {
                "dataset": "qa",
                "task": {"kind": "command", "command": "true"},
                "graders": [{"kind": "regex", "pattern": "("}],
            },
            "spec.json: graders[0].pattern: pattern does not compile: missing ) at position 1",
        ),
        (
            {"dataset": "qa", "task": {"kind": "ssh"}},
            'spec.json: task.kind: must be "command" or "http"',
        ),
        (
            {"dataset": "qa"},
            "spec.json: task: missing (the command or endpoint to run on each case)",
        ),
        (
            {"dataset": "qa", "task": {"kind": "command", "command": "true"}, "trials": 0},
            "spec.json: trials: must be a whole number from 1 to 100",
        ),
        (
            {
                "dataset": "qa",
                "task": {"kind": "command", "command": "true"},
                "graders": [
                    {
                        "kind": "llm",
                        "base_url": "http://x/v1",
                        "model": "m",
                        "prompt": "no placeholder",
                    }
                ],
            },
            "spec.json: graders[0].prompt: template must contain {output}",
        ),
        (
            {"name": "smoke\ttest", "task": {"kind": "command", "command": "true"}},
            "spec.json: name: must not hold control characters (U+0009 at position 5)",
        ),
        (
            {
                "task": {"kind": "command", "command": "true"},
                "graders": [{"kind": "exact", "name": "\x1b[31mexact"}],
            },
            "spec.json: graders[0].name: must not hold control characters (U+001B at position 0)",
        ),
        # A JSON integer too large for a float: refused like any bad number.
        (
            {"task": {"kind": "command", "command": "true", "timeout": HUGE}},
            "spec.json: task.timeout: must be a number of seconds above 0",
        ),
        (
            {"task": {"kind": "http", "url": "http://127.0.0.1:9/", "timeout": HUGE}},
            "spec.json: task.timeout: must be a number of seconds above 0",
        ),
        (
            {
                "task": {"kind": "command", "command": "true"},
                "graders": [{"kind": "command", "command": "echo 1", "timeout": HUGE}],
            },
            "spec.json: graders[0].timeout: must be a number of seconds above 0",
        ),
    ],
)
@sqlite_only("refused before anything is written")
def test_a_bad_spec_is_refused_naming_the_field(
    project: Project, spec: dict[str, object], expected: str
) -> None:
    (project.path / "spec.json").write_text(json.dumps(spec))
    assert _refused(project, "run", "spec.json").startswith(expected)


@sqlite_only("refused before anything is written")
def test_a_spec_that_is_not_json_or_missing(project: Project) -> None:
    (project.path / "broken.json").write_text("{")
    assert _refused(project, "run", "broken.json").startswith("broken.json: not JSON")
    assert _refused(project, "run", "nope.json") == "nope.json: no such spec file"


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (['{"input": "a"}'], "line 1: id: the case has no id"),
        (
            ['{"id": "a", "input": "a"}', '{"id": "b", "input": "b"}', '{"id": "a", "input": "c"}'],
            "line 3: duplicate case id 'a' (first on line 1)",
        ),
        (['{"id": "a", "input": "a", "expect": "A"}'], "line 1: expect: unknown key"),
        (
            ['{"id": "a", "input": "a"}', '{"id": "b\\u001b[1A\\u001b[2Kverdict", "input": "b"}'],
            "line 2: id: must not hold control characters (U+001B at position 1)",
        ),
        (
            ['{"id": "a\\nverdict better", "input": "a"}'],
            "line 1: id: must not hold control characters (U+000A at position 1)",
        ),
        (
            ['{"id": "a", "input": "a", "kind": "bad\\t"}'],
            "line 1: kind: must not hold control characters (U+0009 at position 3)",
        ),
        (
            ['{"id": "a", "input": "a", "group": "\\u202eg"}'],
            "line 1: group: must not hold control characters (U+202E at position 0)",
        ),
        (['{"id": "a"}'], "line 1: input: case 'a' has no input"),
        (['{"id": "a", "input": "a"}', "not json"], "line 2: not JSON"),
        ([], "has no cases"),
    ],
)
@sqlite_only("refused before anything is written")
def test_a_bad_dataset_is_refused_naming_the_line(
    project: Project, lines: list[str], expected: str
) -> None:
    (project.path / "datasets" / "qa.jsonl").write_text("\n".join(lines) + "\n")
    assert expected in _refused(project, "run", "spec.json")


@sqlite_only("refused before anything is written")
def test_a_missing_dataset_is_named(project: Project) -> None:
    message = _refused(project, "run", "spec.json", "-d", "nothere")
    assert message.startswith("dataset nothere: no such file ")
    assert message.endswith("datasets/nothere.jsonl")
    assert _refused(project, "run", "spec.json", "-d", "ds_missing").startswith(
        "dataset ds_missing: no such Neens dataset"
    )


@sqlite_only("refused before anything is written")
def test_bad_flags_are_refused(project: Project) -> None:
    assert _refused(project, "run", "spec.json", "-g", "{nope").startswith("-g {nope: not JSON")
    assert _refused(
        project,
        "run",
        "spec.json",
        "-g",
        '{"kind": "exact"}',
        "-g",
        '{"kind": "exact", "name": "exact-1"}',
    ) == ("two graders are named 'exact-1': give one of them another \"name\"")
    assert _refused(project, "run", "spec.json", "--case", "zeta") == (
        "--case zeta: no such case in the dataset"
    )
    assert _refused(project, "run", "spec.json", "--retry-errors").startswith("--retry-errors:")
    assert _refused(project, "run", "spec.json", "--failing", "exp_nothing").startswith(
        "--failing exp_nothing: no such experiment"
    )
    assert _refused(project, "run", "spec.json", "--resume", "exp_nothing").startswith(
        "--resume exp_nothing: no such experiment"
    )


@sqlite_only("refused before anything is written")
def test_no_grader_at_all_is_refused(project: Project) -> None:
    project.write_spec(graders=[])
    assert _refused(project, "run", "spec.json").startswith("no graders:")


@pytest.mark.parametrize("command", ["run", "aa"])
@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--concurrency", "0", "argument --concurrency: 0 must be at least 1"),
        ("--trials", "two", "argument --trials: 'two' is not a whole number"),
        ("--trials", "101", "argument --trials: 101 is above the most allowed, 100"),
        ("--retries", "-1", "argument --retries: -1 is negative"),
        (
            "--retries",
            str(2**64),
            f"argument --retries: {2**64} is too large (at most {2**63 - 1})",
        ),
        ("--trial-timeout", "0", "argument --trial-timeout: 0 is not a positive number of seconds"),
        ("--trial-timeout", "inf", "argument --trial-timeout: 'inf' is not a finite number"),
    ],
)
@sqlite_only("refused before anything is written")
def test_run_and_aa_refuse_a_bad_number_alike(
    project: Project, command: str, flag: str, value: str, message: str
) -> None:
    result = project.exp(command, "spec.json", flag, value)
    assert result.code == 2 and result.out == ""
    assert result.err.strip().splitlines()[-1] == f"neens exp {command}: error: {message}"


def test_run_and_aa_share_one_definition_of_their_common_options() -> None:
    from tests.exp.test_docs import _exp_commands

    commands = _exp_commands()

    def options(name: str) -> dict[str, tuple[object, ...]]:
        return {
            action.dest: (tuple(action.option_strings), action.type, action.default, action.nargs)
            for action in commands[name]._actions
        }

    run, aa = options("run"), options("aa")
    shared = run.keys() & aa.keys()
    assert shared >= {
        "spec",
        "dataset",
        "grader",
        "trials",
        "concurrency",
        "resume",
        "retry_errors",
        "retries",
        "trial_timeout",
        "json",
        "database_url",
    }
    # run's --seed seeds --sample (and an A/B run's order), aa's the order in a pair; run's SPEC
    # may be left out for two --arm values.
    for dest in shared - {"seed", "spec"}:
        assert run[dest] == aa[dest], dest
    assert run["spec"][:3] == aa["spec"][:3] and run["spec"][3] == "?"


def test_the_largest_limit_a_flag_takes_is_one_the_database_can_read(project: Project) -> None:
    """2**63 - 1 is the most `count` takes: above it SQLite's driver raised OverflowError."""
    assert project.exp_json("list", "--limit", str(2**63 - 1))["experiments"] == []
    too_large = project.exp("list", "--limit", str(2**63))
    assert too_large.code == 2 and "is too large" in too_large.err


@sqlite_only("refused before anything is written")
def test_a_timeout_too_large_for_a_float_is_refused_in_a_flag_or_a_judge(
    project: Project,
) -> None:
    for grader in (
        {"kind": "command", "command": "echo 1", "timeout": HUGE},
        {
            "kind": "llm",
            "base_url": "http://x/v1",
            "model": "m",
            "prompt": "{output}",
            "timeout": HUGE,
        },
    ):
        message = _refused(project, "run", "spec.json", "-g", json.dumps(grader))
        assert message.endswith("}.timeout: must be a number of seconds above 0"), message
    judge = {"base_url": "http://x/v1", "model": "m", "timeout": HUGE}
    (project.path / "judge.json").write_text(json.dumps(judge))
    assert (
        _refused(project, "compare", "exp_x", "exp_y", "--pairwise", "judge.json")
        == "--pairwise judge.json: timeout: must be a number of seconds above 0"
    )
