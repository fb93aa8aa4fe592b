"""One process at a time runs an experiment: the claim taken before its case-trials are chosen.

Two `exp run --resume EXP` started together would each read the same saved case-trials, each
run everything left (the agent called twice per case), and each save over the other's rows.
So a process claims every experiment it is about to run (a new one, or one it resumes) before
it reads what is left, and holds the claim until it stops: a second process is refused (exit 2)
naming the holder. The claim is a lease renewed every `RENEW_EVERY_S`; a process killed with
`kill -9` stops renewing, and its claim lapses `LEASE_S` after that, so the run can be resumed
(at once on the same machine, where a claim whose process is gone is taken over).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
from collections.abc import AsyncIterator, Sequence
from typing import Final

from neens_eval.errors import ConfigError
from ulid import ULID

from neens.store.db import Database
from neens.store.experiments import claim_experiment, release_claim, renew_claim

LEASE_S: Final = 60.0
"""How long a claim lasts unless renewed."""
RENEW_EVERY_S: Final = 15.0

_HOLDER: Final = f"pid {os.getpid()} on {socket.gethostname()} ({ULID()})"
"""This process, as a claim names it: the pid and host say who; the ULID tells apart two
processes of one pid (one after the other, or in two containers)."""


@contextlib.asynccontextmanager
async def claimed(
    db: Database,
    experiment_ids: Sequence[str],
    *,
    resuming: bool,
    holder: str = _HOLDER,
    lease_s: float = LEASE_S,
    renew_every_s: float = RENEW_EVERY_S,
) -> AsyncIterator[None]:
    """Hold the claim of every experiment in `experiment_ids` for the block; ConfigError (exit 2)
    naming the process that holds one of them already. Released when the block ends."""
    taken: list[str] = []
    try:
        for experiment_id in experiment_ids:
            other = await claim_experiment(db, experiment_id, holder, lease_s=lease_s)
            if other is not None and _is_gone(other.holder):
                other = await claim_experiment(
                    db, experiment_id, holder, lease_s=lease_s, replacing=other.holder
                )
            if other is not None:
                doing = "cannot resume" if resuming else "cannot run"
                raise ConfigError(
                    f"{doing} {experiment_id}: it is being run by another neens process "
                    f"({_who(other.holder)}, its claim renewed until "
                    f"{other.until:%Y-%m-%d %H:%M:%S} UTC); let that one finish, or once it "
                    f"has stopped, run this again (a stopped process's claim lapses within "
                    f"{lease_s:g} s)"
                )
            taken.append(experiment_id)
        renewing = asyncio.create_task(_renew(db, taken, holder, lease_s, renew_every_s))
        try:
            yield
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
    finally:
        for experiment_id in taken:
            with contextlib.suppress(Exception):
                await release_claim(db, experiment_id, holder)


_HOLDER_SHAPE: Final = re.compile(r"^pid (\d+) on (.*) \(\w+\)$")


def _is_gone(holder: str) -> bool:
    """Whether the holder is a process of this host that no longer runs (it was killed with
    `kill -9`, say): its claim need not wait to lapse."""
    shape = _HOLDER_SHAPE.match(holder)
    if shape is None or shape[2] != socket.gethostname():
        return False
    try:
        os.kill(int(shape[1]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False
    return False


def _who(holder: str) -> str:
    """The readable part of a holder: `pid 123 on host`."""
    return holder.rsplit(" (", 1)[0] or "unknown"


async def _renew(db: Database, ids: list[str], holder: str, lease_s: float, every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        for experiment_id in ids:
            with contextlib.suppress(Exception):  # a failed renewal is tried again next time
                await renew_claim(db, experiment_id, holder, lease_s=lease_s)
