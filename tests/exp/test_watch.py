"""`neens exp run --watch`, driven as a user drives it: the real command in a subprocess, real
file changes in its folder, its output lines read as they come. A change to the agent's files
runs again; a change to the graders alone regrades the last outputs with no agent calls."""

from __future__ import annotations

import json
import os
import pty
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.exp.conftest import Project
from tests.support.sqlite_only import sqlite_only

SHOUTER = """\
import os, sys
text = sys.stdin.read()
with open(os.environ["LOG"], "a") as f:
    f.write(text + "\\n")
prompt = open(os.environ["PROMPT"]).read().strip()
print(text.upper() if prompt == "shout" else text)
"""

GRADER = """\
import json, sys
case = json.load(sys.stdin)
print("pass" if case["output"].startswith("{first}") else "fail")
"""

RUN_LINE = re.compile(
    r"^\d\d:\d\d:\d\d run (exp_\w+)  pass (\S+) \((\d+)/(\d+)\)  (\d+) case runs$"
)
REGRADE_LINE = re.compile(
    r"^\d\d:\d\d:\d\d regrade (exp_\w+)  pass (\S+) \((\d+)/(\d+)\)  regrade of (exp_\w+), "
    r"0 task calls$"
)


class Lines:
    """A stream's lines, read on a thread so the test can wait for one with a timeout."""

    def __init__(self, stream: IO[str]) -> None:
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)

    def wait(
        self, pattern: re.Pattern[str], timeout: float = 60, poke: Callable[[], None] | None = None
    ) -> re.Match[str]:
        """The next line matching `pattern`. `poke` is called every few seconds while none
        comes (a file written again with the same content, in case the watcher missed it)."""
        deadline = time.monotonic() + timeout
        next_poke = time.monotonic() + 4
        while time.monotonic() < deadline:
            try:
                line = self.queue.get(timeout=0.2)
            except queue.Empty:
                if poke is not None and time.monotonic() > next_poke:
                    poke()
                    next_poke = time.monotonic() + 4
                continue
            if line is None:
                raise AssertionError(f"the output ended; lines so far: {self.seen}")
            self.seen.append(line)
            match = pattern.search(line)
            if match:
                return match
        raise AssertionError(f"no line matching {pattern.pattern!r}; lines so far: {self.seen}")

    def rest(self, timeout: float = 30) -> list[str]:
        """Every line left, up to the end of the stream."""
        found = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                return found
            self.seen.append(line)
            found.append(line)
        raise AssertionError(f"the stream did not end; lines so far: {self.seen}")


def _setup(project: Project, *, relative_log: bool = False) -> Path:
    log = project.path / "calls.log"
    (project.path / "agent.py").write_text(SHOUTER)
    (project.path / "prompt.md").write_text("plain\n")
    (project.path / "grade.py").write_text(GRADER.format(first="a"))
    project.write_spec(
        name="shout",
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"PROMPT": "prompt.md", "LOG": "calls.log" if relative_log else str(log)},
        },
        graders=[{"kind": "regex", "name": "caps", "pattern": "^[A-Z]+$"}],
    )
    return log


