"""What `neens sweep decide` concludes from a sweep's comparison, and how it shows it.

The comparison is the server's (`GET /model-sweeps/{id}/comparison`): its verdict sentence, its
leaderboard order and every number are shown as they come. Nothing here ranks, sorts, averages or
recomputes: ranked arms are listed in the server's `leaderboard` order, then the arms it did not
rank in the server's `arms` order, so two rankings that could disagree never exist.

The exit code, in order (one table for the whole CLI, docs/cli.md):
1. 4 (`EXIT_UNTRUSTED`) for a void sweep (`comparable: false`), always, with its void reason;
   for a failed or cancelled sweep, with its reason: its evidence is incomplete.
2. 3 when no verdict was reached: `--timeout` ran out while waiting, or `--require-winner` was
   asked of a sweep that has not finished.
3. 1 with `--require-winner` when the verdict of the finished sweep is not `recommended`.
4. 0 otherwise: the verdict was read, whatever it says; a sweep still running without `--wait`
   is informational too.

Honesty rules the rendering keeps:
- No data is never 0%: `rate: null` shows "no data", and no interval.
- Unpriced is never free: `costPerCaseUsd: null` shows "unpriced" (or "no cases"), never $0;
  a partly priced arm shows how many of its cases its cost covers.
- A void sweep shows no rank, no bar clearance and no comparison with the baseline: only each
  arm's own numbers, under the void reason.
- The exact McNemar test is a second, paired line, never the ranking.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from neens_eval.client import unexpected
from neens_eval.errors import EXIT_UNREACHABLE, EXIT_UNTRUSTED
from neens_eval.sweep_render import (
    EXIT_DONE,
    EXIT_REQUIREMENT_NOT_MET,
    SWEEP_STATUSES,
    Conclusion,
    Seen,
    _one_line,
)

OUTCOMES: Final = frozenset({"recommended", "no_arm_clears", "not_finished", "unavailable"})
BAR_SOURCES: Final = {
    "gate": "from the sweep's gate",
    "query": "from --bar",
    "default": "Neens' default: no --bar, and the sweep's gate pins no min_pass_rate",
}
EXCLUSIONS: Final = {
    "not_terminal": "not finished: an arm is judged only once all its runs have finished",
    "failed": "it {status}",
    "not_pass_k": "not green on all {runs} of its runs (pass^k)",
}


def conclude_decision(
    comparison: Mapping[str, Any],
    *,
    seen: Seen,
    require_winner: bool = False,
    timeout_s: float | None = None,
    sweep: Mapping[str, Any] | None = None,
) -> Conclusion:
    """The exit code of `neens sweep decide` (see the module doc). `sweep`, when read, is the
    sweep itself, for the reason of a void, failed or cancelled one."""
    sweep_id = comparison.get("sweepId")
    status = comparison.get("status")
    verdict = _verdict(comparison)
    outcome = verdict.get("outcome")
    if status not in SWEEP_STATUSES:
        raise unexpected(f"GET /model-sweeps/{sweep_id}/comparison", f"a status, not {status!r}")
    if outcome not in OUTCOMES:
        raise unexpected(
            f"GET /model-sweeps/{sweep_id}/comparison", f"a verdict outcome, not {outcome!r}"
        )
    known = sweep if sweep is not None and sweep.get("status") == status else {}
    if status == "void" or comparison.get("comparable") is not True or outcome == "unavailable":
        reason = comparison.get("voidReason") or known.get("voidReason") or "no reason given"
        diverged = ", ".join(str(label) for label in known.get("divergedArms") or [])
        lines = [f"neens: sweep {sweep_id} is VOID: {_one_line(str(reason))}"]
        lines.append(
            (f"neens: diverged arms: {diverged}. " if diverged else "neens: ")
            + "The arms did not run under identical conditions, so no arm is ranked or "
            "recommended."
        )
        return Conclusion(EXIT_UNTRUSTED, lines)
    if status in ("failed", "cancelled"):
        why = _one_line(str(known.get("reason") or "no reason given"))
        said = "failed" if status == "failed" else "was cancelled"
        return Conclusion(
            EXIT_UNTRUSTED,
            [
                f"neens: sweep {sweep_id} {said}: {why}; its evidence is incomplete, so its "
                f"verdict is not one to act on"
            ],
        )
    again = "run this command again with --wait"
    if status in ("pending", "running") or outcome == "not_finished":
        if seen == "timeout":
            return Conclusion(
                EXIT_UNREACHABLE,
                [
                    f"neens: no verdict after {timeout_s or 0:g} s (--timeout): sweep {sweep_id} "
                    f"is still {status}; it goes on at the server: {again} to wait longer"
                ],
            )
        if require_winner:
            return Conclusion(
                EXIT_UNREACHABLE,
                [
                    f"neens: no verdict: sweep {sweep_id} is still {status}, so whether an arm "
                    f"clears the bar is not known yet (--require-winner); {again}"
                ],
            )
        return Conclusion(
            EXIT_DONE,
            [f"neens: sweep {sweep_id} is still {status}: no verdict yet; {again}"],
        )
    if outcome == "recommended":
        chosen = verdict.get("recommendedLabel")
        if require_winner:
            return Conclusion(EXIT_DONE, [f"neens: {chosen} is recommended (--require-winner)."])
        return Conclusion(EXIT_DONE)
    if not require_winner:
        return Conclusion(EXIT_DONE)
    sentence = _one_line(str(verdict.get("sentence")))
    return Conclusion(
        EXIT_REQUIREMENT_NOT_MET, [f"neens: --require-winner: no arm is recommended: {sentence}"]
    )


# --- the report --------------------------------------------------------------------------------


def decision_report(comparison: Mapping[str, Any], url: str) -> str:
    """The comparison for a person: the verdict, the bar, the leaderboard, the per-agent
    verdicts, and where to read the JSON."""
    comparable = comparison.get("comparable") is True
    bar = comparison.get("bar") if isinstance(comparison.get("bar"), dict) else {}
    assert isinstance(bar, dict)
    bar_value = bar.get("value") if isinstance(bar.get("value"), int | float) else None
    arms = _arms(comparison)
    baseline = next((a for a in arms if a.get("armId") == comparison.get("baselineArmId")), None)
    source = BAR_SOURCES.get(str(bar.get("source")), f"source {bar.get('source')}")
    lines = [
        f"Sweep decision {comparison.get('sweepId')}: {comparison.get('status')}",
        f"  bar {_bar(bar_value)} ({source}); baseline arm "
        + (f"{baseline.get('label')} ({baseline.get('armId')})" if baseline else "-")
        + f"; {comparison.get('itemCount')} frozen items",
    ]
    uncaptured = comparison.get("uncapturedItems")
    if isinstance(uncaptured, int) and uncaptured:
        lines.append(f"  {uncaptured} of them no arm captured: they count for no arm")
    if not comparable:
        lines += [
            "",
            f"VOID: {_one_line(str(comparison.get('voidReason') or 'no reason given'))}",
            "  No arm is ranked, compared or recommended. Each arm's own numbers, for the record:",
        ]
    lines += ["", f"Verdict: {_one_line(str(_verdict(comparison).get('sentence')))}", ""]
    lines += _block(comparison, bar_value, comparable=comparable, indent="  ")
    agents = [agent for agent in comparison.get("agents") or [] if isinstance(agent, dict)]
    if agents:
        lines += ["", "Per agent (items grouped by the agent name on the captured traces):"]
    for agent in agents:
        lines += ["", f"  {_agent_heading(agent)}"]
        lines.append(f"    Verdict: {_one_line(str(_verdict(agent).get('sentence')))}")
        lines += _block(agent, bar_value, comparable=comparable, indent="    ")
    lines += ["", f'  details (API, JSON): curl -sH "Authorization: Bearer $NEENS_API_KEY" "{url}"']
    return "\n".join(lines) + "\n"


def _block(
    block: Mapping[str, Any], bar: float | None, *, comparable: bool, indent: str
) -> list[str]:
    """The arms of the whole sweep or of one agent: a table, then the notes under it."""
    ordered = _in_server_order(block) if comparable else _arms(block)
    if comparable:
        header: tuple[str, ...] = (
            "rank", "arm", "rate", "n", "95% interval", "pass^k", "flaky", "clears bar",
            "cost per case", "vs baseline",
        )  # fmt: skip
        title = "Leaderboard (the server's ranking, best first; arms it did not rank last):"
    else:
        header = ("arm", "status", "rate", "n", "95% interval", "pass^k", "flaky", "cost per case")
        title = "Arms (not ranked):"
    table = [header]
    notes: list[str] = []
    for arm in ordered:
        label = str(arm.get("label")) + (" (baseline)" if arm.get("isBaseline") else "")
        own = [
            _rate(arm.get("rate"), bar),
            str(arm.get("n")),
            _interval(arm, bar),
            _pass_hat_k(arm),
            str(arm.get("flakyItems")),
        ]
        if comparable:
            rank = arm.get("rank")
            table.append(
                (
                    str(rank) if isinstance(rank, int) else "-",
                    label,
                    *own,
                    _clears(arm),
                    _cost(arm),
                    _versus(arm),
                )
            )
            notes += _notes(arm)
        else:
            table.append((label, str(arm.get("status")), *own, _cost(arm)))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = [f"{indent}{title}"]
    for row in table:
        cells = [c.ljust(w) for c, w in zip(row, widths, strict=True)]
        lines.append((indent + "  " + "  ".join(cells)).rstrip())
    lines.append(
        f"{indent}  rate: items that passed every scored repeat (strict); pass^k: unbiased "
        "C(c,k)/C(n,k) over the items with k scored repeats (of how many)"
    )
    lines += [f"{indent}  - {note}" for note in notes]
    return lines


def _in_server_order(block: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The arms the server ranked, in its leaderboard's order, then the others in its order."""
    arms = _arms(block)
    by_id = {arm.get("armId"): arm for arm in arms}
    leaderboard = [arm_id for arm_id in block.get("leaderboard") or [] if arm_id in by_id]
    ranked = [by_id[arm_id] for arm_id in leaderboard]
    return ranked + [arm for arm in arms if arm.get("armId") not in set(leaderboard)]


