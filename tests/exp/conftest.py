"""A project folder for `neens exp` tests: a dataset, a tiny agent script, a spec, and the
command run in this process (fast) against the test's database."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from neens_eval.cli import main

from neens.store.db import Database
from neens.store.experiments import TrialRow, claim_experiment, release_claim, trials_of

AGENT = """\
import json, os, sys, time
text = sys.stdin.read()
assert text == os.environ.get("NEENS_ITEM_INPUT", text)
wrong = set(filter(None, os.environ.get("WRONG", "").split(",")))
if text in set(filter(None, os.environ.get("CRASH", "").split(","))):
    print("boom", file=sys.stderr)
    sys.exit(3)
if text in set(filter(None, os.environ.get("HANG", "").split(","))):
    time.sleep(60)
time.sleep(float(os.environ.get("SLEEP", "0")))
log = os.environ.get("LOG")
hang_after = int(os.environ.get("HANG_AFTER", "-1"))  # N: calls after the first N logged hang
if log and hang_after >= 0 and os.path.exists(log) and sum(1 for _ in open(log)) >= hang_after:
    time.sleep(60)
if log:
    with open(log, "a") as f:
        f.write(json.dumps({"input": text, "id": os.environ["NEENS_ITEM_ID"],
                            "trial": os.environ["NEENS_TRIAL"],
                            "exp": os.environ["NEENS_EXPERIMENT_ID"]}) + "\\n")
print("wrong" if text in wrong else text.upper())
"""

CASES = [
    {"id": "alpha", "input": "alpha", "expected": "ALPHA"},
    {"id": "beta", "input": "beta", "expected": "BETA"},
    {"id": "gamma", "input": "gamma", "expected": "GAMMA"},
    {"id": "delta", "input": "delta", "expected": "DELTA"},
]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class Project:
    path: Path
    run: Callable[..., Result]

    def write_spec(self, filename: str = "spec.json", /, **overrides: Any) -> Path:
        spec: dict[str, Any] = {
            "name": "base",
            "dataset": "qa",
            "task": {"kind": "command", "command": f"{sys.executable} agent.py"},
            "graders": [{"kind": "exact"}],
        }
        spec.update(overrides)
        path = self.path / filename
        path.write_text(json.dumps(spec))
        return path

    def write_dataset(self, cases: list[dict[str, Any]], name: str = "qa") -> None:
        (self.path / "datasets" / f"{name}.jsonl").write_text(
            "".join(json.dumps(c) + "\n" for c in cases)
        )

    def exp(self, *args: str) -> Result:
        return self.run("exp", *args)

    def exp_json(self, *args: str) -> Any:
        result = self.run("exp", *args, "--json")
        assert result.code == 0, result.err
        return result.json()


@pytest.fixture
def project(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Project:
    """The current folder (tmp_path) set up as a project, with NEENS_DATABASE_URL pointing at
    the test's database (SQLite and PostgreSQL)."""
    monkeypatch.setenv("NEENS_DATABASE_URL", database_url)
    (tmp_path / "datasets").mkdir()
    (tmp_path / "agent.py").write_text(AGENT)
    for name in ("WRONG", "CRASH", "HANG", "HANG_AFTER", "SLEEP", "LOG"):
        monkeypatch.delenv(name, raising=False)

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    result = Project(tmp_path, run)
    result.write_dataset(CASES)
    result.write_spec()
    return result


def saved_trials(database_url: str, experiment_id: str, *, grades: bool = True) -> list[TrialRow]:
    """The experiment's saved case-trials, read from its database (`trials_of`)."""

    async def read() -> list[TrialRow]:
        db = Database(database_url)
        try:
            return await trials_of(db, experiment_id, grades=grades)
        finally:
            await db.dispose()

    return asyncio.run(read())


ELSEWHERE = "pid 1 on another-host (01JELSEWHERE)"
"""A claim holder on another machine: never taken over as gone, only when its lease lapses."""


def hold_claims(database_url: str, experiment_ids: list[str], *, held: bool) -> None:
    """Take (`held`) or give up the claim of each experiment as `ELSEWHERE`, for ten minutes:
    another process running them."""

    async def change() -> None:
        db = Database(database_url)
        try:
            for experiment_id in experiment_ids:
                if held:
                    other = await claim_experiment(db, experiment_id, ELSEWHERE, lease_s=600)
                    assert other is None, other
                else:
                    await release_claim(db, experiment_id, ELSEWHERE)
        finally:
            await db.dispose()

    asyncio.run(change())
