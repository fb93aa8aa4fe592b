"""`neens exp run spec.json --watch`: run, then run again whenever what the run is made of
changes.

It watches the files of `neens.exp.sources` (the spec, the agent's files, the graders' files,
the dataset file) with watchfiles. After a change it plans the run again from the files as they
are now and compares that with the last run:

- nothing that matters changed (the same content, or only the spec's layout): nothing happens;
- only the graders changed (their definitions in the spec, or a file one reads): the last run's
  stored outputs are graded again (`exp regrade`), with no task calls;
- anything else (the task, an agent file, the dataset, the trials, the chosen cases, the name):
  a new run.

Each run or regrade prints one line (the time, run or regrade, the id, the pass rate and the
counts), then its session delta when the folder has a session. A spec that cannot be read, or a
run that cannot start, prints one `error` line on stderr and the watch goes on.

When stdin is a terminal, Enter runs again (a new run, whatever changed) and q quits. Otherwise
keys are not read: the end of stdin, or Ctrl-C, ends the watch. Either way it exits 0, unless
Ctrl-C stops a run half-way (130, and the run can be resumed as usual).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from neens_eval.errors import ConfigError

from neens.exp.compare import pass_text
from neens.exp.plan import Plan
from neens.exp.regrade import regrade_experiment
from neens.exp.run_command import make_run_plan, plan_sources, run_once, summary_json
from neens.exp.sessions import folder_key, join, session_report
from neens.exp.sources import Sources, hashes, shown
from neens.exp.store import open_store
from neens.store.db import Database
from neens.store.experiment_sessions import SessionRow, current_session
from neens.store.experiments import Tally, get_experiment, tally
from neens.store.types import utcnow

Event = Literal["files", "enter", "quit"]
DEBOUNCE_MS: Final = 300
"""How long the files must be quiet before a change counts: an editor's save is one change."""


@dataclass(frozen=True, slots=True)
class Made:
    """What the last run (or regrade) was made from."""

    run_id: str
    """The last run: a regrade grades its outputs."""
    run_key: tuple[Any, ...]
    graders: tuple[tuple[str, str], ...]
    hashes: dict[str, str]


def run_key(plan: Plan, agent_hashes: dict[str, str]) -> tuple[Any, ...]:
    """Everything but the graders that makes a run what it is: a change here needs a new run."""
    return (
        plan.spec.name,
        plan.task_hash,
        plan.dataset.ref,
        plan.dataset.digest,
        plan.trials,
        tuple(case.id for case in plan.cases),
        plan.seq,
        tuple(sorted(agent_hashes.items())),
    )


def grader_key(plan: Plan) -> tuple[tuple[str, str], ...]:
    return tuple((g.name, g.version) for g in plan.graders)


def _clock() -> str:
    return utcnow().astimezone().strftime("%H:%M:%S")


def _counts_text(counts: Tally) -> str:
    errors = counts.infra_errors + counts.agent_errors
    if not errors:
        return ""
    plural = "s" if errors != 1 else ""
    return f", {errors} error{plural} ({counts.infra_errors} infra, {counts.agent_errors} agent)"


