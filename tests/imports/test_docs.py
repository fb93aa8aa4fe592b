"""docs/import.md documents every flag of every `neens import` command."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from neens_eval.cli import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    groups = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    group = groups.choices["import"]
    commands = next(a for a in group._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


@pytest.mark.parametrize("command", ["inspect", "promptfoo", "mlflow", "openai-evals"])
def test_every_flag_is_documented(command: str) -> None:
    text = (DOCS / "import.md").read_text()
    assert f"neens import {command}" in text
    flags = [
        option
        for action in _commands()[command]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    missing = [flag for flag in flags if f"`{flag}" not in text]
    assert missing == [], f"neens import {command}: {missing} not in docs/import.md"


def test_every_unmapped_grader_type_is_explained_in_migrate() -> None:
    text = (DOCS / "migrate.md").read_text()
    for name in ("Match", "FuzzyMatch", "text_similarity", "python", "multi", "`ne`"):
        assert name in text
