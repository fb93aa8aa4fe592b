"""A pre-prod run's gate: the policy a user declares, and the pass/fail verdict CI blocks on.

(Somewhat over 500 lines on purpose: the policy, the verdict and the sentences that explain it
are one contract, GET /preprod-evals/{id}/gate, whose wording follows the parsed policy and the
rounding rules at the end; split apart, each half would only make sense with the other open.)

The gate never reports green before the candidate was evaluated. A run that is awaiting traces,
running, failed or cancelled, or that finished with no scored item, fails outright with that
reason, and only then are the thresholds checked. Otherwise an empty gate, or a still-running
run whose first items happen to pass, would let a release through that nobody measured.

Two further rules keep the numbers honest. No data is never 0%: a pass rate over nothing is None.
Unpriced is never free: a cost rule that cannot be computed (no priced candidate session, no
baseline, no priced baseline session) is reported as `skipped` with the reason, never as `pass`,
and a cost delta is never computed against a baseline that has no price.

`run_summary` is here too because the gate is computed from it; the per-metric rollup shown
next to the gate lives in `neens.domain.metrics` (re-exported here), and the item-level verdict
rule they all share in `neens.domain.preprod`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, Literal, get_args

from neens.domain.metrics import JudgeScore, MetricRow, metrics_rollup
from neens.domain.preprod import (
    CohortStats,
    ItemOutcome,
    RunStatus,
    candidate_verdict,
    is_new_pass,
    is_regression,
)
from neens.domain.stats import mean, proportion
from neens.errors import Unprocessable

__all__ = [
    "CostPolicy",
    "CostRule",
    "CostRuleResult",
    "CostRuleStatus",
    "GatePolicy",
    "GateResult",
    "JudgeScore",
    "MetricRow",
    "RunSummary",
    "evaluate_gate",
    "metrics_rollup",
    "parse_gate_policy",
    "run_summary",
]

CostRule = Literal["max_avg_usd", "max_delta_usd", "max_delta_pct"]
CostRuleStatus = Literal["pass", "fail", "skipped"]

_GATE_KEYS: Final = ("max_regressions", "min_pass_rate", "cost")
_COST_KEYS: Final[tuple[CostRule, ...]] = get_args(CostRule)
_EVALUATED: Final = frozenset({"completed", "completed_with_regressions"})
_NOT_EVALUATED: Final[Mapping[str, str]] = {
    "awaiting_traces": "run is still awaiting traces",
    "running": "run is still running",
    "failed": "run failed",
    "cancelled": "run was cancelled",
}


# --- the policy ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CostPolicy:
    """The gate's cost family; a None sub-key is one the user did not declare.

    `max_delta_pct` is signed: 20 allows the candidate to cost up to 20% more than the baseline,
    -50 requires it to cost at least 50% less.
    """

    max_avg_usd: float | None = None
    max_delta_usd: float | None = None
    max_delta_pct: float | None = None

    def __post_init__(self) -> None:
        # An empty family would report `costRules: []`, which readers take for "no cost family".
        if not self.declared():
            raise ValueError("a cost policy must declare at least one rule")

    def declared(self) -> tuple[tuple[CostRule, float], ...]:
        """The declared rules and thresholds, always in the order of `CostRule`."""
        values = (self.max_avg_usd, self.max_delta_usd, self.max_delta_pct)
        return tuple(
            (rule, value)
            for rule, value in zip(_COST_KEYS, values, strict=True)
            if value is not None
        )

    def to_dict(self) -> dict[str, float]:
        return dict(self.declared())


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """The thresholds a run's gate checks; None means the user declared no such threshold."""

    max_regressions: int | None = None
    min_pass_rate: float | None = None
    cost: CostPolicy | None = None

    def to_dict(self) -> dict[str, object]:
        """Exactly the declared keys, in a fixed order (`max_regressions`, `min_pass_rate`,
        `cost`), whatever order they were given in: the same policy always echoes and
        fingerprints the same way."""
        out: dict[str, object] = {}
        if self.max_regressions is not None:
            out["max_regressions"] = self.max_regressions
        if self.min_pass_rate is not None:
            out["min_pass_rate"] = self.min_pass_rate
        if self.cost is not None:
            out["cost"] = self.cost.to_dict()
        return out