class Watch:
    def __init__(
        self,
        db: Database,
        args: argparse.Namespace,
        cwd: Path,
        holder: dict[str, Any],
        session: SessionRow | None,
    ) -> None:
        self.db = db
        self.args = args
        self.cwd = cwd
        self.holder = holder
        self.session = session
        self.spec_path = Path(args.spec)
        self.made: Made | None = None
        self.watched: set[str] = {os.path.realpath(self.spec_path)}
        self.noted: set[str] = set()

    async def step(self, event: Event) -> None:
        """Act on a change of the files (or Enter): run, regrade, or nothing."""
        try:
            plan = await make_run_plan(self.db, self.args, self.cwd)
        except ConfigError as exc:
            self._error(exc)
            return
        sources = plan_sources(self.spec_path, plan)
        self.watched = {os.path.realpath(p) for p in sources.all()}
        now = hashes(sources.all(), self.cwd)
        key = run_key(plan, hashes([*sources.agent, *sources.env], self.cwd))
        made = self.made
        if event == "files" and made is not None:
            if now == made.hashes:
                return
            if key == made.run_key:
                if grader_key(plan) == made.graders:
                    self.made = Made(made.run_id, made.run_key, made.graders, now)
                    return
                await self._regrade(plan, made, now)
                return
        await self._run(plan, sources, now)

    def _error(self, exc: ConfigError) -> None:
        print(f"{_clock()} error: {exc}", file=sys.stderr, flush=True)

    async def _run(self, plan: Plan, sources: Sources, now: dict[str, str]) -> None:
        try:
            done = await run_once(self.db, self.args, self.cwd, self.holder, self.session, plan)
        except ConfigError as exc:
            self._error(exc)
            return
        # A file an env value names that changed while the run was going was written by the
        # agent (a log): taken as it is now, or each run would start the next one.
        written = {
            name: digest
            for name, digest in hashes(list(sources.env), self.cwd).items()
            if digest != now.get(name)
        }
        if written.keys() - self.noted:
            self.noted |= written.keys()
            print(
                f"{_clock()} note: {', '.join(sorted(written))} changed while the run was "
                "going: taken as written by the agent, not as a change to run again for (save "
                "it again, or press Enter, to run with an edit made meanwhile)",
                file=sys.stderr,
                flush=True,
            )
        now = {**now, **written}
        agent = [shown(path, self.cwd) for path in (*sources.agent, *sources.env)]
        key = run_key(plan, {name: now[name] for name in agent})
        self.made = Made(done.row.id, key, grader_key(plan), now)
        lines: list[str] = []
        session_body = None
        if self.session is not None and done.entry is not None:
            lines, session_body = await session_report(self.db, self.session, done.row, done.entry)
        counts = done.counts
        if self.args.json:
            body = {"at": utcnow().isoformat(), **summary_json(done.row, counts, done.finished)}
            body.update(ranNow=done.ran, taskCalls=None, session=session_body)
            _emit_json(body)
            return
        line = (
            f"{_clock()} run {done.row.id}  {pass_text(counts.passed, counts.graded)}  "
            f"{counts.done} case runs{_counts_text(counts)}"
        )
        if not done.finished:
            line += f" of {done.row.planned} (partial)"
        _emit([line, *lines])

    async def _regrade(self, plan: Plan, made: Made, now: dict[str, str]) -> None:
        source = await get_experiment(self.db, made.run_id)
        if source is None:
            print(f"{_clock()} error: the last run {made.run_id} is gone", file=sys.stderr)
            return
        done = await regrade_experiment(
            self.db, source, plan.graders, self.args.concurrency, self.cwd
        )
        self.made = Made(made.run_id, made.run_key, grader_key(plan), now)
        counts = (await tally(self.db, [done.row.id]))[done.row.id]
        lines: list[str] = []
        session_body = None
        if self.session is not None:
            entry = await join(self.db, self.session, done.row, now, "regrade")
            lines, session_body = await session_report(self.db, self.session, done.row, entry)
        if self.args.json:
            body = {"at": utcnow().isoformat(), **summary_json(done.row, counts, True)}
            body.update(ranNow=0, taskCalls=0, session=session_body)
            _emit_json(body)
            return
        line = (
            f"{_clock()} regrade {done.row.id}  {pass_text(counts.passed, counts.graded)}  "
            f"regrade of {source.id}, 0 task calls"
        )
        _emit([line, *lines])

    def directories(self) -> set[str]:
        return {os.path.dirname(p) for p in self.watched if os.path.isdir(os.path.dirname(p))}

    def watches(self, path: str) -> bool:
        return os.path.realpath(path) in self.watched


def _emit(lines: list[str]) -> None:
    print("\n".join(lines), flush=True)


