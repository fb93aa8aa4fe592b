"""Running the agent command once per item: prompt on stdin, bounded in time, killed cleanly.

Each command runs in a session of its own, so a timeout (or Ctrl-C) kills the whole process
group, grandchildren included: a shell wrapper cannot leave an agent running that keeps the pipes
open. The command's standard output and error are captured, never mixed into the CLI's output
(stdout may be the `--json` result); the tail of its error output is kept to explain a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from neens_eval.errors import ConfigError

TAIL_CHARS: Final = 2000
_KILL_GRACE_S: Final = 2.0


@dataclass(frozen=True, slots=True)
class ItemRun:
    """How one item's command ended."""

    item_id: str
    returncode: int | None
    """None when it was killed for running too long, or could not be started."""
    timed_out: bool
    duration_s: float
    stderr_tail: str
    start_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and self.start_error is None

    @property
    def reason(self) -> str:
        """Why the command failed, in one line (empty when it did not)."""
        if self.start_error is not None:
            return f"could not start the command ({self.start_error})"
        if self.timed_out:
            why = f"timed out after {self.duration_s:.0f} s (--item-timeout) and was killed"
        elif self.returncode is not None and self.returncode < 0:
            why = f"was killed by signal {-self.returncode}"
        elif self.returncode:
            why = f"exited with code {self.returncode}"
        else:
            return ""
        last = _last_line(self.stderr_tail)
        return f"the command {why}" + (f": {last}" if last else "")


def check_command(command: Sequence[str], environ: Mapping[str, str]) -> None:
    """Refuse, before anything is created, a command that cannot be started."""
    if not command:
        raise ConfigError(
            "no agent command: put it after --, for example: "
            "neens eval run --create --dataset ds_… --version-label v1 -- python -m myagent"
        )
    program = command[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise ConfigError(
                f"agent command {program!r} is not an executable file; check the path after --"
            )
    elif shutil.which(program, path=environ.get("PATH")) is None:
        raise ConfigError(
            f"agent command {program!r} was not found on PATH; check the command after --"
        )


STOPPED: Final = "stopped before it started: the run was interrupted"


class Invoker:
    """Runs commands and remembers the live ones, so an interrupt can kill them all.

    Once `stop()` was called no command starts any more: the check and the start happen under
    the same lock `kill_all()` takes, so a command cannot start between the two and be missed.
    """

    def __init__(self, command: Sequence[str], *, item_timeout: float) -> None:
        self.command = list(command)
        self.item_timeout = item_timeout
        self._live: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._stopped = False

    def run(self, item_id: str, prompt: str, env: Mapping[str, str]) -> ItemRun:
        started = time.monotonic()
        with self._lock:
            if self._stopped:
                return ItemRun(item_id, None, False, 0.0, "", start_error=STOPPED)
            try:
                process = subprocess.Popen(
                    self.command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=dict(env),
                    start_new_session=True,
                )
            except (OSError, ValueError) as exc:
                return ItemRun(item_id, None, False, 0.0, "", start_error=_describe(exc))
            self._live.add(process)
        timed_out = False
        try:
            try:
                _, stderr = process.communicate(prompt.encode("utf-8"), timeout=self.item_timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process)
                stderr = _drain(process)
        finally:
            with self._lock:
                self._live.discard(process)
        text = stderr.decode("utf-8", "replace")[-TAIL_CHARS:]
        returncode = None if timed_out else process.returncode
        return ItemRun(item_id, returncode, timed_out, time.monotonic() - started, text)

    def stop(self) -> None:
        """Start no command from now on (on Ctrl-C or an error that stops the CLI)."""
        with self._lock:
            self._stopped = True

    def kill_all(self) -> None:
        """Kill every command still running, and start none from now on."""
        with self._lock:
            self._stopped = True
            live = list(self._live)
        for process in live:
            _kill_group(process)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command's process group, give it a moment, then SIGKILL whatever is left
    (a grandchild that ignored SIGTERM would otherwise keep running and hold the pipes)."""
    if not hasattr(os, "killpg"):  # pragma: no cover - not POSIX: no process groups
        process.kill()
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        process.wait(timeout=_KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _drain(process: subprocess.Popen[bytes]) -> bytes:
    """Whatever error output a killed command left, without waiting forever for it."""
    try:
        _, stderr = process.communicate(timeout=_KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        for stream in (process.stdout, process.stderr, process.stdin):
            if stream is not None:
                stream.close()
        process.wait()
        return b""
    return stderr or b""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    return last if len(last) <= 300 else last[:297] + "..."


def _describe(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return " ".join(str(error).split()) or type(error).__name__
