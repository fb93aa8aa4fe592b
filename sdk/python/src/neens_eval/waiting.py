"""Waiting for a run's verdict, with a live progress line on standard error; and, for model
sweeps, `wait_until_terminal` with a `Board` of live lines, one per arm.

On a terminal the progress line is rewritten in place; in a CI log (not a terminal) it is printed
as a new line only when it changes, and at most every `LOG_EVERY_S` seconds unless the run's
status changed, so a long run does not flood the log.

The wait ends when the run is terminal (`finished`), when `--timeout` runs out (`timeout`), or,
when some items' commands failed locally, when every item still pending on the server is one of
those (`stalled`): their traces will never come, so waiting longer cannot bring a verdict.
"""

from __future__ import annotations

import shutil
import time
import urllib.parse
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, TextIO

from neens_eval.client import Client, expect_object, unexpected

TERMINAL: Final = frozenset({"completed", "completed_with_regressions", "failed", "cancelled"})
LOG_EVERY_S: Final = 10.0
STALL_GRACE_S: Final = 2.0
"""How long the pending set must stay made of locally failed items only before the wait stops:
a trace exported just before its command crashed may still be on its way."""

WaitOutcome = Literal["finished", "timeout", "stalled"]


class Progress:
    """One live status line on `stream`, plus permanent log lines above it."""

    def __init__(self, stream: TextIO, *, interactive: bool | None = None) -> None:
        self.stream = stream
        if interactive is None:
            isatty = getattr(stream, "isatty", None)
            interactive = bool(isatty and isatty())
        self.interactive = interactive
        self._shown = ""
        self._last_text = ""
        self._last_time = 0.0
        self._last_key = ""

    def update(self, text: str, *, key: str = "") -> None:
        """Show `text`; `key` (e.g. the run status) forces a log line when it changes."""
        if self.interactive:
            self.stream.write("\r\x1b[2K" + text)
            self.stream.flush()
            self._shown = text
            return
        now = time.monotonic()
        if text == self._last_text:
            return
        if key == self._last_key and now - self._last_time < LOG_EVERY_S and self._last_text:
            return
        self.stream.write(text + "\n")
        self.stream.flush()
        self._last_text, self._last_time, self._last_key = text, now, key

    def log(self, text: str) -> None:
        """A line that stays (the live line, if any, is redrawn below it)."""
        if self.interactive and self._shown:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        if self.interactive and self._shown:
            self.stream.write(self._shown)
        self.stream.flush()

    def close(self) -> None:
        if self.interactive and self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = ""


@dataclass(frozen=True, slots=True)
class WaitResult:
    run: dict[str, Any]
    outcome: WaitOutcome
    waited_s: float


@dataclass(frozen=True, slots=True)
class LastSeen:
    """The run as last read from the server, and when: what is known once it stops answering."""

    at: datetime
    run: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "status": self.run.get("status"),
            "itemCount": self.run.get("itemCount"),
            "counts": self.run.get("counts"),
        }


class ObjectPoller:
    """Reads one object of the API again and again, with a gentle back-off: quick at first,
    then every `max_interval` s. `seen_at` is when it was last read successfully."""

    def __init__(self, client: Client, path: str, *, max_interval: float = 2.0) -> None:
        self.client = client
        self.path = path
        self.interval = 0.2
        self.max_interval = max_interval
        self.seen_at: datetime | None = None

    def read(self) -> dict[str, Any]:
        document = expect_object(self.client.get(self.path), f"GET {self.path}")
        self.seen_at = datetime.now(UTC)
        return document

    def sleep(self) -> None:
        time.sleep(self.interval)
        self.interval = min(self.interval * 1.5, self.max_interval)


class Poller(ObjectPoller):
    """Polls a pre-prod run and its items."""

    def __init__(self, client: Client, run_id: str, *, max_interval: float = 2.0) -> None:
        path = f"/preprod-evals/{urllib.parse.quote(run_id, safe='')}"
        super().__init__(client, path, max_interval=max_interval)
        self.run_id = run_id
        self.last_seen: LastSeen | None = None

    def run(self) -> dict[str, Any]:
        run = self.read()
        self.last_seen = LastSeen(datetime.now(UTC), run)
        return run

    def items(self) -> list[dict[str, Any]]:
        answer = expect_object(self.client.get(f"{self.path}/items"), f"GET {self.path}/items")
        items = answer.get("items")
        if not isinstance(items, list):
            raise unexpected(f"GET {self.path}/items", "an 'items' list")
        return [item for item in items if isinstance(item, dict)]


