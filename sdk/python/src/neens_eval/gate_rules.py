"""The gate-as-code rules, evaluated: what a policy is, and how each check reads a run.

The honesty rules (`neens_eval.gate_policy` describes the file that declares them):
- A rule whose data is missing (an unpriced cost, a metric nothing was scored on) is `skipped`,
  never `pass`; a skipped rule does not change the exit code, and its reason says why. A change
  in % against a baseline of 0 is undefined, so it is `skipped` too, even when the candidate is 0.
- A value equal to its threshold within float rounding (`REL_TOLERANCE`, `ABS_TOLERANCE`) meets
  it. tests/shared/gate_cases.json holds the cases the server's gate and these rules share.
- Nothing is checked before the run is evaluated (completed or completed_with_regressions).

Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Severity = Literal["block", "warn"]

MissingBaseline = Literal["warn", "block", "pass"]

RuleStatus = Literal["pass", "fail", "skipped", "missing"]

EVALUATED_STATUSES: Final = frozenset({"completed", "completed_with_regressions"})

_UNITS: Final[Mapping[str, str]] = {
    "cost.max_avg_usd": " USD",
    "cost.max_delta_usd": " USD",
    "latency.max_avg_ms": " ms",
}

REL_TOLERANCE: Final = 1e-9
ABS_TOLERANCE: Final = 1e-12
"""A value within this of its threshold (relative, or absolute near 0) meets it: float rounding
(0.1 + 0.2 against 0.3) never flips a verdict. The server's gate uses the same two numbers, and
the shared table tests/shared/gate_cases.json holds both sides to them."""


@dataclass(frozen=True, slots=True)
class Check:
    """One budget of one rule: `cost.max_delta_pct <= 20`, `min_avg_score >= 0.8`, ..."""

    dimension: str
    """`cost`, `latency`, `steps`, `max_abs_failures`, `min_avg_score` or `metric`."""
    budget: str
    """The sub-key (`max_delta_pct`, `max_avg_ms`, `min_avg`...) or the dimension itself."""
    threshold: float
    severity: Severity
    origin: str
    """Where it was declared, for messages: `gate.json rules[2]` or `--min-avg-score`."""
    metric: str | None = None
    """For `metric` rules: the judge metric's name (or judge id)."""

    @property
    def name(self) -> str:
        """The name the summary and `--json` use: `cost.max_delta_pct`, `metric:faithfulness`."""
        if self.metric is not None:
            return f"metric:{self.metric}"
        if self.dimension == self.budget:
            return self.dimension
        return f"{self.dimension}.{self.budget}"

    @property
    def baseline_relative(self) -> bool:
        return "delta" in self.budget

    @property
    def is_minimum(self) -> bool:
        return self.budget.startswith("min_")


@dataclass(frozen=True, slots=True)
class Rule:
    """One entry of `rules` (or one convenience flag): a dimension and its checks."""

    dimension: str
    checks: tuple[Check, ...]
    origin: str


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """A parsed policy: the server gate block, the client-side rules, the missing-baseline mode."""

    gate: dict[str, Any] | None = None
    rules: tuple[Rule, ...] = ()
    on_missing_baseline: MissingBaseline = "warn"
    source: str | None = None
    """The policy file, when there is one."""
    notes: tuple[str, ...] = field(default=())
    """What a person should know about how the policy was put together (flag overrides)."""

    @property
    def checks(self) -> tuple[Check, ...]:
        return tuple(check for rule in self.rules for check in rule.checks)


@dataclass(frozen=True, slots=True)
class RuleResult:
    """A check, evaluated: one row of the summary and of `--json`'s `rules`."""

    check: Check
    status: RuleStatus
    observed: float | None
    reason: str
    severity: Severity
    """The severity in effect: the check's own, or `warn` for a missing baseline in warn mode."""

    @property
    def blocking(self) -> bool:
        """Whether this result fails the gate (exit 1)."""
        return self.status in ("fail", "missing") and self.severity == "block"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.check.name,
            "dimension": self.check.dimension,
            "budget": self.check.budget,
            "observed": self.observed,
            "threshold": self.check.threshold,
            "status": self.status,
            "severity": self.severity,
            "blocking": self.blocking,
            "reason": self.reason,
            "origin": self.check.origin,
        }
        if self.check.metric is not None:
            out["metric"] = self.check.metric
        return out