def _notes(arm: Mapping[str, Any]) -> list[str]:
    label = arm.get("label")
    notes = []
    excluded = arm.get("excluded")
    if excluded is not None:
        why = EXCLUSIONS.get(str(excluded), str(excluded)).format(
            status=arm.get("status"), runs=arm.get("runs")
        )
        notes.append(f"{label}: not ranked ({excluded}): {why}")
    if arm.get("notDistinguishable"):
        notes.append(f"{label}: {arm['notDistinguishable']}")
    mcnemar = arm.get("mcnemar")
    if isinstance(mcnemar, dict) and mcnemar.get("sentence"):
        notes.append(f"{label}, second (paired) test: {_one_line(str(mcnemar['sentence']))}")
    return notes


def _agent_heading(agent: Mapping[str, Any]) -> str:
    items = agent.get("items")
    heading = f"{agent.get('label')}, {items} item{'' if items == 1 else 's'}"
    if agent.get("agentName") is None:
        parts = []
        if agent.get("unnamedItems"):
            parts.append(f"{agent['unnamedItems']} whose answers named no agent")
        if agent.get("conflictingItems"):
            parts.append(f"{agent['conflictingItems']} whose answers named different agents")
        if parts:
            heading += f" ({', '.join(parts)})"
    return heading


# --- cells -------------------------------------------------------------------------------------