def parse_gate_policy(raw: object) -> GatePolicy:
    """Validate a `gate` object from an API body into a `GatePolicy`.

    Refused with `Unprocessable`, naming the field: a gate or cost value that is not an object,
    an unknown key (a misspelt threshold must not silently gate nothing), a null value (omit the
    key to declare no threshold, so "declared" is never ambiguous), `max_regressions` that is not
    an integer >= 0, `min_pass_rate` outside [0, 1], a cost sub-key that is not a finite number,
    `max_avg_usd` below 0, `max_delta_pct` below -100 (cheaper than free), and an empty cost
    object. Booleans are not numbers here, although Python says they are.
    """
    if not isinstance(raw, Mapping):
        raise Unprocessable("gate must be an object", field="gate")
    _refuse_unknown(raw, _GATE_KEYS, "gate")

    max_regressions: int | None = None
    if "max_regressions" in raw:
        value = raw["max_regressions"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise Unprocessable(
                f"gate.max_regressions must be an integer >= 0{_null_hint(value)}",
                field="gate.max_regressions",
            )
        max_regressions = value

    min_pass_rate: float | None = None
    if "min_pass_rate" in raw:
        number = _finite(raw["min_pass_rate"])
        if number is None or not 0 <= number <= 1:
            raise Unprocessable(
                "gate.min_pass_rate must be a number between 0 and 1"
                + _null_hint(raw["min_pass_rate"]),
                field="gate.min_pass_rate",
            )
        min_pass_rate = number

    cost = _parse_cost(raw["cost"]) if "cost" in raw else None
    return GatePolicy(max_regressions=max_regressions, min_pass_rate=min_pass_rate, cost=cost)


def _parse_cost(raw: object) -> CostPolicy:
    if not isinstance(raw, Mapping):
        raise Unprocessable("gate.cost must be an object" + _null_hint(raw), field="gate.cost")
    _refuse_unknown(raw, _COST_KEYS, "gate.cost")
    if not raw:
        raise Unprocessable(
            "gate.cost must declare at least one of max_avg_usd, max_delta_usd, max_delta_pct",
            field="gate.cost",
        )
    floors: dict[str, tuple[float, str]] = {
        "max_avg_usd": (0.0, "a number >= 0"),
        "max_delta_usd": (-math.inf, "a finite number"),
        "max_delta_pct": (-100.0, "a number >= -100"),
    }
    values: dict[str, float] = {}
    for key, value in raw.items():
        floor, wanted = floors[key]
        number = _finite(value)
        if number is None or number < floor:
            raise Unprocessable(
                f"gate.cost.{key} must be {wanted}{_null_hint(value)}", field=f"gate.cost.{key}"
            )
        values[key] = number
    return CostPolicy(
        max_avg_usd=values.get("max_avg_usd"),
        max_delta_usd=values.get("max_delta_usd"),
        max_delta_pct=values.get("max_delta_pct"),
    )


def _refuse_unknown(raw: Mapping[object, object], known: tuple[str, ...], where: str) -> None:
    for key in raw:
        if key not in known:
            raise Unprocessable(
                f"{where} has an unknown key {key!r}; it accepts {', '.join(known)}",
                field=f"{where}.{key}",
            )


def _finite(value: object) -> float | None:
    """The value as a finite float, or None when it is not a finite number (or is a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None


def _null_hint(value: object) -> str:
    return "; omit the key to declare no threshold" if value is None else ""


# --- the run summary ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Counts over a run's items, and the pass rate the gate checks.

    `failed` counts scored items that failed plus items in status error, so `passed + failed`
    is the number of evaluated items and the pass-rate denominator. Pending and captured items
    are in no denominator: the candidate has not been judged on them yet.
    """

    total: int
    pending: int
    captured: int
    scored: int
    error: int
    passed: int
    failed: int
    regressions: int
    """Items the baseline passed and the candidate failed (an error is a failure)."""
    new_passes: int
    """Items the baseline failed and the candidate passed."""
    pass_rate: float | None
    """passed / (scored + error); None when nothing was evaluated, never 0."""
    avg_score: float | None
    """Mean score over scored items that carry one; None when there is none."""

    @property
    def evaluated(self) -> int:
        return self.scored + self.error


def run_summary(items: Iterable[ItemOutcome]) -> RunSummary:
    """Count a run's items by status and verdict (see `RunSummary` for each definition)."""
    items = list(items)
    statuses = [item.status for item in items]
    verdicts = [candidate_verdict(item) for item in items]
    passed = verdicts.count(True)
    failed = verdicts.count(False)
    scores = [item.score for item in items if item.status == "scored" and item.score is not None]
    return RunSummary(
        total=len(items),
        pending=statuses.count("pending"),
        captured=statuses.count("captured"),
        scored=statuses.count("scored"),
        error=statuses.count("error"),
        passed=passed,
        failed=failed,
        regressions=sum(1 for item in items if is_regression(item)),
        new_passes=sum(1 for item in items if is_new_pass(item)),
        pass_rate=proportion(passed, passed + failed),
        avg_score=mean(scores),
    )


# --- the verdict --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CostRuleResult:
    """One declared cost sub-key, checked: a `costRules` row of GET /preprod-evals/{id}/gate."""

    rule: CostRule
    status: CostRuleStatus
    observed: float | None
    """The candidate's avg cost (USD), its delta to the baseline (USD) or its change (%);
    None when it could not be computed."""
    threshold: float
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "status": self.status,
            "observed": self.observed,
            "threshold": self.threshold,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class GateResult:
    """The response of GET /preprod-evals/{id}/gate, field for field."""

    passed: bool
    reasons: tuple[str, ...]
    """Why the gate failed, one plain sentence each; empty exactly when it passed."""
    regressions: int
    pass_rate: float | None
    gate: dict[str, object]
    """The policy, echoed as `GatePolicy.to_dict`."""
    cost_rules: tuple[CostRuleResult, ...] | None
    """One row per declared cost sub-key; None (the key is absent) without a cost family."""

    def to_dict(self) -> dict[str, object]:
        """The wire shape: camelCase, and `costRules` left out (not empty) with no cost family."""
        out: dict[str, object] = {
            "passed": self.passed,
            "reasons": list(self.reasons),
            "regressions": self.regressions,
            "passRate": self.pass_rate,
            "gate": self.gate,
        }
        if self.cost_rules is not None:
            out["costRules"] = [rule.to_dict() for rule in self.cost_rules]
        return out


def evaluate_gate(
    status: RunStatus,
    items: Iterable[ItemOutcome],
    policy: GatePolicy,
    candidate: CohortStats,
    baseline: CohortStats | None,
    *,
    no_baseline: str = "the run has no baseline cohort",
) -> GateResult:
    """The run's gate verdict.

    1. Not evaluated: a status other than completed / completed_with_regressions, or no scored
       item, fails the gate with that single reason. Thresholds are not checked, and each
       declared cost rule is `skipped` (its reason says why): nothing is final yet.
    2. Otherwise each declared threshold is checked, and every breach adds its reason:
       regressions > max_regressions; pass_rate < min_pass_rate; a cost rule that fails.
       A value equal to its threshold (within float rounding) meets it. Without a
       `max_regressions`, regressions do not fail the gate even when the run's status is
       completed_with_regressions: the user declared no such threshold.

    `candidate` is the candidate's captured sessions (see `preprod.items_cohort`); `baseline`
    the baseline cohort, None when the run has none; `no_baseline` then says why, in the
    reason of every skipped cost-delta rule.
    """
    summary = run_summary(items)
    not_evaluated = _not_evaluated(status, summary)

    cost_rules: tuple[CostRuleResult, ...] | None = None
    if policy.cost is not None:
        cost_rules = tuple(
            _skipped(rule, threshold, f"not evaluated: {not_evaluated}")
            if not_evaluated is not None
            else _COST_CHECKS[rule](threshold, candidate, baseline, no_baseline)
            for rule, threshold in policy.cost.declared()
        )

    reasons: list[str] = []
    if not_evaluated is not None:
        reasons.append(not_evaluated)
    else:
        if policy.max_regressions is not None and summary.regressions > policy.max_regressions:
            count = summary.regressions
            verb = "regression exceeds" if count == 1 else "regressions exceed"
            reasons.append(f"{count} {verb} the maximum of {policy.max_regressions}")
        if policy.min_pass_rate is not None:
            rate = summary.pass_rate
            if rate is None:  # unreachable once evaluated; fail closed rather than assume
                reasons.append("pass rate is unknown: no item was evaluated")
            elif _below(rate, policy.min_pass_rate):
                reasons.append(
                    f"pass rate {_shown(rate, policy.min_pass_rate)} is below the minimum "
                    f"{_plain(policy.min_pass_rate)}"
                )
        reasons.extend(rule.reason for rule in cost_rules or () if rule.status == "fail")

    return GateResult(
        passed=not reasons,
        reasons=tuple(reasons),
        regressions=summary.regressions,
        pass_rate=summary.pass_rate,
        gate=policy.to_dict(),
        cost_rules=cost_rules,
    )


def _not_evaluated(status: str, summary: RunSummary) -> str | None:
    """Why the candidate has not been evaluated, or None when it has."""
    if status not in _EVALUATED:
        return _NOT_EVALUATED.get(status, f"run status {status!r} is not a finished run")
    if summary.scored == 0:
        return "no item was scored"
    return None


def _check_max_avg(
    threshold: float, cand: CohortStats, base: CohortStats | None, no_baseline: str
) -> CostRuleResult:
    if cand.avg_cost_usd is None:
        return _skipped("max_avg_usd", threshold, f"cost avg unknown: {_unpriced(cand)}")
    avg = cand.avg_cost_usd
    shown = f"cost avg {_shown(avg, threshold)} USD"
    note = _priced_note(cand, "")
    if _above(avg, threshold):
        reason = f"{shown} exceeds budget {_plain(threshold)} USD{note}"
        return CostRuleResult("max_avg_usd", "fail", avg, threshold, reason)
    reason = f"{shown} is within budget {_plain(threshold)} USD{note}"
    return CostRuleResult("max_avg_usd", "pass", avg, threshold, reason)


def _check_max_delta_usd(
    threshold: float, cand: CohortStats, base: CohortStats | None, no_baseline: str
) -> CostRuleResult:
    skipped = _delta_unknown("max_delta_usd", threshold, cand, base, no_baseline)
    if skipped is not None:
        return skipped
    assert cand.avg_cost_usd is not None and base is not None and base.avg_cost_usd is not None
    delta = cand.avg_cost_usd - base.avg_cost_usd
    verdict: CostRuleStatus = "fail" if _above(delta, threshold) else "pass"
    reason = (
        f"cost avg {_plain(cand.avg_cost_usd, 4)} USD is {_signed(_shown(delta, threshold))} USD "
        f"vs baseline {_plain(base.avg_cost_usd, 4)} USD, "
        f"{'above' if verdict == 'fail' else 'within'} the allowed {_signed(_plain(threshold))} USD"
        f"{_priced_notes(cand, base)}"
    )
    return CostRuleResult("max_delta_usd", verdict, delta, threshold, reason)


def _check_max_delta_pct(
    threshold: float, cand: CohortStats, base: CohortStats | None, no_baseline: str
) -> CostRuleResult:
    skipped = _delta_unknown("max_delta_pct", threshold, cand, base, no_baseline)
    if skipped is not None:
        return skipped
    assert cand.avg_cost_usd is not None and base is not None and base.avg_cost_usd is not None
    if base.avg_cost_usd == 0:
        return _skipped(
            "max_delta_pct",
            threshold,
            "cost change in % is undefined: the baseline's priced sessions cost 0 USD",
        )
    pct = (cand.avg_cost_usd - base.avg_cost_usd) / base.avg_cost_usd * 100
    verdict: CostRuleStatus = "fail" if _above(pct, threshold) else "pass"
    magnitude = _shown(abs(pct), abs(threshold))
    if _close(pct, 0):
        change = "the same as"
    elif pct > 0:
        change = f"{magnitude}% more than"
    else:
        change = f"{magnitude}% cheaper than"
    if threshold < 0:
        allowed = f"the gate requires at least {_plain(-threshold)}% cheaper"
    elif threshold == 0:
        allowed = "the gate allows no increase"
    else:
        allowed = f"the gate allows at most {_plain(threshold)}% more"
    reason = (
        f"cost avg {_plain(cand.avg_cost_usd, 4)} USD is {change} baseline "
        f"{_plain(base.avg_cost_usd, 4)} USD; {allowed}{_priced_notes(cand, base)}"
    )
    return CostRuleResult("max_delta_pct", verdict, pct, threshold, reason)


_COST_CHECKS: Final[
    Mapping[CostRule, Callable[[float, CohortStats, CohortStats | None, str], CostRuleResult]]
] = {
    "max_avg_usd": _check_max_avg,
    "max_delta_usd": _check_max_delta_usd,
    "max_delta_pct": _check_max_delta_pct,
}


def _delta_unknown(
    rule: CostRule, threshold: float, cand: CohortStats, base: CohortStats | None, no_baseline: str
) -> CostRuleResult | None:
    """A skipped row when a delta cannot be computed honestly, else None."""
    if cand.avg_cost_usd is None:
        return _skipped(rule, threshold, f"cost delta unknown: {_unpriced(cand)}")
    if base is None:
        return _skipped(rule, threshold, f"cost delta unknown: {no_baseline}")
    if base.avg_cost_usd is None:
        return _skipped(rule, threshold, f"cost delta unknown: {_unpriced(base, 'baseline')}")
    return None


def _skipped(rule: CostRule, threshold: float, reason: str) -> CostRuleResult:
    return CostRuleResult(rule, "skipped", None, threshold, reason)


def _unpriced(stats: CohortStats, side: str = "candidate") -> str:
    if stats.sessions == 0:
        return f"the {side} has no captured session"
    if stats.sessions == 1:
        return f"the {side}'s only session was not priced"
    return f"none of the {stats.sessions} {side} sessions was priced"


def _priced_note(stats: CohortStats, side: str) -> str:
    """' (3 of 5 sessions priced)' when some sessions are left out of the average."""
    if stats.priced_sessions >= stats.sessions:
        return ""
    who = f"{side} " if side else ""
    return f" ({stats.priced_sessions} of {stats.sessions} {who}sessions priced)"


def _priced_notes(cand: CohortStats, base: CohortStats) -> str:
    return _priced_note(cand, "candidate") + _priced_note(base, "baseline")


# --- numbers ------------------------------------------------------------------------------------


REL_TOLERANCE: Final = 1e-9
ABS_TOLERANCE: Final = 1e-12
"""A value within this of its threshold (relative, or absolute near 0) meets it, so float rounding
(0.1 + 0.2 against 0.3) never flips a verdict, while a real difference, however small a cost,
still counts. The SDK's client-side rules use the same two numbers; the shared table
tests/shared/gate_cases.json holds both sides to them."""


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)


def _above(value: float, limit: float) -> bool:
    return value > limit and not _close(value, limit)


def _below(value: float, limit: float) -> bool:
    return value < limit and not _close(value, limit)


def _plain(value: float, digits: int | None = None) -> str:
    """A number in plain decimal notation: its shortest exact form, or `digits` significant
    digits; never scientific notation, no trailing zeros (0.004, 50, 0.00001234)."""
    if value == 0:
        return "0"
    text = repr(float(value)) if digits is None else f"{value:.{digits}g}"
    plain = format(Decimal(text), "f")
    return plain.rstrip("0").rstrip(".") if "." in plain else plain


def _shown(value: float, threshold: float) -> str:
    """`value` to 4 significant digits, or more when 4 would print it the same as a threshold
    it is not equal to ("pass rate 0.9 is below the minimum 0.9" would read as a bug)."""
    limit = _plain(threshold)
    for digits in range(4, 18):
        shown = _plain(value, digits)
        if shown != limit or _close(value, threshold):
            return shown
    return _plain(value)


def _signed(text: str) -> str:
    return text if text.startswith("-") or text == "0" else f"+{text}"
