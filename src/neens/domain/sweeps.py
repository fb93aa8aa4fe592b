"""Model sweeps: the conditions fingerprint, the roll-up of child runs into arms, and void.

A sweep replays one frozen dataset version against several arms (one agent connection each),
k runs per arm, under conditions pinned at create. Everything here is recomputed from the child
runs as they are persisted, never from counters kept along the way:

- **Fingerprint.** The pinned conditions are the dataset version, the sorted judge set, k, the
  version label and the gate policy: not the model, which is what a sweep varies. At every
  roll-up they are re-derived from each child run's own persisted values (k from the number of
  runs the arm holds); any difference, a child run that vanished, or one that was never created
  makes the sweep `void`. Void is terminal and names the arms that diverged.
- **pass^k, per arm.** An arm passes only when k runs finished and every one is green (completed,
  gate passed, zero regressions). While fewer than k finished, `passed` is None: the greens so
  far are never a verdict.
- **Failure stays in its arm.** A child run that fails (its endpoint is dead: every item failed)
  fails its arm, with the run's error; the other arms run on. A sweep whose arms all ended is
  `completed` (all completed), `failed` (all failed) or `completed_with_failures` (both).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from neens.domain.run_lifecycle import TERMINAL as RUN_TERMINAL
from neens.domain.run_lifecycle import RunStatus

SweepStatus = Literal[
    "pending", "running", "completed", "completed_with_failures", "failed", "cancelled", "void"
]
ArmStatus = Literal["pending", "running", "completed", "failed", "cancelled"]

SWEEP_TERMINAL: frozenset[str] = frozenset(
    {"completed", "completed_with_failures", "failed", "cancelled", "void"}
)
ARM_TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class Conditions:
    """What every child run of a sweep shares: the controlled variables."""

    dataset_version_id: str
    judge_ids: tuple[str, ...]
    """Sorted: the judge set, not the order it was given in."""
    pass_k: int
    version_label: str
    gate: Mapping[str, Any]

    @classmethod
    def of(
        cls,
        *,
        dataset_version_id: str,
        judge_ids: Sequence[str],
        pass_k: int,
        version_label: str,
        gate: Mapping[str, Any],
    ) -> Conditions:
        return cls(dataset_version_id, tuple(sorted(judge_ids)), pass_k, version_label, gate)

    def fingerprint(self) -> str:
        """`sha256:` and the hex digest of the conditions as canonical JSON."""
        canonical = json.dumps(
            {
                "dataset_version_id": self.dataset_version_id,
                "judge_ids": list(self.judge_ids),
                "pass_k": self.pass_k,
                "version_label": self.version_label,
                "gate": self.gate,
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

    def differences(self, actual: Conditions) -> list[str]:
        """What in `actual` differs from these (pinned) conditions, in words."""
        found = []
        if actual.dataset_version_id != self.dataset_version_id:
            found.append(
                f"dataset version {actual.dataset_version_id} instead of {self.dataset_version_id}"
            )
        if actual.judge_ids != self.judge_ids:
            found.append(f"judge set {list(actual.judge_ids)} instead of {list(self.judge_ids)}")
        if actual.pass_k != self.pass_k:
            found.append(f"{actual.pass_k} runs instead of k = {self.pass_k}")
        if actual.version_label != self.version_label:
            found.append(
                f"version label {actual.version_label!r} instead of {self.version_label!r}"
            )
        if _canonical(actual.gate) != _canonical(self.gate):
            found.append(f"gate {dict(actual.gate)} instead of {dict(self.gate)}")
        return found


def _canonical(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ChildRun:
    """A child run as persisted."""

    run_id: str
    status: RunStatus
    dataset_version_id: str
    judge_ids: tuple[str, ...]
    version_label: str
    gate: Mapping[str, Any]
    item_count: int
    items_done: int | None
    """Items scored or errored; None when the roll-up was read without progress (a decision
    needs statuses and verdicts, not counts)."""
    green: bool | None
    """Completed, gate passed and zero regressions; None until the run finished."""
    error: str | None

    @property
    def finished(self) -> bool:
        return self.status in RUN_TERMINAL


@dataclass(frozen=True, slots=True)
class Slot:
    """One of an arm's k runs: not launched yet (`run_id` None), launched and found (`run`),
    or launched and gone (`run_id` set, `run` None)."""

    attempt: int
    run_id: str | None
    run: ChildRun | None


@dataclass(frozen=True, slots=True)
class ArmRows:
    """An arm as stored: its slots, and what the sweep recorded on it."""

    id: str
    label: str
    stored_status: ArmStatus
    stored_error: str | None
    slots: Sequence[Slot]


@dataclass(frozen=True, slots=True)
class ArmRollup:
    id: str
    label: str
    status: ArmStatus
    runs_finished: int
    runs: int
    items_done: int | None
    """None when read without progress (`ChildRun.items_done`)."""
    items_total: int
    green_runs: int
    passed: bool | None
    error: str | None
    run_ids: list[str]
    divergence: list[str] = field(default_factory=list)
    """Why this arm's conditions are not the pinned ones; empty when they are."""

    @property
    def terminal(self) -> bool:
        return self.status in ARM_TERMINAL

    def next_attempt(self) -> int | None:
        """The slot to launch now: the first not launched, when every launched run finished
        and the arm goes on; None otherwise."""
        if self.terminal or self.runs_finished < len(self.run_ids):
            return None
        return len(self.run_ids) if len(self.run_ids) < self.runs else None


