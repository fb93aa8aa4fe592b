"""The `neens` command run in this process against the test's database, and the fixtures'
folder (real files written by Inspect AI and promptfoo; see fixtures/README.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from neens_eval.cli import main

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def neens(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Result]:
    monkeypatch.setenv("NEENS_DATABASE_URL", database_url)

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