def _rate(value: Any, bar: float | None) -> str:
    """A rate in percent, or "no data" (never 0%) when the server has none."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "no data"
    return pct(float(value), bar)


def _interval(arm: Mapping[str, Any], bar: float | None) -> str:
    low, high = arm.get("wilsonLow"), arm.get("wilsonHigh")
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return "-"
    return f"{pct(float(low), bar)}–{pct(float(high), bar)}"


def _pass_hat_k(arm: Mapping[str, Any]) -> str:
    """The unbiased pass^k with its denominator, "no data" when no item has k scored repeats,
    "-" from a server that does not report it."""
    value, items = arm.get("passHatK"), arm.get("passHatKItems")
    if "passHatK" not in arm:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "no data"
    return f"{pct(float(value))} ({items})"


def _clears(arm: Mapping[str, Any]) -> str:
    clears = arm.get("clearsBar")
    if arm.get("rate") is None:
        return "no data"
    return {"lower_bound": "yes (lower bound)", "point": "point only", "no": "no"}.get(
        str(clears), str(clears)
    )


def _cost(arm: Mapping[str, Any]) -> str:
    """The cost per case; "unpriced" when unknown (never $0), with the priced share when part
    of the arm's cases are priced."""
    cost, cases, priced = arm.get("costPerCaseUsd"), arm.get("cases"), arm.get("pricedCases")
    if cases == 0:
        return "no cases"
    if isinstance(cost, bool) or not isinstance(cost, int | float):
        return "unpriced"
    if isinstance(priced, int) and isinstance(cases, int) and priced < cases:
        return f"{_usd(float(cost))} ({priced} of {cases} priced)"
    return _usd(float(cost))