def _calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def start(project: Project, database_url: str) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    processes: list[subprocess.Popen[str]] = []

    def launch(*extra: str, stdin: Any = subprocess.PIPE) -> subprocess.Popen[str]:
        env = {**os.environ, "NEENS_DATABASE_URL": database_url}
        command = [sys.executable, "-m", "neens_eval", "exp", "run", "spec.json", "--watch"]
        process = subprocess.Popen(
            [*command, *extra],
            cwd=project.path,
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        processes.append(process)
        return process

    yield launch
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@sqlite_only("the subject is watching files; test_run.py and test_regrade.py store runs on both")
def test_watch_runs_again_on_an_agent_change_and_regrades_on_a_grader_change(
    project: Project, start: Callable[..., subprocess.Popen[str]]
) -> None:
    log = _setup(project)
    assert project.exp("session", "new", "--name", "shout").code == 0
    process = start()
    assert process.stdout is not None and process.stderr is not None and process.stdin
    out, err = Lines(process.stdout), Lines(process.stderr)

    first = out.wait(RUN_LINE)
    assert first.group(2, 3, 4, 5) == ("0.0%", "0", "4", "4")
    assert out.wait(re.compile("^session shout: the first run on datasets/qa.jsonl"))
    watching = err.wait(re.compile("^watching "))
    assert watching.string == (
        "watching agent.py, datasets/qa.jsonl, prompt.md, spec.json; the end of stdin or "
        "Ctrl-C stops it"
    )
    assert _calls(log) == 4

    # The agent's prompt file (named in the task's env) changes: a new run, 4 agent calls.
    def shout() -> None:
        (project.path / "prompt.md").write_text("shout\n")

    shout()
    second = out.wait(RUN_LINE, poke=shout)
    assert second.group(2, 3, 4) == ("100.0%", "4", "4")
    assert out.wait(re.compile(r"^session shout: vs ")).string.endswith(first.group(1))
    assert out.wait(re.compile(r"^  changed ")).string == "  changed prompt.md"
    assert out.wait(re.compile(r"^  fixed ")).string == "  fixed 4: alpha, beta, delta, gamma"
    assert _calls(log) == 8

    # The spec's graders alone change: the last outputs are regraded, no agent call.
    def lowercase_grader() -> None:
        project.write_spec(
            name="shout",
            task={
                "kind": "command",
                "command": f"{sys.executable} agent.py",
                "env": {"PROMPT": "prompt.md", "LOG": str(log)},
            },
            graders=[
                {"kind": "regex", "name": "caps", "pattern": "^[A-Z]+$"},
                {"kind": "command", "name": "starts", "command": f"{sys.executable} grade.py"},
            ],
        )

    lowercase_grader()
    regrade = out.wait(REGRADE_LINE, poke=lowercase_grader)
    # Only ALPHA starts with "a"... in upper case it does not: every case fails "starts".
    assert regrade.group(2, 3, 4) == ("0.0%", "0", "4")
    assert regrade.group(5) == second.group(1)
    assert out.wait(re.compile(r"^  changed ")).string == "  changed grade.py (new), spec.json"
    assert _calls(log) == 8

    # A grader's file changes: regraded again, still no agent call.
    def upper_grader() -> None:
        (project.path / "grade.py").write_text(GRADER.format(first="A"))

    upper_grader()
    again = out.wait(REGRADE_LINE, poke=upper_grader)
    assert again.group(2, 3, 4) == ("25.0%", "1", "4") and again.group(5) == second.group(1)
    assert out.wait(re.compile(r"^  changed ")).string == "  changed grade.py"
    assert _calls(log) == 8

    # A spec that cannot be read is one error line; the watch goes on.
    (project.path / "spec.json").write_text("{not json")
    error = err.wait(re.compile(r"^\d\d:\d\d:\d\d error: "))
    assert "spec.json" in error.string

    # The end of stdin ends the watch, cleanly.
    process.stdin.close()
    assert process.wait(timeout=30) == 0
    assert _calls(log) == 8
    summary = project.exp_json("session", "summary")
    assert [item["kind"] for item in summary["timeline"]] == ["run", "run", "regrade", "regrade"]
    assert summary["timeline"][3]["id"] == again.group(1)


@sqlite_only("the subject is the terminal keys; test_run.py stores runs on both databases")
def test_at_a_terminal_enter_runs_again_and_q_quits(
    project: Project, start: Callable[..., subprocess.Popen[str]]
) -> None:
    # The log is named in the task's env as a file of the project folder, as a prompt file
    # would be: the agent writes it during each run, and that is no reason to run again.
    log = _setup(project, relative_log=True)
    controller, terminal = pty.openpty()
    try:
        process = start("--json", stdin=terminal)
        assert process.stdout is not None and process.stderr is not None
        out, err = Lines(process.stdout), Lines(process.stderr)
        first = json.loads(out.wait(re.compile(r"^\{")).string)
        assert first["kind"] == "run" and first["ranNow"] == 4 and first["passRate"] == 0.0
        assert err.wait(re.compile("^watching ")).string.endswith("Enter runs again, q quits")
        os.write(controller, b"\n")
        second = json.loads(out.wait(re.compile(r"^\{")).string)
        assert second["kind"] == "run" and second["id"] != first["id"] and second["ranNow"] == 4
        assert _calls(log) == 8
        note = err.wait(re.compile(r"^\d\d:\d\d:\d\d note: "))
        assert note.string.endswith(
            "note: calls.log changed while the run was going: taken as written by the agent, "
            "not as a change to run again for (save it again, or press Enter, to run with an "
            "edit made meanwhile)"
        )
        time.sleep(1.5)  # the watcher's report of the log's change comes and is let go
        os.write(controller, b"q")
        assert process.wait(timeout=30) == 0
        assert out.rest() == []
    finally:
        os.close(controller)
        os.close(terminal)


def test_watch_is_not_for_resume(project: Project) -> None:
    result = project.exp("run", "spec.json", "--watch", "--resume")
    assert result.code == 2
    assert result.err.strip() == (
        "neens: error: --watch: not with --resume; finish the run with --resume first, then watch"
    )
