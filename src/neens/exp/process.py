"""Running a shell command with bounded output and a deadline (command tasks and graders).

The command runs in a session of its own (`start_new_session`), so a timeout, an output flood
or Ctrl-C kills its whole process group, not just the shell: an agent that starts a server or a
child process cannot leave it running. The call ends when the shell exits: what it left running
in its group (`server &`) is killed then, rather than waited on while it holds the pipes open.

Its stdout is read up to `max_output` bytes; past that the group is killed, the rest of the pipe
is read and dropped (a pipe left unread stays open), and the result says so. Stderr is drained
as it comes (a full pipe would block the command) and its last few kilobytes are kept for error
messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Final

STDERR_TAIL_BYTES: Final = 4096
_CHUNK: Final = 65536
_REAP_S: Final = 5.0
"""How long a command's pipes may stay open once it exited or was killed before the run stops
waiting for them."""


@dataclass(frozen=True, slots=True)
class ProcessResult:
    exit_code: int | None
    """None when the command was killed (timeout or output flood)."""
    stdout: bytes
    stderr_tail: bytes
    timed_out: bool = False
    overflowed: bool = False

    def stderr_line(self) -> str:
        """The last non-blank line of stderr, for an error message ("" when there is none)."""
        lines = [
            line.strip()
            for line in self.stderr_tail.decode("utf-8", "replace").splitlines()
            if line.strip()
        ]
        return lines[-1][:300] if lines else ""


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _start(command: str, *, env: dict[str, str], cwd: Path) -> asyncio.subprocess.Process:
    """The command started in a session of its own, with its three pipes connected.

    Starting is never cut short: cancelled while asyncio connects the pipes, Python 3.11's
    subprocess transport waits forever for pipes it never connected (the process is killed, but
    `wait()` never returns), so Ctrl-C at that moment would hang the whole run. The start is
    shielded instead; when the caller is cancelled meanwhile, the started process group is
    killed and reaped, and the cancellation goes on."""
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    )
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):
            process = await starting
            _kill_group(process)
            await _reaped(process)
        raise


async def _exited(process: asyncio.subprocess.Process, io: asyncio.Future[object]) -> None:
    """Wait for the shell itself to exit. `process.wait()` also waits for its pipes to close,
    which a background child it started (`server &`) holds open for as long as it lives, so the
    exit status (set as soon as the shell is reaped) is polled, and looked at at once when the
    pipes close (the usual end)."""
    delay = 0.001
    while process.returncode is None and not io.done():
        await asyncio.wait([io], timeout=delay)
        delay = min(delay * 2, 0.05)
    if process.returncode is None:  # it closed its output but runs on
        await process.wait()


async def _exit_status(process: asyncio.subprocess.Process) -> None:
    while process.returncode is None:
        await asyncio.sleep(0.01)


def _close(process: asyncio.subprocess.Process) -> None:
    """Close the pipes a descendant outside the group still holds: left to the garbage
    collector, they would be closed after the event loop is, with a traceback."""
    transport = getattr(process, "_transport", None)
    if transport is not None:
        transport.close()


async def _reaped(process: asyncio.subprocess.Process) -> None:
    """Wait for a killed process group's leader to be reaped and its pipes to close, for a few
    seconds at most: a descendant that left the group (its own `setsid`) can hold the pipes
    open, and a run must not wait on it."""
    with contextlib.suppress(ProcessLookupError, TimeoutError):
        await asyncio.wait_for(asyncio.shield(process.wait()), _REAP_S)


async def run_process(
    command: str,
    *,
    stdin: bytes,
    env: dict[str, str],
    cwd: Path,
    timeout_s: float,
    max_output: int,
) -> ProcessResult:
    """Run `command` through the shell with `stdin` and `env`, within `timeout_s` seconds.

    OSError (the shell cannot be started) is raised to the caller. Cancelling the call kills
    the process group before the cancellation goes on.
    """
    process = await _start(command, env=env, cwd=cwd)
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    stdout = bytearray()
    stderr_tail = bytearray()
    overflowed = False

    async def feed() -> None:
        assert process.stdin is not None
        # A command that exits without reading its input is not an error.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(stdin)
            await process.stdin.drain()
            process.stdin.close()

    async def read_stdout() -> None:
        nonlocal overflowed
        assert process.stdout is not None
        while chunk := await process.stdout.read(_CHUNK):
            if overflowed:
                continue  # read to the end so the pipe closes; the group is being killed
            stdout.extend(chunk)
            if len(stdout) > max_output:
                overflowed = True
                del stdout[max_output:]
                _kill_group(process)

    async def read_stderr() -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.read(_CHUNK):
            stderr_tail.extend(chunk)
            del stderr_tail[:-STDERR_TAIL_BYTES]

    io: asyncio.Future[object] = asyncio.ensure_future(
        asyncio.gather(feed(), read_stdout(), read_stderr())
    )
    timed_out = False
    killed = False
    try:
        try:
            async with asyncio.timeout(timeout_s):
                await _exited(process, io)
        except TimeoutError:
            timed_out = True
        # The shell is gone (or out of time): whatever it left running in its group (`cmd &`)
        # is killed now, as soon as the shell is reaped (the kernel hands out process ids in
        # turn, so the group's id is not another's so soon).
        _kill_group(process)
        killed = True
        # What it printed is still in the pipes. A descendant that left the group (its own
        # `setsid`) may hold them open: the run does not wait on it past a few seconds.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(io), _REAP_S)
    finally:
        if not killed:  # cancelled (Ctrl-C) while the command ran
            _kill_group(process)
        if not io.done():
            io.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await io
            # Closed only once the shell is reaped: closing the pipes of a running command
            # would have asyncio reap it behind its own back.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_exit_status(process), _REAP_S)
            if process.returncode is not None:
                _close(process)
        await _reaped(process)
    return ProcessResult(
        exit_code=None if timed_out or overflowed else process.returncode,
        stdout=bytes(stdout),
        stderr_tail=bytes(stderr_tail),
        timed_out=timed_out,
        overflowed=overflowed,
    )
