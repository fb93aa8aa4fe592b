"""docs/exp.md documents every flag of every `neens exp` command, every verdict under "How it
decides", and its example output is what `exp compare` prints (test_compare reproduces it)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from neens_eval.cli import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "exp.md"


def _exp_commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    groups = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    exp = groups.choices["exp"]
    commands = next(a for a in exp._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def _session_commands() -> dict[str, argparse.ArgumentParser]:
    session = _exp_commands()["session"]
    commands = next(a for a in session._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


@pytest.mark.parametrize(
    "command",
    [
        "run",
        "compare",
        "regrade",
        "aa",
        "list",
        "status",
        "session new",
        "session note",
        "session summary",
        "export",
    ],
)
def test_every_flag_is_documented(command: str) -> None:
    text = DOCS.read_text()
    if command.startswith("session "):
        parser = _session_commands()[command.removeprefix("session ")]
        assert f"`{command.split()[1]}" in text
    else:
        parser = _exp_commands()[command]
    flags = [
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    assert flags
    missing = [flag for flag in flags if f"`{flag}" not in text]
    assert missing == [], f"neens exp {command}: {missing} not in docs/exp.md"


def test_how_it_decides_covers_every_verdict_and_the_gate() -> None:
    text = DOCS.read_text()
    section = text[text.index("### How it decides") : text.index("## `neens exp list`")]
    for phrase in (
        "better (CI above 0, exact sign test p=…)",
        "worse (CI below 0, exact sign test p=…)",
        "inconclusive (CI above 0 but exact sign test p=… on N changed cases)",
        "inconclusive (CI above 0 but the exact sign test points the other way …)",
        "borderline: the interval excludes 0 but the exact sign test does not reject at 5%",
        "inconclusive (CI includes 0)",
        "inconclusive (A and B agree on every case)",
        "inconclusive (regression to the mean: B ran only A's failing cases)",
        "inconclusive (no paired cases)",
        "`Ship it`",
        "`Hold:`",
    ):
        assert phrase in section, phrase


def test_the_documented_example_matches_what_compare_prints() -> None:
    text = DOCS.read_text()
    compare_test = (Path(__file__).parent / "test_compare.py").read_text()
    for line in (
        "B − A   -50.0pp [-100.0pp, 0.0pp] (2 paired cases, 95% paired bootstrap)",
        "mcnemar p=1.000  1 regressed, 0 improved",
        "c_756966685591eb9b  100%  0%  -100pp",
        "P(B>A) 25.0% (Beta(1,1) prior on the 1 flipped case; below 100 paired cases)",
        "no 80% power at this n (exact McNemar ceiling 0%)",
    ):
        assert line in text and line in compare_test, line


def test_the_documented_session_delta_is_what_a_session_run_prints() -> None:
    text = DOCS.read_text()
    session_test = (Path(__file__).parent / "test_session.py").read_text()
    for line in (
        "  changed prompt.md",
        "  pass 0.0% → 100.0%",
        "  Δ +100.0pp [+100.0pp, +100.0pp] mcnemar p=0.125 (4 paired cases, 95% CI)",
        "  grader caps score Δ +100.0pp [+100.0pp, +100.0pp]",
        "  fixed 4: alpha, beta, delta, gamma",
        "  broke —",
    ):
        assert line in text and line in session_test, line
