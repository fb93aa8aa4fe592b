"""Each grader kind on real answers; the llm grader against a real OpenAI-compatible server on
loopback; versions that follow the definition and the files a grader reads."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from neens_eval.errors import ConfigError

from neens.demo.endpoints import ChatModel, serve_one
from neens.exp.datasets import Case
from neens.exp.graders import ReadyGrader, grade, grader_version, prepare
from neens.exp.spec import parse_grader

CASE = Case(id="c1", input="What is 2+2?", expected="4")


def ready(definition: dict[str, Any], cwd: Path) -> ReadyGrader:
    return prepare(parse_grader(definition, "spec", "graders[0]", 0), cwd, "spec", "graders[0]")


@pytest.mark.parametrize(
    ("definition", "output", "passed"),
    [
        ({"kind": "exact"}, " 4\n", True),
        ({"kind": "exact", "strip": False}, " 4", False),
        ({"kind": "contains"}, "it is 4.", True),
        ({"kind": "contains", "value": "five"}, "it is 4.", False),
        ({"kind": "regex", "pattern": r"^\d+$"}, "4", True),
        ({"kind": "regex", "pattern": r"^\d+$"}, "four", False),
        ({"kind": "json_field", "path": "answer", "value": 4}, '{"answer": 4}', True),
        ({"kind": "json_field", "path": "answer", "value": 4}, '{"answer": "4"}', False),
        ({"kind": "json_field", "path": "answer", "value": 4}, "not json", False),
    ],
)
async def test_built_in_graders(
    tmp_path: Path, definition: dict[str, Any], output: str, passed: bool
) -> None:
    result = await grade(ready(definition, tmp_path), CASE, output, tmp_path)
    assert result.passed is passed
    assert result.score == (1.0 if passed else 0.0)
    assert result.unscored is None


async def test_a_grader_without_the_expected_answer_it_needs_gives_no_verdict(
    tmp_path: Path,
) -> None:
    result = await grade(ready({"kind": "exact"}, tmp_path), Case("c", "q"), "a", tmp_path)
    assert result.passed is None and result.unscored == "no_expected_output"


GRADER_SCRIPT = """\
import json, os, sys
case = json.load(sys.stdin)
assert case["output"] == os.environ["NEENS_OUTPUT"]
assert case["expected"] == os.environ["NEENS_EXPECTED"]
mode = sys.argv[1]
if mode == "crash":
    raise SystemExit("grader broke")
if mode == "json":
    print(json.dumps({"score": 0.8, "reason": "close enough"}))
elif mode == "words":
    print("no idea")
elif mode == "big":
    print(7)
else:
    print(1 if case["output"] == case["expected"] else 0)
"""


@pytest.mark.parametrize(
    ("mode", "score", "passed", "unscored", "reason"),
    [
        ("plain", 1.0, True, None, "the grader printed 1"),
        ("json", 0.8, True, None, "close enough"),
        (
            "crash",
            None,
            None,
            "grader_error",
            "the grader command exited with code 1: grader broke",
        ),
        ("words", None, None, "grader_error", "the grader printed no score"),
        ("big", None, None, "grader_error", "the grader printed 7, not a score from 0 to 1"),
    ],
)
async def test_a_command_grader_prints_a_score_or_is_a_grader_error(
    tmp_path: Path,
    mode: str,
    score: float | None,
    passed: bool | None,
    unscored: str | None,
    reason: str,
) -> None:
    (tmp_path / "grade.py").write_text(GRADER_SCRIPT)
    grader = ready({"kind": "command", "command": f"{sys.executable} grade.py {mode}"}, tmp_path)
    result = await grade(grader, CASE, "4", tmp_path)
    assert (result.score, result.passed, result.unscored) == (score, passed, unscored)
    assert result.reason.startswith(reason)


async def test_a_command_grader_that_hangs_is_a_grader_error(tmp_path: Path) -> None:
    grader = ready(
        {
            "kind": "command",
            "command": f"{sys.executable} -c 'import time; time.sleep(30)'",
            "timeout": 0.5,
        },
        tmp_path,
    )
    result = await grade(grader, CASE, "4", tmp_path)
    assert result.unscored == "grader_error"
    assert result.reason == "the grader command printed no score within 0.5 s"


async def test_the_threshold_decides_a_pass(tmp_path: Path) -> None:
    (tmp_path / "grade.py").write_text(GRADER_SCRIPT)
    command = f"{sys.executable} grade.py json"
    strict = ready({"kind": "command", "command": command, "threshold": 0.9}, tmp_path)
    assert (await grade(strict, CASE, "4", tmp_path)).passed is False


async def test_an_llm_grader_asks_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        right = "Answer: 4" in body["messages"][-1]["content"]
        return f'{{"score": {1 if right else 0}, "reason": "checked"}}'

    with serve_one(ChatModel(reply)) as server:
        grader = ready(
            {
                "kind": "llm",
                "base_url": server.base_url,
                "model": "judge",
                "prompt": "Q: {input}\nAnswer: {output}\nReference: {expected_output}",
            },
            tmp_path,
        )
        good = await grade(grader, CASE, "4", tmp_path)
        bad = await grade(grader, CASE, "5", tmp_path)
    assert (good.score, good.passed, good.reason) == (1.0, True, "checked")
    assert good.prompt == "Q: What is 2+2?\nAnswer: 4\nReference: 4"
    assert (bad.score, bad.passed) == (0.0, False)
    assert server.calls[0].body["model"] == "judge"


async def test_an_llm_grader_that_cannot_be_reached_gives_no_verdict(tmp_path: Path) -> None:
    from neens.demo.endpoints import refused_url

    grader = ready(
        {
            "kind": "llm",
            "base_url": refused_url("/v1"),
            "model": "judge",
            "prompt": "{output}",
            "timeout": 5,
        },
        tmp_path,
    )
    result = await grade(grader, CASE, "4", tmp_path)
    assert result.passed is None and result.unscored == "judge_call_failed"


def test_a_version_follows_the_definition_and_the_files_read(tmp_path: Path) -> None:
    (tmp_path / "grade.py").write_text("print(1)")
    (tmp_path / "prompt.md").write_text("Judge {output}")

    def version(definition: dict[str, Any]) -> str:
        parsed = parse_grader(definition, "spec", "graders[0]", 0)
        return grader_version(parsed, tmp_path, "spec", "graders[0]")

    command = {"kind": "command", "command": f"{sys.executable} grade.py"}
    llm = {
        "kind": "llm",
        "base_url": "http://127.0.0.1:1/v1",
        "model": "m",
        "prompt_file": "prompt.md",
    }
    before = (version(command), version(llm), version({"kind": "exact"}))
    assert version({"kind": "exact", "name": "renamed"}) == before[2]  # the name is not the grader
    assert version({"kind": "exact", "strip": False}) != before[2]
    (tmp_path / "grade.py").write_text("print(0)")
    (tmp_path / "prompt.md").write_text("Judge harder: {output}")
    assert version(command) != before[0] and version(llm) != before[1]


def test_an_llm_grader_key_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    definition = {
        "kind": "llm",
        "base_url": "http://127.0.0.1:1/v1",
        "model": "m",
        "prompt": "{output}",
        "api_key_env": "JUDGE_KEY",
    }
    monkeypatch.delenv("JUDGE_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"graders\[0\]\.api_key_env: \$JUDGE_KEY is not set"):
        ready(definition, tmp_path)
    monkeypatch.setenv("JUDGE_KEY", "sk-test")
    assert ready(definition, tmp_path).api_key == "sk-test"
