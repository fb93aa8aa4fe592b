"""The sweep roll-up rules, on plain data: pass^k per arm, failure isolation, void."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neens.domain.run_lifecycle import RunStatus
from neens.domain.sweeps import (
    ArmRows,
    ChildRun,
    Conditions,
    Slot,
    arm_shares,
    is_green,
    roll_up,
)

PINNED = Conditions.of(
    dataset_version_id="dsv_1",
    judge_ids=["jdg_b", "jdg_a"],
    pass_k=3,
    version_label="v1",
    gate={"min_pass_rate": 0.9},
)


def child(
    n: int, status: RunStatus = "completed", green: bool | None = True, **over: Any
) -> ChildRun:
    values: dict[str, Any] = {
        "run_id": f"ppr_{n}",
        "status": status,
        "dataset_version_id": "dsv_1",
        "judge_ids": ("jdg_a", "jdg_b"),
        "version_label": "v1",
        "gate": {"min_pass_rate": 0.9},
        "item_count": 10,
        "items_done": 10 if status != "running" else 4,
        "green": green if status != "running" else None,
        "error": "every item failed" if status == "failed" else None,
    }
    values.update(over)
    return ChildRun(**values)


def arm(label: str, runs: list[ChildRun | None | str], k: int = 3, **over: Any) -> ArmRows:
    """`runs`: a ChildRun (launched, found), a str (launched, vanished), None (not launched)."""
    slots = []
    for attempt in range(k):
        entry = runs[attempt] if attempt < len(runs) else None
        if isinstance(entry, ChildRun):
            slots.append(Slot(attempt, entry.run_id, entry))
        elif isinstance(entry, str):
            slots.append(Slot(attempt, entry, None))
        else:
            slots.append(Slot(attempt, None, None))
    return ArmRows(f"msa-{label}", label, over.get("status", "pending"), over.get("error"), slots)


def rolled(*arms: ArmRows, stored: Any = "running") -> Any:
    return roll_up(PINNED, arms, item_count=10, stored_status=stored)


def test_passed_is_unset_until_k_runs_finished_then_true_only_when_all_are_green() -> None:
    sweep = rolled(
        arm("two-green", [child(1), child(2)]),
        arm("running", [child(3), child(4), child(5, "running")]),
        arm("all-green", [child(6), child(7), child(8)]),
        arm("two-of-three", [child(9), child(10, green=False), child(11)]),
    )
    passed = {a.label: a.passed for a in sweep.arms}
    assert passed == {
        "two-green": None, "running": None, "all-green": True, "two-of-three": False,
    }  # fmt: skip
    greens = {a.label: a.green_runs for a in sweep.arms}
    assert greens == {"two-green": 2, "running": 2, "all-green": 3, "two-of-three": 2}
    assert sweep.status == "running"


def test_progress_counts_runs_and_items() -> None:
    [a] = rolled(arm("x", [child(1), child(2, "running")])).arms
    assert (a.runs_finished, a.runs, a.items_done, a.items_total) == (1, 3, 14, 30)
    assert a.run_ids == ["ppr_1", "ppr_2"]
    assert a.next_attempt() is None, "the running run must finish first"
    [b] = rolled(arm("y", [child(1)])).arms
    assert b.next_attempt() == 1


def test_a_failed_run_fails_its_arm_alone_and_the_sweep_completes_with_failures() -> None:
    sweep = rolled(
        arm("dead", [child(1, "failed", green=False)]),
        arm("alive", [child(2), child(3), child(4)]),
    )
    dead, alive = sweep.arms
    assert (dead.status, dead.passed) == ("failed", None)
    assert "ppr_1 failed: every item failed" in (dead.error or "")
    assert dead.next_attempt() is None
    assert (alive.status, alive.passed) == ("completed", True)
    assert sweep.status == "completed_with_failures"


def test_every_arm_failed_is_a_failed_sweep_and_a_running_arm_keeps_it_running() -> None:
    both = rolled(arm("a", [child(1, "failed")]), arm("b", [child(2, "failed")]))
    assert both.status == "failed" and both.reason and both.reason.startswith("every arm failed")
    one_left = rolled(arm("a", [child(1, "failed")]), arm("b", [child(2, "running")]))
    assert one_left.status == "running"


def test_a_child_run_cancelled_on_its_own_fails_its_arm() -> None:
    [a] = rolled(arm("a", [child(1, "cancelled", green=False)])).arms
    assert a.status == "failed" and "was cancelled" in (a.error or "")


def test_a_cancelled_sweep_cancels_unfinished_arms_and_keeps_finished_ones() -> None:
    sweep = roll_up(
        PINNED,
        [arm("done", [child(1), child(2), child(3)]), arm("mid", [child(4, "cancelled")])],
        item_count=10,
        stored_status="cancelled",
        stored_reason="cancelled by request",
    )
    assert sweep.status == "cancelled" and sweep.reason == "cancelled by request"
    assert [(a.status, a.passed) for a in sweep.arms] == [("completed", True), ("cancelled", None)]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"judge_ids": ("jdg_a",)}, "judge set"),
        ({"dataset_version_id": "dsv_2"}, "dataset version dsv_2"),
        ({"version_label": "v2"}, "version label 'v2'"),
        ({"gate": {"min_pass_rate": 0.5}}, "gate"),
    ],
)
def test_a_child_run_under_other_conditions_voids_the_sweep_naming_the_arm(
    change: dict[str, Any], words: str
) -> None:
    sweep = rolled(
        arm("ok", [child(1), child(2), child(3)]),
        arm("off", [child(4), child(5, **change), child(6)]),
    )
    assert sweep.status == "void"
    assert sweep.diverged_arms == ["off"]
    assert sweep.void_reason and "arm 'off'" in sweep.void_reason and words in sweep.void_reason
    assert "ppr_5" in sweep.void_reason
    assert [a.passed for a in sweep.arms] == [True, True], "arms' own numbers stay readable"


def test_a_vanished_run_or_one_never_created_voids_the_sweep() -> None:
    vanished = rolled(arm("a", [child(1), "ppr_gone"]), arm("b", [child(2)]))
    assert vanished.status == "void" and "run ppr_gone no longer exists" in (
        vanished.void_reason or ""
    )
    never = rolled(arm("a", [child(1), child(2)], k=3, status="completed"), arm("b", [child(3)]))
    # An arm still going may not have launched its last run yet: that is not divergence.
    assert never.status == "running"
    short = roll_up(
        PINNED,
        [arm("a", [child(1), child(2)], k=2), arm("b", [child(3), child(4), child(5)])],
        item_count=10,
        stored_status="running",
    )
    assert short.status == "void" and short.diverged_arms == ["a"]
    assert "2 runs instead of k = 3" in (short.void_reason or "")


def test_void_is_terminal_whatever_the_runs_say_now() -> None:
    sweep = roll_up(
        PINNED,
        [arm("a", [child(1), child(2), child(3)]), arm("b", [child(4), child(5), child(6)])],
        item_count=10,
        stored_status="void",
        stored_void_reason="arm 'b' diverged",
        stored_diverged=["b"],
    )
    assert (sweep.status, sweep.void_reason, sweep.diverged_arms) == (
        "void", "arm 'b' diverged", ["b"],
    )  # fmt: skip


def test_the_fingerprint_ignores_judge_order_and_the_model_and_changes_with_each_condition() -> (
    None
):
    same = Conditions.of(
        dataset_version_id="dsv_1", judge_ids=["jdg_a", "jdg_b"], pass_k=3,
        version_label="v1", gate={"min_pass_rate": 0.9},
    )  # fmt: skip
    assert same.fingerprint() == PINNED.fingerprint()
    assert PINNED.fingerprint().startswith("sha256:") and len(PINNED.fingerprint()) == 71
    variants = [
        {"dataset_version_id": "dsv_2"},
        {"judge_ids": ["jdg_a"]},
        {"pass_k": 2},
        {"version_label": "v2"},
        {"gate": {}},
    ]
    base = {
        "dataset_version_id": "dsv_1", "judge_ids": ["jdg_a", "jdg_b"], "pass_k": 3,
        "version_label": "v1", "gate": {"min_pass_rate": 0.9},
    }  # fmt: skip
    prints = {Conditions.of(**{**base, **v}).fingerprint() for v in variants}  # type: ignore[arg-type]
    assert len(prints) == len(variants) and PINNED.fingerprint() not in prints


@given(total=st.integers(min_value=1, max_value=2000), arms=st.integers(min_value=1, max_value=64))
def test_arm_shares_split_the_concurrency_evenly(total: int, arms: int) -> None:
    shares = arm_shares(total, arms)
    assert len(shares) == arms
    assert min(shares) >= 1
    assert max(shares) - min(shares) <= 1
    assert sum(shares) == max(total, arms)
    assert shares == sorted(shares, reverse=True)


def test_arm_shares_of_32_over_6() -> None:
    assert arm_shares(32, 6) == [6, 6, 5, 5, 5, 5]


def test_green_means_completed_gate_passed_and_no_regression() -> None:
    assert is_green("completed", True, 0)
    assert not is_green("completed", False, 0)
    assert not is_green("completed", True, 1)
    assert not is_green("completed_with_regressions", True, 0)
    assert not is_green("failed", True, 0)