@dataclass(frozen=True, slots=True)
class SweepRollup:
    status: SweepStatus
    arms: list[ArmRollup]
    void_reason: str | None
    diverged_arms: list[str]
    reason: str | None
    """Why the sweep failed (every arm's error), or the stored reason it was cancelled."""

    @property
    def terminal(self) -> bool:
        return self.status in SWEEP_TERMINAL


def roll_up(
    pinned: Conditions,
    arms: Sequence[ArmRows],
    *,
    item_count: int,
    stored_status: SweepStatus,
    stored_reason: str | None = None,
    stored_void_reason: str | None = None,
    stored_diverged: Sequence[str] = (),
) -> SweepRollup:
    """The sweep and its arms, from the child runs as they are now."""
    rolled = [_arm(pinned, arm, item_count, cancelled=stored_status == "cancelled") for arm in arms]
    diverged = [arm for arm in rolled if arm.divergence]
    if stored_status == "void":
        return SweepRollup("void", rolled, stored_void_reason, list(stored_diverged), stored_reason)
    if diverged:
        reason = "; ".join(f"arm {a.label!r}: {', '.join(a.divergence)}" for a in diverged)
        return SweepRollup(
            "void",
            rolled,
            f"the arms did not run under the pinned conditions, so no comparison is made "
            f"({reason})",
            [a.label for a in diverged],
            stored_reason,
        )
    return SweepRollup(
        _sweep_status(stored_status, rolled),
        rolled,
        None,
        [],
        _reason(stored_status, stored_reason, rolled),
    )


def _arm(pinned: Conditions, arm: ArmRows, item_count: int, *, cancelled: bool) -> ArmRollup:
    launched = [slot for slot in arm.slots if slot.run_id is not None]
    runs = [slot.run for slot in launched if slot.run is not None]
    finished = [run for run in runs if run.finished]
    divergence = _divergence(pinned, arm, launched)
    green = sum(1 for run in finished if run.green)
    k = len(arm.slots)
    status, error = _arm_status(arm, launched, finished, k, cancelled=cancelled)
    if status == "completed" and len(launched) < k:
        divergence.append(f"{k - len(launched)} of its {k} runs were never created")
    return ArmRollup(
        id=arm.id,
        label=arm.label,
        status=status,
        runs_finished=len(finished),
        runs=k,
        items_done=None
        if any(run.items_done is None for run in runs)
        else sum(run.items_done or 0 for run in runs),
        items_total=k * item_count,
        green_runs=green,
        passed=None if len(finished) < k else green == k,
        error=error,
        run_ids=[slot.run_id for slot in launched if slot.run_id is not None],
        divergence=divergence,
    )


def _divergence(pinned: Conditions, arm: ArmRows, launched: Sequence[Slot]) -> list[str]:
    found = []
    for slot in launched:
        run = slot.run
        if run is None:
            found.append(f"run {slot.run_id} no longer exists")
            continue
        actual = Conditions.of(
            dataset_version_id=run.dataset_version_id,
            judge_ids=run.judge_ids,
            pass_k=len(arm.slots),
            version_label=run.version_label,
            gate=run.gate,
        )
        found.extend(f"run {run.run_id} has {what}" for what in pinned.differences(actual))
    if len(arm.slots) != pinned.pass_k:  # k is the arm's own, even before a run exists
        found.append(f"it holds {len(arm.slots)} runs instead of k = {pinned.pass_k}")
    return list(dict.fromkeys(found))


def _arm_status(
    arm: ArmRows,
    launched: Sequence[Slot],
    finished: Sequence[ChildRun],
    k: int,
    *,
    cancelled: bool,
) -> tuple[ArmStatus, str | None]:
    if arm.stored_status == "failed":
        return "failed", arm.stored_error
    for run in finished:
        if run.status == "failed":
            return "failed", f"run {run.run_id} failed: {run.error or 'no error recorded'}"
        if run.status == "cancelled" and not cancelled:
            return "failed", f"run {run.run_id} was cancelled"
    if len(finished) == k:
        return "completed", None
    if cancelled or arm.stored_status == "cancelled":
        return "cancelled", None
    return ("running" if launched else "pending"), None


def _sweep_status(stored: SweepStatus, arms: Sequence[ArmRollup]) -> SweepStatus:
    if stored == "cancelled":
        return "cancelled"
    if arms and all(arm.terminal for arm in arms):
        failed = sum(1 for arm in arms if arm.status == "failed")
        if failed == 0:
            return "completed"
        return "failed" if failed == len(arms) else "completed_with_failures"
    return "running" if any(arm.run_ids for arm in arms) else "pending"


def _reason(
    stored: SweepStatus, stored_reason: str | None, arms: Sequence[ArmRollup]
) -> str | None:
    if stored == "cancelled":
        return stored_reason
    if arms and all(arm.status == "failed" for arm in arms):
        return "every arm failed: " + "; ".join(f"{a.label}: {a.error}" for a in arms)
    return None


def arm_shares(total: int, arms: int) -> list[int]:
    """How many calls each arm may have in flight: `total` split as evenly as it goes, the
    first arms taking the remainder, and never less than one each."""
    if arms <= 0:
        return []
    base, extra = divmod(total, arms)
    return [max(1, base + (1 if i < extra else 0)) for i in range(arms)]


def is_green(status: RunStatus, gate_passed: bool, regressions: int) -> bool:
    """A run counts toward pass^k only completed, with its gate passed and zero regressions."""
    return status == "completed" and gate_passed and regressions == 0
