"""The live bar: counts, errors and cost so far on a terminal; nothing when stderr is not one."""

from __future__ import annotations

import io

from rich.console import Console

from neens.exp.progress import RunProgress, cost_text


def test_cost_so_far_never_counts_unpriced_as_free() -> None:
    assert cost_text(0.0, 0, 0) == "$0"
    assert cost_text(0.0, 0, 3) == "unpriced"
    assert cost_text(0.01234, 2, 3) == "$0.0123 (1 unpriced)"
    assert cost_text(0.5, 4, 4) == "$0.5000"


def test_the_bar_shows_done_of_planned_errors_and_cost_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160)
    with RunProgress(total=10, done=4, label="exp_X", console=console) as progress:
        progress.advance(error=False, cost_usd=0.25)
        progress.advance(error=True, cost_usd=None)
    text = out.getvalue()
    assert "6/10" in text and "1 error " in text and "cost $0.2500 (1 unpriced)" in text


def test_no_bar_when_stderr_is_not_a_terminal() -> None:
    with RunProgress(total=2, done=0, label="exp_X") as progress:
        progress.advance(error=False, cost_usd=None)
    assert progress.done == 1