def _versus(arm: Mapping[str, Any]) -> str:
    """Cost delta, regressions and new passes against the baseline arm, as the server has them."""
    if arm.get("isBaseline"):
        return "baseline"
    pct_delta, usd_delta = arm.get("costDeltaPct"), arm.get("costDeltaUsd")
    if isinstance(pct_delta, int | float):
        cost = f"cost {_signed(pct_delta, '%')}"
    elif isinstance(usd_delta, int | float):
        cost = f"cost {'+' if usd_delta >= 0 else '-'}{_usd(abs(float(usd_delta)))}"
    else:
        cost = "cost unknown"
    regressions, new = arm.get("regressions"), arm.get("newPasses")
    parts = [cost]
    if isinstance(regressions, int):
        parts.append(f"{regressions} regression{'' if regressions == 1 else 's'}")
    if isinstance(new, int):
        parts.append(f"{new} new pass{'' if new == 1 else 'es'}")
    return ", ".join(parts)


def _usd(value: float) -> str:
    """Cents from a dollar up; two significant digits below ($0.00027), so a small cost per
    case is never rounded to nothing and reads as the verdict sentence writes it."""
    if value == 0 or abs(value) >= 1:
        return f"${value:,.2f}"
    decimals = max(2, 1 - math.floor(math.log10(abs(value))))
    return f"${value:.{decimals}f}"


def _signed(value: float, unit: str) -> str:
    text = f"{abs(value):.1f}".rstrip("0").rstrip(".")
    if text == "0":
        return f"±0{unit}"
    return f"{'-' if value < 0 else '+'}{text}{unit}"


def _bar(value: float | None) -> str:
    if value is None:
        return "unknown"
    return _trim(value * 100, 2) + "%"


def pct(value: float, bar: float | None = None) -> str:
    """A share in percent with one decimal at most, more where fewer would make it read as
    something it is not: as the bar when it is on one side of it (89.96% is not "90%" against
    a 90% bar), as 0% when it is not zero, or as 100% when it is not one."""
    for digits in range(1, 7):
        shown = _trim(value * 100, digits)
        if bar is not None and value != bar and shown == _trim(bar * 100, digits):
            continue
        if (value != 0 and shown == "0") or (value != 1 and shown == "100"):
            continue
        return f"{shown}%"
    return f"{value * 100}%"


def _trim(value: float, digits: int) -> str:
    text = f"{value:.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _arms(block: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [arm for arm in block.get("arms") or [] if isinstance(arm, dict)]


def _verdict(block: Mapping[str, Any]) -> Mapping[str, Any]:
    verdict = block.get("verdict")
    return verdict if isinstance(verdict, dict) else {}