def _emit_json(body: dict[str, Any]) -> None:
    print(json.dumps(body, ensure_ascii=False, allow_nan=False), flush=True)


async def _watch_files(
    directories: set[str], watch: Watch, events: asyncio.Queue[Event], stop: asyncio.Event
) -> None:
    from watchfiles import awatch

    async for _ in awatch(
        *sorted(directories),
        watch_filter=lambda _change, path: watch.watches(path),
        debounce=DEBOUNCE_MS,
        step=50,
        stop_event=stop,
        recursive=False,
    ):
        events.put_nowait("files")


def _read_keys(
    fd: int, terminal: bool, loop: asyncio.AbstractEventLoop, events: asyncio.Queue[Event]
) -> None:
    """Read stdin until its end: Enter and q from a terminal, nothing but the end otherwise."""

    def post(event: Event) -> bool:
        try:
            loop.call_soon_threadsafe(events.put_nowait, event)
        except RuntimeError:  # the loop is closed: the watch is over
            return False
        return True

    while True:
        try:
            data = os.read(fd, 1024)
        except OSError:
            data = b""
        if not data:
            post("quit")
            return
        if not terminal:
            continue
        for byte in data:
            if byte in (ord("\n"), ord("\r")):
                if not post("enter"):
                    return
            elif byte in (ord("q"), ord("Q"), 4):  # 4: Ctrl-D, delivered as a byte in cbreak
                post("quit")
                return


@contextlib.contextmanager
def _keys(events: asyncio.Queue[Event]) -> Iterator[bool | None]:
    """Read stdin on a thread of its own; a terminal is put in cbreak mode (keys arrive
    without Enter) and restored at the end. Yields whether stdin is a terminal (None: no
    stdin)."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        yield None
        return
    terminal = os.isatty(fd)
    saved = None
    if terminal:
        import termios
        import tty

        saved = termios.tcgetattr(fd)
        tty.setcbreak(fd)
    thread = threading.Thread(
        target=_read_keys,
        args=(fd, terminal, asyncio.get_running_loop(), events),
        name="neens-watch-keys",
        daemon=True,
    )
    thread.start()
    try:
        yield terminal
    finally:
        if saved is not None:
            import termios

            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _next(events: asyncio.Queue[Event], first: Event) -> Event:
    """The event to act on after `first` and whatever else is queued: quit before Enter before
    a change of the files."""
    found = {first}
    while not events.empty():
        found.add(events.get_nowait())
    order: tuple[Event, ...] = ("quit", "enter", "files")
    return next(event for event in order if event in found)


async def watch_command(args: argparse.Namespace, holder: dict[str, Any]) -> int:
    cwd = Path.cwd()
    events: asyncio.Queue[Event] = asyncio.Queue()
    async with open_store(args.database_url) as db:
        session = await current_session(db, folder_key(cwd))
        watch = Watch(db, args, cwd, holder, session)
        with _keys(events) as terminal:
            await watch.step("enter")
            how = "Enter runs again, q quits" if terminal else "the end of stdin or Ctrl-C stops it"
            names = ", ".join(sorted(shown(Path(p), cwd) for p in watch.watched))
            print(f"watching {names}; {how}", file=sys.stderr, flush=True)
            watching: set[str] = set()
            stop = asyncio.Event()
            watcher: asyncio.Task[None] | None = None
            try:
                while True:
                    directories = watch.directories()
                    if directories != watching or watcher is None or watcher.done():
                        if watcher is not None:
                            stop.set()
                            await asyncio.gather(watcher, return_exceptions=True)
                        stop = asyncio.Event()
                        watcher = asyncio.create_task(
                            _watch_files(directories, watch, events, stop)
                        )
                        watching = directories
                    event = _next(events, await events.get())
                    if event == "quit":
                        break
                    await watch.step(event)
            finally:
                if watcher is not None:
                    stop.set()
                    await asyncio.gather(watcher, return_exceptions=True)
    return 0