@dataclass(frozen=True, slots=True)
class RunData:
    """What the rules read: the run detail, `/items`, `/comparison` and `/metrics` answers."""

    status: str
    items: Sequence[Mapping[str, Any]]
    comparison: Mapping[str, Any] | None
    metrics: Sequence[Mapping[str, Any]]
    judges: Mapping[str, str | None] = field(default_factory=dict)
    """The judges whose scores the run's `/metrics` can list (the run's `judgeDeploymentIds`
    and the components of its composites), each with its name (the metric it produces), or
    None when the name could not be read."""

    @property
    def evaluated(self) -> bool:
        return self.status in EVALUATED_STATUSES

    @property
    def baseline(self) -> Mapping[str, Any] | None:
        baseline = self.comparison.get("baseline") if self.comparison else None
        return baseline if isinstance(baseline, Mapping) else None

    @property
    def candidate(self) -> Mapping[str, Any]:
        candidate = self.comparison.get("candidate") if self.comparison else None
        return candidate if isinstance(candidate, Mapping) else {}


def evaluate(policy: GatePolicy, data: RunData) -> list[RuleResult]:
    """Every client-side check, then the server gate's baseline-relative keys when the run has
    no baseline (the server cannot tell "no regression" from "nothing to regress against")."""
    results = [evaluate_check(check, policy.on_missing_baseline, data) for check in policy.checks]
    results.extend(_server_gate_without_baseline(policy, data))
    return results


def evaluate_check(check: Check, mode: MissingBaseline, data: RunData) -> RuleResult:
    if check.dimension == "metric":
        absent = _metric_absent(check, data)
        if absent is not None:
            return RuleResult(check, "missing", None, absent, check.severity)
    if not data.evaluated:
        return _skipped(check, None, f"not evaluated: the run is {data.status}, not completed")
    if check.baseline_relative and data.baseline is None:
        return _missing_baseline(check, mode)
    observed, missing = _observe(check, data)
    if observed is None:
        return _skipped(check, None, missing)
    return _verdict(check, observed)


def _observe(check: Check, data: RunData) -> tuple[float | None, str]:
    """The observed value for a check, or None and why it is missing."""
    candidate, baseline = data.candidate, data.baseline or {}
    if check.dimension == "max_abs_failures":
        failures = sum(
            1
            for item in data.items
            if item.get("status") == "error"
            or (item.get("status") == "scored" and item.get("passed") is False)
        )
        return float(failures), ""
    if check.dimension == "min_avg_score":
        scores = [
            float(item["score"])
            for item in data.items
            if item.get("status") == "scored" and finite_number(item.get("score")) is not None
        ]
        if not scores:
            return None, "no item was scored"
        return math.fsum(scores) / len(scores), ""
    if check.dimension == "metric":
        return _observe_metric(check, data)
    field_name = {"cost": "avgCostUsd", "latency": "avgLatencyMs", "steps": "avgStepCount"}[
        check.dimension
    ]
    what = {"cost": "cost", "latency": "latency", "steps": "step count"}[check.dimension]
    cand = finite_number(candidate.get(field_name))
    if cand is None:
        return None, f"candidate {what} unknown: {_why_unknown(check.dimension, candidate)}"
    if check.budget.startswith("max_avg"):
        return cand, ""
    base = finite_number(baseline.get(field_name))
    if base is None:
        return None, f"baseline {what} unknown: {_why_unknown(check.dimension, baseline)}"
    if check.budget == "max_delta_usd":
        return cand - base, ""
    if base == 0:  # even when the candidate is 0 too: "0% more than nothing" is no measurement
        return None, f"the baseline {what} is 0, so a percentage change is undefined"
    return (cand - base) / base * 100.0, ""


def _metric_absent(check: Check, data: RunData) -> str | None:
    """Why no judge of the run can produce the check's metric, or None when one does (or when
    that cannot be told: a judge of the run whose name could not be read and that has no row)."""
    names = {str(row.get("metric")) for row in data.metrics}
    scored_ids = {str(row.get("judgeId")) for row in data.metrics}
    names.update(name for name in data.judges.values() if name is not None)
    if check.metric in names or check.metric in scored_ids or check.metric in data.judges:
        return None
    if any(name is None and judge not in scored_ids for judge, name in data.judges.items()):
        return None
    if not data.judges and not data.metrics:
        return None  # nothing is known about the run's judges: never claim a metric is missing
    listed = ", ".join(json.dumps(name) for name in sorted(names)) if names else "none"
    return (
        f"no judge of this run produces metric {json.dumps(check.metric)} (the run's metrics: "
        f"{listed}); fix the name in the policy, or create the run with that judge (--judge)"
    )


