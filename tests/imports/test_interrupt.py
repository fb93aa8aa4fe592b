"""Ctrl-C during a big import: exit 130 and nothing saved (docs/import.md: "an import that
fails partway is removed"), never a half-saved experiment or a "database is locked" traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# The child signals itself (SIGINT, as a terminal's Ctrl-C does; or SIGKILL) just as the third
# batch of case-trials starts writing: mid-import, deterministically.
CHILD = """\
import os, signal, sys
SIGNAL = signal.Signals[os.environ["TEST_SIGNAL"]]
import neens.imports.store as store
original = store.save_trials
calls = 0
async def save_trials(db, rows):
    global calls
    calls += 1
    if calls == 3:
        os.kill(os.getpid(), SIGNAL)
    await original(db, rows)
store.save_trials = save_trials
from neens_eval.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _big_promptfoo(path: Path, n: int) -> None:
    results = [
        {
            "testIdx": i,
            "testCase": {"vars": {"q": f"{i}+0?"}, "metadata": {"id": f"q{i}"}},
            "provider": {"id": "echo"},
            "success": i % 2 == 0,
            "score": float(i % 2 == 0),
            "response": {"output": str(i)},
            "gradingResult": {"pass": i % 2 == 0, "score": float(i % 2 == 0)},
        }
        for i in range(n)
    ]
    path.write_text(json.dumps({"evalId": "e1", "results": {"version": 3, "results": results}}))


def _import_signalled(
    tmp_path: Path, signal_name: str
) -> tuple[subprocess.CompletedProcess[str], list[object]]:
    big = tmp_path / "big.json"
    _big_promptfoo(big, 5_000)
    url = f"sqlite:///{tmp_path / 'neens.db'}"
    env = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "logfire-plugin", "TEST_SIGNAL": signal_name}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, "import", "promptfoo", str(big), "--database-url", url],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    listed = subprocess.run(
        [sys.executable, "-m", "neens_eval", "exp", "list", "--json", "--database-url", url],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert listed.returncode == 0, listed.stderr
    return child, json.loads(listed.stdout)["experiments"]


def test_ctrl_c_mid_import_exits_130_and_saves_nothing(tmp_path: Path) -> None:
    child, experiments = _import_signalled(tmp_path, "SIGINT")
    assert child.returncode == 130, child.stderr
    assert child.stderr.strip() == "neens: interrupted"
    assert experiments == []


def test_an_import_killed_midway_leaves_no_half_saved_experiment(tmp_path: Path) -> None:
    """No cleanup can run after SIGKILL: the import must be one transaction."""
    child, experiments = _import_signalled(tmp_path, "SIGKILL")
    assert child.returncode == -9, child.stderr
    assert experiments == []
