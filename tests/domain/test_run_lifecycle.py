"""The run lifecycle's rules: which moves are allowed, and how a refused one is told."""

from __future__ import annotations

import pytest

from neens.domain.run_lifecycle import (
    RUN_STATUSES,
    TERMINAL,
    TRANSITIONS,
    RunStatus,
    can_move,
    check_move,
    first_status,
)
from neens.errors import Conflict, RunTransitionRefused

ALLOWED: set[tuple[RunStatus, RunStatus]] = {
    ("awaiting_traces", "running"),
    ("awaiting_traces", "cancelled"),
    ("running", "completed"),
    ("running", "completed_with_regressions"),
    ("running", "failed"),
    ("running", "cancelled"),
}
"""The design's diagram (DESIGN.md, design/run-lifecycle.md), move by move."""


def test_the_allowed_moves_are_exactly_the_diagrams() -> None:
    moves = {(a, b) for a in RUN_STATUSES for b in RUN_STATUSES if can_move(a, b)}
    assert moves == ALLOWED
    assert set(TRANSITIONS) == set(RUN_STATUSES)


def test_a_finished_run_never_moves_again() -> None:
    assert TERMINAL == {"completed", "completed_with_regressions", "failed", "cancelled"}
    for status in TERMINAL:
        assert TRANSITIONS[status] == frozenset()


@pytest.mark.parametrize("finished", sorted(TERMINAL))
@pytest.mark.parametrize("to", sorted(TERMINAL))
def test_terminal_to_terminal_is_refused_naming_both_ends(finished: str, to: RunStatus) -> None:
    with pytest.raises(RunTransitionRefused) as refused:
        check_move("ppr_1", finished, to)
    assert str(refused.value) == (
        f"run ppr_1 cannot move from {finished} to {to}: it has finished, and a finished run "
        "never changes status"
    )
    assert (refused.value.current, refused.value.to) == (finished, to)
    assert isinstance(refused.value, Conflict)  # a 409 if it reaches the API


def test_a_skipped_step_is_refused_with_the_moves_that_are_allowed() -> None:
    with pytest.raises(
        RunTransitionRefused,
        match="from awaiting_traces a run may only move to cancelled or running",
    ):
        check_move("ppr_1", "awaiting_traces", "completed")
    with pytest.raises(RunTransitionRefused, match="'finished' is not a run status"):
        check_move("ppr_1", "finished", "running")


def test_an_allowed_move_passes() -> None:
    for current, to in ALLOWED:
        check_move("ppr_1", current, to)


def test_a_push_run_starts_running_and_a_runner_run_waits_for_traces() -> None:
    assert first_status("push") == "running"
    assert first_status("runner") == "awaiting_traces"
