"""The live progress bar of a run, on stderr when stderr is a terminal (else nothing).

It shows the case-trials done out of those planned (a resumed run starts from what was saved),
the errors so far, the time left at the pace so far, and the cost so far: the sum of the priced
case-trials, with how many could not be priced, never counting those as free.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)


def cost_text(cost_usd: float | None, priced: int, done: int) -> str:
    """ "$0.0123", "$0.0123 (3 unpriced)", "unpriced" when nothing could be priced, or "too
    large to represent" when the sum overflows (None or not finite): never "$inf"."""
    if done == 0:
        return "$0"
    if priced == 0:
        return "unpriced"
    unpriced = done - priced
    suffix = f" ({unpriced} unpriced)" if unpriced else ""
    if cost_usd is None or not math.isfinite(cost_usd):
        return f"too large to represent{suffix}"
    return f"${cost_usd:.4f}{suffix}"


class RunProgress:
    """Use as a context manager; `advance` after each saved case-trial."""

    def __init__(self, *, total: int, done: int, label: str, console: Console | None = None):
        self.total = total
        self.done = done
        self.errors = 0
        self.cost_usd = 0.0
        self.priced = 0
        self.counted = 0
        self._console = console
        if console is None and sys.stderr.isatty():
            self._console = Console(file=sys.stderr)
        self._progress: Progress | None = None
        self._task: Any = None
        self._label = label

    def __enter__(self) -> RunProgress:
        if self._console is not None:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[errors]}"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[cost]}"),
                console=self._console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(
                self._label, total=self.total, completed=self.done, errors="", cost="cost $0"
            )
        return self

    def advance(self, *, error: bool, cost_usd: float | None) -> None:
        self.done += 1
        self.counted += 1
        self.errors += int(error)
        if cost_usd is not None:
            self.cost_usd += cost_usd
            self.priced += 1
        if self._progress is not None:
            self._progress.update(
                self._task,
                advance=1,
                errors=f"{self.errors} error{'s' if self.errors != 1 else ''}"
                if self.errors
                else "",
                cost=f"cost {cost_text(self.cost_usd, self.priced, self.counted)}",
            )

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
