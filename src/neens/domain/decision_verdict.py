"""The sweep decision's verdict and its wording: the one sentence a person reads, with the
numbers written so that none reads as something it is not (a rate just under the bar is never
rounded onto it; a cost under $1 keeps two significant digits)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from neens.domain.decision_types import (
    ArmComparison,
    Bar,
    Outcome,
    Verdict,
)

# --- the verdict ----------------------------------------------------------------------------------


def _verdict(
    arms: Sequence[ArmComparison],
    base: int,
    *,
    comparable: bool,
    void_reason: str | None,
    bar: Bar,
) -> Verdict:
    if not comparable:
        return _no_recommendation(
            "unavailable",
            "The sweep is void, so no arm is ranked or recommended: "
            f"{void_reason or 'no reason was recorded'}.",
        )
    running = [arm for arm in arms if arm.excluded == "not_terminal"]
    if running:
        names = _join([f"{arm.label} ({arm.status})" for arm in running])
        verb = "has" if len(running) == 1 else "have"
        return _no_recommendation(
            "not_finished", f"No recommendation yet: {names} {verb} not finished."
        )
    candidates = [arm for arm in arms if arm.excluded is None and arm.clears_bar != "no"]
    if not candidates:
        return _no_recommendation("no_arm_clears", _none_clears(arms, bar.value))
    chosen = min(
        candidates,
        key=lambda arm: (
            arm.cost_per_case_usd is None,
            arm.cost_per_case_usd or 0.0,
            arm.position,
        ),
    )
    baseline = arms[base]
    savings_usd = savings_pct = None
    if chosen.cost_delta_usd is not None:
        # `0.0 - x`, not `-x`: no savings is 0, where `-0.0` would be printed as "-0.0".
        savings_usd = 0.0 - chosen.cost_delta_usd
        savings_pct = 0.0 - chosen.cost_delta_pct if chosen.cost_delta_pct is not None else None
    clears_on: Literal["lower_bound", "point"] = (
        "lower_bound" if chosen.clears_bar == "lower_bound" else "point"
    )
    return Verdict(
        outcome="recommended",
        recommended_arm_id=chosen.arm_id,
        recommended_label=chosen.label,
        cost_per_case_usd=chosen.cost_per_case_usd,
        savings_usd=savings_usd,
        savings_pct=savings_pct,
        clears_on=clears_on,
        sentence=_recommendation(chosen, baseline, bar.value),
    )


def _no_recommendation(outcome: Outcome, sentence: str) -> Verdict:
    return Verdict(
        outcome=outcome,
        recommended_arm_id=None,
        recommended_label=None,
        cost_per_case_usd=None,
        savings_usd=None,
        savings_pct=None,
        clears_on=None,
        sentence=sentence,
    )


def _scoped(verdict: Verdict, scope: str) -> Verdict:
    return replace(verdict, sentence=f"{scope}: {verdict.sentence}")


def _recommendation(arm: ArmComparison, baseline: ArmComparison, bar: float) -> str:
    assert arm.rate is not None and arm.wilson_low is not None  # a candidate clears the bar
    shown_bar = _bar(bar)
    if arm.clears_bar == "lower_bound":
        quality = (
            f"{arm.label} clears the {shown_bar} bar on the lower bound "
            f"({_pct(arm.rate, bar)}, n={arm.n}; 95% lower bound {_pct(arm.wilson_low, bar)})"
        )
    else:
        quality = (
            f"{arm.label} clears the {shown_bar} bar on the point estimate "
            f"({_pct(arm.rate, bar)}, n={arm.n}) but not on the lower bound "
            f"({_pct(arm.wilson_low, bar)}): add golden items to be sure"
        )
    return f"{quality}; {_cost_clause(arm, baseline)}."


def _cost_clause(arm: ArmComparison, baseline: ArmComparison) -> str:
    base = f"{baseline.label} (the baseline)"
    if arm.cost_per_case_usd is None:
        return (
            f"its cost per case is unknown (none of its {arm.cases} cases is priced), so what it "
            f"saves against {base} is unknown; no priced arm clears the bar"
        )
    coverage = (
        f" (priced on {arm.priced_cases} of {arm.cases} cases)"
        if arm.priced_cases < arm.cases
        else ""
    )
    costs = f"it costs {_usd(arm.cost_per_case_usd)} a case{coverage}"
    if arm.is_baseline:
        return f"{costs}, and it is the baseline"
    if baseline.excluded == "failed":
        ended = "was cancelled" if baseline.status == "cancelled" else "failed"
        return f"{costs}; {base} {ended} before its runs finished, so what it saves is not measured"
    if baseline.cost_per_case_usd is None:
        return f"{costs}; {base} is unpriced, so what it saves is unknown"
    delta, pct = arm.cost_delta_usd, arm.cost_delta_pct
    assert delta is not None
    if delta == 0:
        return f"{costs}, the same as {base}"
    direction = "less" if delta < 0 else "more"
    if pct is None:  # the baseline costs 0
        return f"{costs}, {_usd(abs(delta))} {direction} than {base}"
    return f"{costs}, {_number(abs(pct))}% {direction} than {base}"


def _none_clears(arms: Sequence[ArmComparison], bar: float) -> str:
    reasons = []
    for arm in arms:
        if arm.excluded == "failed":
            reasons.append(f"{arm.label} {arm.status}")
        elif arm.excluded == "not_pass_k":
            reasons.append(
                f"{arm.label} is excluded, not green on all {arm.runs} of its runs (pass^k)"
            )
        elif arm.rate is None:
            reasons.append(f"{arm.label} has no scored item")
        else:
            reasons.append(f"{arm.label} is below it ({_pct(arm.rate, bar)}, n={arm.n})")
    return f"No arm clears the {_bar(bar)} bar: {_join(reasons)}."


# --- wording --------------------------------------------------------------------------------------


def _join(parts: Sequence[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _bar(bar: float) -> str:
    return f"{_number(bar * 100)}%"


def _number(value: float) -> str:
    """A percentage with no trailing zeros: 90, 92.5, 84."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return text if text != "-0" else "0"


def _pct(value: float, bar: float) -> str:
    """A rate in whole percent, with decimals only where rounding would make a rate on one side
    of the bar read as the bar itself (89.6% is not "90%" against a 90% bar)."""
    for digits in range(4):
        shown, shown_bar = f"{value * 100:.{digits}f}", f"{bar * 100:.{digits}f}"
        if value == bar or shown != shown_bar:
            return f"{shown}%"
    return f"{value * 100}%"


def _usd(value: float) -> str:
    """Two significant digits below a dollar ($0.0021), cents above ($1.50)."""
    if value >= 1 or value == 0:
        return f"${value:,.2f}"
    decimals = max(2, 1 - math.floor(math.log10(value)))
    return f"${value:.{decimals}f}"


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.2g}"
