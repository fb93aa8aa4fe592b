"""What `neens sweep` concludes from a sweep, and how it shows it: the exit code, the live line of
each arm, the final table, the preview.

The exit code, in order (one table for the whole CLI, docs/cli.md):
1. 4 (`EXIT_UNTRUSTED`) for a `void` sweep, always, with its void reason: its comparison is not
   fair. 4 for a `failed` sweep, and for a `cancelled` one (except from `neens sweep cancel`,
   whose request it fulfils), with the reason: the evidence does not exist.
2. 3 when no verdict was reached: `--timeout` ran out while waiting, or `--require-all-arms` was
   asked of a sweep that has not finished.
3. 1 with `--require-all-arms` when an arm of a finished sweep did not pass pass^k.
4. 0 otherwise: a sweep is informational, so arms that did not pass do not fail the command.

Honesty rules the rendering keeps:
- An arm with fewer than k finished runs has no verdict (`passed` is null): it shows "no verdict",
  never its greens so far as a result.
- A void sweep shows no cross-arm comparison: no pass^k column, no green counts side by side;
  only each arm's status and progress, under the banner naming the diverged arms.
- An unpriced estimate is "unpriced", never $0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from neens_eval.client import unexpected
from neens_eval.errors import EXIT_UNREACHABLE, EXIT_UNTRUSTED
from neens_eval.waiting import BoardRow

SWEEP_STATUSES: Final = frozenset(
    {"pending", "running", "completed", "completed_with_failures", "failed", "cancelled", "void"}
)
SWEEP_TERMINAL: Final = frozenset(
    {"completed", "completed_with_failures", "failed", "cancelled", "void"}
)
EXIT_DONE: Final = 0
EXIT_REQUIREMENT_NOT_MET: Final = 1

Seen = Literal["read", "finished", "timeout"]
"""How the sweep was last seen: read once (no --wait), waited for to the end, or --timeout ran out
while waiting."""


@dataclass(frozen=True, slots=True)
class Conclusion:
    """The exit code, and the lines that say why (printed on stderr, also under --json)."""

    exit_code: int
    lines: list[str] = field(default_factory=list)


def conclude(
    sweep: Mapping[str, Any],
    *,
    seen: Seen,
    require_all_arms: bool = False,
    cancelling: bool = False,
    timeout_s: float | None = None,
) -> Conclusion:
    """The exit code of a `neens sweep` command that ends with `sweep` (see the module doc)."""
    sweep_id = sweep.get("id")
    status = sweep.get("status")
    if status not in SWEEP_STATUSES:
        raise unexpected(f"GET /model-sweeps/{sweep_id}", f"a sweep status, not {status!r}")
    if status == "void":
        diverged = ", ".join(str(label) for label in sweep.get("divergedArms") or []) or "unknown"
        return Conclusion(
            EXIT_UNTRUSTED,
            [
                f"neens: sweep {sweep_id} is VOID: {sweep.get('voidReason') or 'no reason given'}",
                f"neens: diverged arms: {diverged}. The arms did not run under identical "
                f"conditions, so no comparison can be drawn from this sweep.",
            ],
        )
    reason = sweep.get("reason") or "no reason given"
    if status == "failed":
        return Conclusion(EXIT_UNTRUSTED, [f"neens: sweep {sweep_id} failed: {reason}"])
    if status == "cancelled":
        if cancelling:
            return Conclusion(EXIT_DONE, [f"neens: sweep {sweep_id} is cancelled: {reason}"])
        return Conclusion(
            EXIT_UNTRUSTED,
            [f"neens: sweep {sweep_id} was cancelled: {reason}; its evidence is incomplete"],
        )
    if status in ("pending", "running"):
        follow = f"`neens sweep get {sweep_id} --wait`"
        if seen == "timeout":
            return Conclusion(
                EXIT_UNREACHABLE,
                [
                    f"neens: no verdict after {timeout_s or 0:g} s (--timeout): sweep {sweep_id} "
                    f"is still {status}; it goes on at the server: follow it again with {follow}"
                ],
            )
        if require_all_arms:
            return Conclusion(
                EXIT_UNREACHABLE,
                [
                    f"neens: no verdict: sweep {sweep_id} is still {status}, so whether every "
                    f"arm passed is not known yet (--require-all-arms); wait with {follow}"
                ],
            )
        return Conclusion(EXIT_DONE)
    # completed or completed_with_failures
    if not require_all_arms:
        return Conclusion(EXIT_DONE)
    missing = [arm for arm in _arms(sweep) if arm.get("passed") is not True]
    if not missing:
        return Conclusion(EXIT_DONE, ["neens: every arm passed pass^k (--require-all-arms)."])
    lines = [
        f"neens: --require-all-arms: {len(missing)} of {len(_arms(sweep))} arms did not pass "
        f"pass^k:"
    ]
    lines += [f"neens:   - {arm.get('label')}: {_why_not_passed(arm)}" for arm in missing]
    return Conclusion(EXIT_REQUIREMENT_NOT_MET, lines)


def _why_not_passed(arm: Mapping[str, Any]) -> str:
    progress = _progress(arm)
    if arm.get("status") == "failed":
        return f"failed: {arm.get('error') or 'no error recorded'}"
    if arm.get("passed") is False:
        return f"{arm.get('greenRuns', 0)}/{progress['runs']} runs green"
    return f"no verdict ({progress['runsFinished']}/{progress['runs']} runs finished)"


# --- live lines --------------------------------------------------------------------------------


def live_rows(sweep: Mapping[str, Any]) -> list[BoardRow]:
    """One line for the sweep, then one per arm: its label, status, runs finished/k, items
    done/total, and greens so far."""
    status = str(sweep.get("status"))
    rows = [
        BoardRow(
            "",
            f"neens: sweep {sweep.get('id')} {status}: spent {_spent(sweep)}",
            status,
        )
    ]
    for arm in _arms(sweep):
        progress = _progress(arm)
        finished = f"{progress['runsFinished']}/{progress['runs']}"
        text = (
            f"neens:   {arm.get('label')}: {arm.get('status')}, runs {finished}, items "
            f"{progress['itemsDone']}/{progress['itemsTotal']}, "
            f"{arm.get('greenRuns', 0)} green"
        )
        if status == "void":
            text = (
                f"neens:   {arm.get('label')}: {arm.get('status')}, runs {finished}, items "
                f"{progress['itemsDone']}/{progress['itemsTotal']}"
            )
        rows.append(
            BoardRow(
                f"arm:{arm.get('label')}",
                text,
                f"{arm.get('status')} {finished} {arm.get('greenRuns')}",
            )
        )
    return rows


# --- the final table ---------------------------------------------------------------------------


def sweep_table(sweep: Mapping[str, Any], url: str) -> str:
    """The sweep for a person: what it is, one row per arm, where to read it."""
    status = str(sweep.get("status"))
    name = json.dumps(sweep.get("name"), ensure_ascii=False)
    lines = [
        f"Model sweep {sweep.get('id')} {name}, version {sweep.get('versionLabel')}: {status}",
        f"  dataset {sweep.get('datasetId')} version {sweep.get('datasetVersionId')}, "
        f"pass^{sweep.get('passK')}, spent {_spent(sweep)}"
        + (
            f" of a {_usd(sweep['budgetUsd'])} budget"
            if isinstance(sweep.get("budgetUsd"), int | float)
            else ""
        ),
        f"  judges {', '.join(sweep.get('judgeDeploymentIds') or []) or '-'}, gate "
        f"{json.dumps(sweep.get('gate') or {})}",
    ]
    if status == "void":
        diverged = ", ".join(str(label) for label in sweep.get("divergedArms") or [])
        lines += [
            "",
            f"VOID: {sweep.get('voidReason') or 'no reason given'}",
            f"  Diverged arms: {diverged or 'unknown'}. No comparison is drawn from this sweep.",
            "",
        ]
        header: tuple[str, ...] = ("arm", "model", "status", "runs", "items")
    else:
        lines.append("")
        header = ("arm", "model", "status", "runs", "items", "green", "pass^k")
    table = [header]
    errors: list[str] = []
    for arm in _arms(sweep):
        progress = _progress(arm)
        row = [
            str(arm.get("label")),
            str(arm.get("model") or "-"),
            str(arm.get("status")),
            f"{progress['runsFinished']}/{progress['runs']}",
            f"{progress['itemsDone']}/{progress['itemsTotal']}",
        ]
        if status != "void":
            row += [
                f"{arm.get('greenRuns', 0)} of {progress['runsFinished']}",
                _pass_k(arm),
            ]
        table.append(tuple(row))
        if arm.get("error"):
            errors.append(f"  - {arm.get('label')}: {_one_line(str(arm['error']))}")
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for cells in table:
        lines.append(
            ("  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))).rstrip()
        )
    if errors:
        lines += ["", "Arm errors:", *errors]
    if status in ("failed", "cancelled") and sweep.get("reason"):
        lines += ["", f"Reason: {_one_line(str(sweep['reason']))}"]
    lines += ["", f'  details (API, JSON): curl -sH "Authorization: Bearer $NEENS_API_KEY" {url}']
    return "\n".join(lines) + "\n"


def _pass_k(arm: Mapping[str, Any]) -> str:
    passed = arm.get("passed")
    if passed is True:
        return "PASSED"
    if passed is False:
        return "not passed"
    if arm.get("status") == "failed":
        return "failed"
    return "no verdict"


# --- the preview -------------------------------------------------------------------------------


def preview_table(preview: Mapping[str, Any]) -> str:
    """The cost pre-flight for a person: per arm model, calls, estimate and basis; the totals;
    whether starting the sweep would be refused on the budget."""
    lines = [
        f"Sweep preview: dataset {preview.get('datasetId')} version "
        f"{preview.get('datasetVersionId')}, {preview.get('itemCount')} items, "
        f"pass^{preview.get('passK')}",
        "",
    ]
    header = ("arm", "model", "calls", "estimate", "basis")
    table: list[tuple[str, ...]] = [header]
    arms = [arm for arm in preview.get("arms") or [] if isinstance(arm, dict)]
    for arm in arms:
        table.append(
            (
                str(arm.get("label")),
                str(arm.get("model") or "-"),
                str(arm.get("calls")),
                _estimate(arm.get("estimatedUsd")),
                str(arm.get("basis")),
            )
        )
    table.append(("total", "", str(preview.get("totalCalls")), total_usd(preview), ""))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        cells = [c.ljust(w) for c, w in zip(row, widths, strict=True)]
        lines.append(("  " + "  ".join(cells)).rstrip())
    unpriced = [str(arm.get("label")) for arm in arms if arm.get("estimatedUsd") is None]
    if preview.get("partial"):
        lines.append(
            f"  partial: {len(unpriced)} of {len(arms)} arms unpriced ({', '.join(unpriced)}); "
            f"the total counts the priced arms only"
        )
    lines += ["", "Basis:"]
    lines += [
        f"  - {arm.get('label')}: {_one_line(str(arm.get('basisDetail') or arm.get('basis')))}"
        for arm in arms
    ]
    lines.append("")
    budget = preview.get("budgetUsd")
    would_refuse = preview.get("wouldRefuse")
    if not isinstance(budget, int | float):
        lines.append("Budget: none given (--budget-usd); starting it is not checked against one.")
    elif would_refuse is True:
        lines.append(
            f"Budget {_usd(budget)}: starting it would be REFUSED: "
            f"{_one_line(str(preview.get('refusal') or ''))}"
        )
    elif preview.get("partial"):
        lines.append(
            f"Budget {_usd(budget)}: starting it would not be refused on the budget; the "
            f"estimate leaves unpriced arms out, so they are not checked against it."
        )
    else:
        lines.append(f"Budget {_usd(budget)}: starting it would not be refused on the budget.")
    return "\n".join(lines) + "\n"


# --- small formatting --------------------------------------------------------------------------


def _arms(sweep: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [arm for arm in sweep.get("arms") or [] if isinstance(arm, dict)]


def _progress(arm: Mapping[str, Any]) -> dict[str, Any]:
    raw = arm.get("progress") if isinstance(arm.get("progress"), dict) else {}
    assert isinstance(raw, dict)
    keys = ("runsFinished", "runs", "itemsDone", "itemsTotal")
    return {key: raw.get(key, "?") for key in keys}


def _spent(sweep: Mapping[str, Any]) -> str:
    spent = sweep.get("spentUsd")
    text = _usd(spent) if isinstance(spent, int | float) else "unknown"
    unpriced = sweep.get("unpricedCalls")
    if isinstance(unpriced, int) and unpriced:
        text += f" (+{unpriced} unpriced call{'s' if unpriced != 1 else ''})"
    return text


def total_usd(preview: Mapping[str, Any]) -> str:
    """The preview's total estimate; "unpriced" when no arm is priced."""
    return _estimate(preview.get("estimatedUsd"))


def _estimate(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "unpriced"
    return _usd(value)


def _usd(value: float) -> str:
    """Dollars with cents; amounts under a dollar keep four decimals, and an amount too small
    for them is "<$0.0001", so a small estimate is never shown as nothing."""
    if value == 0 or abs(value) >= 1:
        return f"${value:,.2f}"
    if abs(value) < 0.0001:
        return "<$0.0001"
    return f"${value:.4f}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
