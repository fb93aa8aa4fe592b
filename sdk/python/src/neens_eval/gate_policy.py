"""Gate-as-code: the policy file of `--gate-policy` / `NEENS_GATE_POLICY`, and its rules.

A policy is a JSON object (or YAML, when PyYAML is importable):

    {"gate": {"max_regressions": 0, "min_pass_rate": 0.9},
     "rules": [{"cost": {"max_avg_usd": 0.05, "max_delta_pct": 20}, "severity": "warn"},
               {"metric": "faithfulness", "min_avg": 0.8}],
     "on_missing_baseline": "warn"}

`gate` is handed to the server when the run is created: Neens stays authoritative for
`max_regressions`, `min_pass_rate` and its `cost` family. `rules` are evaluated here, over the
run detail, `/items`, `/comparison` and `/metrics`. Each rule has exactly one dimension key
(`cost`, `latency`, `steps`, `max_abs_failures`, `min_avg_score`, or `metric` with `min_avg`) and
an optional `severity`: `block` (the default) fails the gate, `warn` is only reported.

Honesty rules, the same as the server's:
- A rule whose data is missing (an unpriced cost, a metric nothing was scored on) is `skipped`,
  never `pass`; a skipped rule does not change the exit code, and its reason says why.
- A metric rule naming a metric that no judge of the run produces (a misspelt name, a judge the
  run was not created with) is `missing`, naming the metrics the run has: at `block` it fails
  the gate like a failed rule, at `warn` it is reported. A gate must not pass on a metric that
  was never going to be measured.
- Baseline-relative budgets (any `max_delta_*`, and the gate's `max_regressions` and cost deltas)
  follow `on_missing_baseline` when the run has no baseline cohort: `warn` (the default) reports
  each as a warning, `block` fails it at the rule's own severity, `pass` skips it.
- Nothing is checked before the run is evaluated (completed or completed_with_regressions).

Everything here is pure: no I/O except reading the policy file.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal, NoReturn

from neens_eval.errors import ConfigError

Severity = Literal["block", "warn"]
MissingBaseline = Literal["warn", "block", "pass"]
RuleStatus = Literal["pass", "fail", "skipped", "missing"]

POLICY_ENV_VAR: Final = "NEENS_GATE_POLICY"
POLICY_KEYS: Final = ("gate", "rules", "on_missing_baseline")
SERVER_GATE_KEYS: Final = ("max_regressions", "min_pass_rate", "cost")
SERVER_COST_KEYS: Final = ("max_avg_usd", "max_delta_usd", "max_delta_pct")
SEVERITIES: Final[tuple[Severity, ...]] = ("block", "warn")
MISSING_BASELINE_MODES: Final[tuple[MissingBaseline, ...]] = ("warn", "block", "pass")

FAMILIES: Final[Mapping[str, tuple[str, ...]]] = {
    "cost": ("max_avg_usd", "max_delta_usd", "max_delta_pct"),
    "latency": ("max_avg_ms", "max_delta_pct"),
    "steps": ("max_avg", "max_delta_pct"),
}
"""Dimensions whose value is an object of budgets, and the budgets each accepts."""
SCALARS: Final = ("max_abs_failures", "min_avg_score")
"""Dimensions whose value is the threshold itself."""
DIMENSIONS: Final = (*FAMILIES, *SCALARS, "metric")
EVALUATED_STATUSES: Final = frozenset({"completed", "completed_with_regressions"})

_UNITS: Final[Mapping[str, str]] = {
    "cost.max_avg_usd": " USD",
    "cost.max_delta_usd": " USD",
    "latency.max_avg_ms": " ms",
}
_TOLERANCE: Final = 1e-9


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


# --- reading a policy ----------------------------------------------------------------------------


def load_policy(path: Path) -> GatePolicy:
    """Read and check a policy file; every problem is a `ConfigError` naming the file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"gate policy {path}: no such file; check --gate-policy or {POLICY_ENV_VAR}"
        ) from None
    except IsADirectoryError:
        raise ConfigError(
            f"gate policy {path}: is a directory; give a .json or .yaml file"
        ) from None
    except OSError as exc:
        raise ConfigError(f"gate policy {path}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise ConfigError(f"gate policy {path}: not valid UTF-8; save it as UTF-8") from None
    document = _parse_document(text, path)
    return parse_policy(document, source=str(path))


def _parse_document(text: str, path: Path) -> Any:
    """JSON for `.json`, YAML for `.yaml`/`.yml`; any other name is tried as JSON, then YAML."""
    if path.suffix.lower() in (".yaml", ".yml"):
        return _parse_yaml(text, path)
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        json_problem = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except ValueError as exc:  # NaN / Infinity
        raise ConfigError(f"gate policy {path}: {exc}") from None
    if path.suffix.lower() == ".json":
        raise ConfigError(f"gate policy {path}: not valid JSON ({json_problem})")
    yaml = _yaml_module()
    if yaml is None:
        raise ConfigError(
            f"gate policy {path}: not valid JSON ({json_problem}); a YAML policy needs PyYAML "
            f"(pip install pyyaml), or write the policy as JSON"
        )
    try:
        return _parse_yaml(text, path)
    except ConfigError:
        raise ConfigError(
            f"gate policy {path}: neither valid JSON ({json_problem}) nor valid YAML; fix the "
            f"syntax (name the file .yaml to see the YAML error)"
        ) from None


def _parse_yaml(text: str, path: Path) -> Any:
    yaml = _yaml_module()
    if yaml is None:
        raise ConfigError(
            f"gate policy {path} is YAML, but PyYAML is not installed: pip install pyyaml, or "
            f"write the policy as JSON"
        )
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"gate policy {path}: not valid YAML ({detail})") from None


