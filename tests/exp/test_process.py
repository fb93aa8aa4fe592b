"""Command tasks and graders run through `run_process`: a run that is cancelled (Ctrl-C) at any
point of a command's start or run ends at once, and the command's process is gone.

A cancellation that lands while asyncio is still connecting the command's pipes used to leave
the run waiting forever (Python 3.11's subprocess transport waits for pipes it never connected):
each case below cancels after a different number of event-loop steps, so one of them lands
there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from neens.exp.process import run_process

STEPS = range(8)
"""Event-loop steps between starting the command and cancelling it."""


async def test_a_command_cancelled_at_any_point_ends_at_once_and_is_killed(tmp_path: Path) -> None:
    for steps in STEPS:
        # Writes its marker a second after it starts, if it is still alive then.
        marker = tmp_path / f"alive-{steps}"
        script = f"import time; time.sleep(1); open({str(marker)!r}, 'w').write('alive')"
        task = asyncio.create_task(
            run_process(
                f'{sys.executable} -S -c "{script}"',
                stdin=b"",
                env={"PATH": os.environ["PATH"]},
                cwd=tmp_path,
                timeout_s=120,
                max_output=1000,
            )
        )
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        try:
            # Shielded, so a hang shows as a timeout here rather than being cut short by a
            # second cancellation.
            await asyncio.wait_for(asyncio.shield(task), timeout=10)
        except asyncio.CancelledError:
            pass
        except TimeoutError:
            pytest.fail(f"cancelled {steps} event-loop steps after the start, the run hung")
        else:
            pytest.fail(f"cancelled {steps} steps after the start, the command ran to its end")
    await asyncio.sleep(2)
    alive = sorted(path.name for path in tmp_path.glob("alive-*"))
    assert alive == [], "cancelled commands kept running"


async def test_a_command_that_finishes_is_reported_as_before(tmp_path: Path) -> None:
    result = await run_process(
        "cat; echo oops >&2; exit 3",
        stdin=b"hello",
        env={"PATH": os.environ["PATH"]},
        cwd=tmp_path,
        timeout_s=30,
        max_output=1000,
    )
    assert (result.exit_code, result.stdout, result.stderr_line()) == (3, b"hello", "oops")


async def test_what_a_command_leaves_running_is_killed_when_it_exits(tmp_path: Path) -> None:
    # The background child holds the output pipe open: the answer is the shell's, given as it
    # exits, not a timeout at the end of the child's sleep.
    marker = tmp_path / "alive"
    started = time.monotonic()
    result = await run_process(
        f"(sleep 3; echo alive > {marker}) & echo ok; echo oops >&2; exit 3",
        stdin=b"",
        env={"PATH": os.environ["PATH"]},
        cwd=tmp_path,
        timeout_s=60,
        max_output=1000,
    )
    assert time.monotonic() - started < 3
    assert (result.exit_code, result.stdout, result.stderr_line()) == (3, b"ok\n", "oops")
    assert not result.timed_out
    await asyncio.sleep(3.5)
    assert not marker.exists(), "the background child kept running"


async def test_a_child_that_left_the_group_does_not_hold_the_answer_back(tmp_path: Path) -> None:
    # `setsid` puts the child out of reach of the group's kill; it holds the pipes open, and
    # the run stops waiting for them after a few seconds.
    pid_file = tmp_path / "pid"
    try:
        result = await run_process(
            f"setsid sh -c 'echo $$ > {pid_file}; exec sleep 60' & sleep 0.2; echo ok",
            stdin=b"",
            env={"PATH": os.environ["PATH"]},
            cwd=tmp_path,
            timeout_s=60,
            max_output=1000,
        )
        assert (result.exit_code, result.stdout, result.timed_out) == (0, b"ok\n", False)
    finally:
        with contextlib.suppress(ProcessLookupError, ValueError, OSError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