def _observe_metric(check: Check, data: RunData) -> tuple[float | None, str]:
    rows = [row for row in data.metrics if check.metric in (row.get("metric"), row.get("judgeId"))]
    if not rows:
        return None, (
            f"metric {json.dumps(check.metric)} has no score on this run: its judge scored nothing"
        )
    average = finite_number(rows[0].get("avgScore"))
    if average is None:
        return None, f"metric {json.dumps(check.metric)} scored no session"
    return average, ""


def _why_unknown(dimension: str, cohort: Mapping[str, Any]) -> str:
    sessions = cohort.get("sessions")
    if dimension == "cost":
        priced = cohort.get("pricedSessions")
        return f"no priced session ({priced} of {sessions} priced)"
    return f"not measured on its {sessions} sessions"


def _verdict(check: Check, observed: float) -> RuleResult:
    if check.is_minimum:
        failed = observed < check.threshold and not _close(observed, check.threshold)
        relation = "is below the minimum" if failed else "meets the minimum"
    else:
        failed = observed > check.threshold and not _close(observed, check.threshold)
        relation = "is above the maximum" if failed else "is within the maximum"
    reason = (
        f"{_describe(check)} {format_value(check, observed)} {relation} "
        f"{format_value(check, check.threshold)}"
    )
    return RuleResult(check, "fail" if failed else "pass", observed, reason, check.severity)


def _missing_baseline(check: Check, mode: MissingBaseline) -> RuleResult:
    reason = f"no baseline cohort to compare against (on_missing_baseline: {mode})"
    if mode == "pass":
        return RuleResult(check, "skipped", None, reason, check.severity)
    severity: Severity = "warn" if mode == "warn" else check.severity
    return RuleResult(check, "fail", None, reason, severity)


def _skipped(check: Check, observed: float | None, reason: str) -> RuleResult:
    return RuleResult(check, "skipped", observed, reason, check.severity)


def _server_gate_without_baseline(policy: GatePolicy, data: RunData) -> list[RuleResult]:
    """The server gate's baseline-relative keys, when the evaluated run has no baseline.

    Without a baseline no item can regress, so the server's `max_regressions` trivially passes
    and its cost deltas are skipped. `on_missing_baseline` decides what that means.
    """
    if not data.evaluated or data.baseline is not None or not policy.gate:
        return []
    declared: list[tuple[str, float]] = []
    if "max_regressions" in policy.gate:
        declared.append(("max_regressions", float(policy.gate["max_regressions"])))
    cost = policy.gate.get("cost")
    if isinstance(cost, dict):
        declared.extend(
            (budget, float(cost[budget]))
            for budget in ("max_delta_usd", "max_delta_pct")
            if finite_number(cost.get(budget)) is not None
        )
    results = []
    for budget, threshold in declared:
        dimension = "gate" if budget == "max_regressions" else "gate.cost"
        check = Check(dimension, budget, threshold, "block", "server gate")
        results.append(_missing_baseline(check, policy.on_missing_baseline))
    return results


def _describe(check: Check) -> str:
    if check.metric is not None:
        return f"metric {check.metric} avg score"
    return {
        "cost.max_avg_usd": "cost avg",
        "cost.max_delta_usd": "cost change vs baseline",
        "cost.max_delta_pct": "cost change vs baseline",
        "latency.max_avg_ms": "latency avg",
        "latency.max_delta_pct": "latency change vs baseline",
        "steps.max_avg": "steps avg",
        "steps.max_delta_pct": "step count change vs baseline",
        "max_abs_failures": "failed items",
        "min_avg_score": "avg item score",
    }[check.name]


def format_value(check: Check, number: float) -> str:
    """A number as the summary shows it, with its unit (`+20%`, `0.0042 USD`, `950 ms`)."""
    if check.budget.endswith("_pct"):
        return f"{number:+.1f}%"
    if check.budget == "max_abs_failures":
        return f"{number:.0f}"
    unit = _UNITS.get(check.name, "")
    sign = "+" if check.budget == "max_delta_usd" and number > 0 else ""
    return f"{sign}{_plain(number)}{unit}"


def _plain(number: float) -> str:
    if number == int(number) and abs(number) < 1e15:
        return str(int(number))
    return f"{number:.4g}" if abs(number) < 0.01 else f"{number:.4f}".rstrip("0").rstrip(".")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)


def finite_number(value: Any) -> float | None:
    """A finite number as float, else None (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