def _yaml_module() -> Any:
    """PyYAML when it is importable, else None: it is optional, so it is looked up by name."""
    try:
        return importlib.import_module("yaml")
    except ImportError:
        return None


def parse_policy(document: Any, *, source: str) -> GatePolicy:
    """Check a decoded policy document; `source` (the file) prefixes every error message."""
    where = f"gate policy {source}"
    if not isinstance(document, dict):
        _fail(where, f"expected an object with {_keys(POLICY_KEYS)}, got {_kind(document)}")
    for key in document:
        if key not in POLICY_KEYS:
            _fail(where, f"unknown key {json.dumps(key)}; a policy has {_keys(POLICY_KEYS)}")
    gate = document.get("gate")
    if gate is not None:
        gate = check_server_gate(gate, f"{where}: gate")
    rules_raw = document.get("rules", [])
    if rules_raw is None:
        rules_raw = []
    if not isinstance(rules_raw, list):
        _fail(where, f'"rules" must be a list of rule objects, got {_kind(rules_raw)}')
    rules = tuple(
        parse_rule(raw, origin=f"rules[{index}]", where=f"{where}: rules[{index}]")
        for index, raw in enumerate(rules_raw)
    )
    mode = document.get("on_missing_baseline", "warn")
    if mode not in MISSING_BASELINE_MODES:
        _fail(
            where,
            f'"on_missing_baseline" must be "warn", "block" or "pass", got {json.dumps(mode)}',
        )
    return GatePolicy(gate=gate, rules=rules, on_missing_baseline=mode, source=source)


def check_server_gate(gate: Any, where: str) -> dict[str, Any]:
    """Check the keys and types of a `gate` block before it is sent (the server checks it too)."""
    if not isinstance(gate, dict):
        _fail(where, f"must be an object, got {_kind(gate)}")
    for key, value in gate.items():
        if key not in SERVER_GATE_KEYS:
            _fail(where, f"unknown key {json.dumps(key)}; the gate has {_keys(SERVER_GATE_KEYS)}")
        if key == "max_regressions" and not _is_count(value):
            _fail(where, f"max_regressions must be an integer >= 0, got {_shown_raw(value)}")
        if key == "min_pass_rate" and not _is_fraction(value):
            _fail(where, f"min_pass_rate must be a number between 0 and 1, got {_shown_raw(value)}")
        if key == "cost":
            if not isinstance(value, dict) or not value:
                _fail(where, f"cost must be an object with some of {_keys(SERVER_COST_KEYS)}")
            for sub, number in value.items():
                if sub not in SERVER_COST_KEYS:
                    _fail(
                        where,
                        f"cost has an unknown key {json.dumps(sub)}; it accepts "
                        f"{_keys(SERVER_COST_KEYS)}",
                    )
                if _number(number) is None:
                    _fail(where, f"cost.{sub} must be a number, got {_shown_raw(number)}")
    return dict(gate)