def wait_for_verdict(
    poller: Poller,
    *,
    timeout_s: float,
    progress: Progress,
    describe: Callable[[dict[str, Any], float], str],
    failed_locally: Collection[str] = (),
    report_failed: Callable[[list[str]], bool] | None = None,
) -> WaitResult:
    """Poll until the run is terminal, stalled on locally failed items, or `timeout_s` passed.

    When only locally failed items are left pending (for `STALL_GRACE_S`, in case their traces
    are still on the way), `report_failed` is asked to record them on the server as errors; the
    run then finishes with them counted, and the wait goes on to the real verdict. Without it,
    or when reporting fails, the wait ends as "stalled".
    """
    started = time.monotonic()
    deadline = started + timeout_s
    stalled_since: float | None = None
    reported = False
    while True:
        run = poller.run()
        now = time.monotonic()
        status = str(run.get("status"))
        progress.update(describe(run, now - started), key=status)
        if status in TERMINAL:
            return WaitResult(run, "finished", now - started)
        still = _failed_still_pending(poller, run, failed_locally) if failed_locally else set()
        if still and not reported:
            stalled_since = stalled_since if stalled_since is not None else now
            if now - stalled_since >= STALL_GRACE_S:
                if report_failed is None or not report_failed(sorted(still)):
                    return WaitResult(run, "stalled", now - started)
                reported = True
        else:
            stalled_since = None
        if now >= deadline:
            return WaitResult(run, "timeout", now - started)
        poller.sleep()


def _failed_still_pending(poller: Poller, run: dict[str, Any], failed: Collection[str]) -> set[str]:
    """The locally failed items, when they are all that is left pending; else nothing."""
    counts = run.get("counts")
    pending = counts.get("pending") if isinstance(counts, dict) else None
    if isinstance(pending, int) and not 0 < pending <= len(failed):
        # Nothing pending (scoring is under way), or an item that ran fine is still on its way.
        return set()
    still = {str(item.get("item_id")) for item in poller.items() if item.get("status") == "pending"}
    return still if still and still <= set(failed) else set()


@dataclass(frozen=True, slots=True)
class BoardRow:
    """One live line of a `Board`: `key` names the row (an arm's label), `milestone` is the part
    of its state that is worth a log line at once when it changes (its status, its runs)."""

    key: str
    text: str
    milestone: str


class Board:
    """Several live lines on `stream`, one per row: a sweep's arms, each in its own state.

    On a terminal the rows are redrawn in place; in a CI log a row is printed again only when
    its text changed, and at most every `LOG_EVERY_S` seconds unless its milestone changed, so
    item counts ticking up do not flood the log while a new status or a finished run shows at once.
    """

    def __init__(self, stream: TextIO, *, interactive: bool | None = None) -> None:
        self.stream = stream
        if interactive is None:
            isatty = getattr(stream, "isatty", None)
            interactive = bool(isatty and isatty())
        self.interactive = interactive
        self._shown: list[str] = []
        self._last: dict[str, tuple[str, str, float]] = {}

    def update(self, rows: list[BoardRow]) -> None:
        """Show `rows`, in order."""
        if self.interactive:
            self._erase()
            # A row wider than the terminal would wrap, and the redraw would miscount the lines.
            width = max(shutil.get_terminal_size().columns - 1, 20)
            self._shown = [_fit(row.text, width) for row in rows]
            self._draw()
            self.stream.flush()
            return
        now = time.monotonic()
        for row in rows:
            last = self._last.get(row.key)
            if last is not None:
                text, milestone, at = last
                if row.text == text:
                    continue
                if row.milestone == milestone and now - at < LOG_EVERY_S:
                    continue
            self.stream.write(row.text + "\n")
            self._last[row.key] = (row.text, row.milestone, now)
        self.stream.flush()

    def log(self, text: str) -> None:
        """A line that stays above the live rows."""
        self._erase()
        self.stream.write(text + "\n")
        self._draw()
        self.stream.flush()

    def close(self) -> None:
        """Take the live rows off a terminal (a CI log keeps what it printed)."""
        self._erase()
        self._shown = []
        self.stream.flush()

    def _erase(self) -> None:
        if self.interactive and self._shown:
            # To the start of the first live row, then clear to the end of the screen.
            self.stream.write(f"\x1b[{len(self._shown)}F\x1b[J")

    def _draw(self) -> None:
        if self.interactive:
            for text in self._shown:
                self.stream.write(text + "\n")


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True, slots=True)
class ObjectWait:
    document: dict[str, Any]
    outcome: Literal["finished", "timeout"]
    waited_s: float


def wait_until_terminal(
    poller: ObjectPoller,
    *,
    terminal: Collection[str],
    timeout_s: float,
    show: Callable[[dict[str, Any]], None],
    first: dict[str, Any] | None = None,
) -> ObjectWait:
    """Read the object until its `status` is one of `terminal`, or `timeout_s` passed; `show`
    is called with each read. `first`, when given, is used as the first read (just created)."""
    started = time.monotonic()
    deadline = started + timeout_s
    document = first
    while True:
        if document is None:
            document = poller.read()
        now = time.monotonic()
        show(document)
        if str(document.get("status")) in terminal:
            return ObjectWait(document, "finished", now - started)
        if now >= deadline:
            return ObjectWait(document, "timeout", now - started)
        poller.sleep()
        document = None
