"""The statuses of a pre-prod run and of its items, and which way a run may move.

    run:   awaiting_traces ──▶ running ──▶ completed | completed_with_regressions | failed
                 │                │
                 └──────────────▶ cancelled ◀──┘
    item:  pending ──▶ captured ──▶ scored | error
              └─────────────────────────────▶ error   (the call failed, or the runner said so)

A push run starts `running` (Neens calls the agent at once); a runner run starts
`awaiting_traces` until its first trace or reported item error. A terminal status is final: a
finished run is never finished again, so anything that happens once per finished run (the
`run.finished` job) happens once. `neens.store.run_lifecycle` is the one writer that applies
these rules; design/run-lifecycle.md says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, cast, get_args

from neens.errors import Conflict, RunTransitionRefused

__all__ = [
    "IMPORT_MODE",
    "ITEM_STATUSES",
    "RUN_STATUSES",
    "TERMINAL",
    "TRANSITIONS",
    "ItemStatus",
    "RunStatus",
    "can_move",
    "check_move",
    "first_status",
    "refuse_imported",
]

RunStatus = Literal[
    "awaiting_traces", "running", "completed", "completed_with_regressions", "failed", "cancelled"
]
ItemStatus = Literal["pending", "captured", "scored", "error"]

RUN_STATUSES: Final[tuple[RunStatus, ...]] = get_args(RunStatus)
ITEM_STATUSES: Final[tuple[ItemStatus, ...]] = get_args(ItemStatus)

TERMINAL: Final[frozenset[RunStatus]] = frozenset(
    {"completed", "completed_with_regressions", "failed", "cancelled"}
)
"""A run in one of these is finished: no trace links to it, no job works on it, and it never
changes status again."""

TRANSITIONS: Final[Mapping[RunStatus, frozenset[RunStatus]]] = {
    "awaiting_traces": frozenset({"running", "cancelled"}),
    "running": frozenset({"completed", "completed_with_regressions", "failed", "cancelled"}),
    **{status: frozenset() for status in TERMINAL},
}
"""Where a run may go from each status. A run waiting for traces has no job that could fail
it, so it only starts or is cancelled."""


def first_status(runner_mode: str) -> RunStatus:
    """A new run's status: a push run is worked at once, a runner run waits for its traces."""
    return "running" if runner_mode == "push" else "awaiting_traces"


def can_move(current: str, to: RunStatus) -> bool:
    """Whether a run in `current` may move to `to`."""
    return to in TRANSITIONS.get(cast(RunStatus, current), frozenset())


def check_move(run_id: str, current: str, to: RunStatus) -> None:
    """Refuse a move the lifecycle does not allow, naming both ends."""
    if can_move(current, to):
        return
    if current in TERMINAL:
        why = "it has finished, and a finished run never changes status"
    elif current in TRANSITIONS:
        allowed = " or ".join(sorted(TRANSITIONS[cast(RunStatus, current)]))
        why = f"from {current} a run may only move to {allowed}"
    else:
        why = f"{current!r} is not a run status"
    raise RunTransitionRefused(
        f"run {run_id} cannot move from {current} to {to}: {why}",
        current=current,
        to=to,
    )


IMPORT_MODE: Final = "import"
"""The `runner_mode` of a run imported from another tool's results: neither Neens nor your runner
drove it, it was stored finished and it is read-only."""


def refuse_imported(run_id: str, runner_mode: str, tool: str | None, action: str) -> None:
    """Refuse `action` (e.g. "cancelled") on an imported run: its results are read-only."""
    if runner_mode == IMPORT_MODE:
        raise Conflict(
            f"run {run_id} is imported from {tool or 'another tool'}: its results are "
            f"read-only, so it cannot be {action}",
            field="run_id",
        )