def parse_rule(raw: Any, *, origin: str, where: str) -> Rule:
    """Check one rule: exactly one dimension key, its budgets, an optional severity."""
    if not isinstance(raw, dict):
        _fail(where, f'a rule must be an object such as {{"min_avg_score": 0.8}}, got {_kind(raw)}')
    allowed = (*DIMENSIONS, "min_avg", "severity")
    for key in raw:
        if key not in allowed:
            _fail(
                where,
                f"unknown key {json.dumps(key)}; a rule has exactly one of {_keys(DIMENSIONS)} "
                f'(with "min_avg" for metric), and an optional "severity"',
            )
    dimensions = [key for key in raw if key in DIMENSIONS]
    if len(dimensions) != 1:
        found = f"found {_keys(dimensions)}" if dimensions else "found none"
        _fail(
            where,
            f"a rule has exactly one dimension key of {_keys(DIMENSIONS)} ({found}); "
            f"split it into one rule per dimension",
        )
    dimension = dimensions[0]
    severity = raw.get("severity", "block")
    if severity not in SEVERITIES:
        _fail(where, f'"severity" must be "block" or "warn", got {json.dumps(severity)}')
    if "min_avg" in raw and dimension != "metric":
        _fail(where, '"min_avg" belongs to a metric rule: {"metric": "<name>", "min_avg": 0.8}')
    value = raw[dimension]
    checks: list[Check] = []
    if dimension in FAMILIES:
        budgets = FAMILIES[dimension]
        if not isinstance(value, dict) or not value:
            _fail(where, f'"{dimension}" must be an object with some of {_keys(budgets)}')
        for budget, threshold in value.items():
            if budget not in budgets:
                _fail(
                    where,
                    f"{dimension} has an unknown budget {json.dumps(budget)}; it accepts "
                    f"{_keys(budgets)}",
                )
            number = _number(threshold)
            if number is None:
                _fail(where, f"{dimension}.{budget} must be a number, got {_shown_raw(threshold)}")
            floor = -100.0 if budget == "max_delta_pct" else (0.0 if "avg" in budget else None)
            if floor is not None and number < floor:
                _fail(where, f"{dimension}.{budget} must be >= {floor:g}, got {threshold}")
            checks.append(Check(dimension, budget, number, severity, origin))
    elif dimension == "max_abs_failures":
        if not _is_count(value):
            _fail(where, f"max_abs_failures must be an integer >= 0, got {_shown_raw(value)}")
        checks.append(Check(dimension, dimension, float(value), severity, origin))
    elif dimension == "min_avg_score":
        if not _is_fraction(value):
            _fail(where, f"min_avg_score must be a number between 0 and 1, got {_shown_raw(value)}")
        checks.append(Check(dimension, dimension, float(value), severity, origin))
    else:  # metric
        if not isinstance(value, str) or not value.strip():
            _fail(where, f'"metric" must be the name of a judge metric, got {_shown_raw(value)}')
        if "min_avg" not in raw:
            _fail(where, f'metric {json.dumps(value)} needs a "min_avg" floor between 0 and 1')
        if not _is_fraction(raw["min_avg"]):
            _fail(
                where, f"min_avg must be a number between 0 and 1, got {_shown_raw(raw['min_avg'])}"
            )
        checks.append(
            Check("metric", "min_avg", float(raw["min_avg"]), severity, origin, metric=value)
        )
    return Rule(dimension, tuple(checks), origin)


def with_flag_rules(policy: GatePolicy, flag_rules: Sequence[Rule]) -> GatePolicy:
    """Add the convenience flags' block rules; each replaces every file rule of its dimension."""
    rules = list(policy.rules)
    notes = list(policy.notes)
    for flag_rule in flag_rules:
        replaced = [rule for rule in rules if rule.dimension == flag_rule.dimension]
        for rule in replaced:
            notes.append(
                f"{flag_rule.origin} replaces {rule.origin} ({rule.dimension}) of the gate policy"
            )
        rules = [rule for rule in rules if rule.dimension != flag_rule.dimension]
        rules.append(flag_rule)
    return replace(policy, rules=tuple(rules), notes=tuple(notes))


def flag_rule(flag: str, dimension: str, budget: str, threshold: float) -> Rule:
    """The block rule a convenience flag such as `--max-cost-delta-pct 20` stands for."""
    return Rule(dimension, (Check(dimension, budget, threshold, "block", flag),), flag)


# --- evaluating -----------------------------------------------------------------------------------


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
            if item.get("status") == "scored" and _number(item.get("score")) is not None
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
    cand = _number(candidate.get(field_name))
    if cand is None:
        return None, f"candidate {what} unknown: {_why_unknown(check.dimension, candidate)}"
    if check.budget.startswith("max_avg"):
        return cand, ""
    base = _number(baseline.get(field_name))
    if base is None:
        return None, f"baseline {what} unknown: {_why_unknown(check.dimension, baseline)}"
    if check.budget == "max_delta_usd":
        return cand - base, ""
    if base == 0:
        if cand == 0:
            return 0.0, ""
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
    average = _number(rows[0].get("avgScore"))
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
        relation = "below the minimum" if failed else "meets the minimum"
    else:
        failed = observed > check.threshold and not _close(observed, check.threshold)
        relation = "above the maximum" if failed else "within the maximum"
    reason = (
        f"{_describe(check)} {format_value(check, observed)} is {relation} "
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
            if _number(cost.get(budget)) is not None
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
    return math.isclose(a, b, rel_tol=_TOLERANCE, abs_tol=_TOLERANCE)


# --- small helpers --------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    """A finite number as float, else None (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_fraction(value: Any) -> bool:
    number = _number(value)
    return number is not None and 0 <= number <= 1


def _keys(names: Sequence[str]) -> str:
    quoted = [json.dumps(name) for name in names]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _shown_raw(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null (an empty file?)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON; write a number instead")


def _fail(where: str, problem: str) -> NoReturn:
    raise ConfigError(f"{where}: {problem}")
