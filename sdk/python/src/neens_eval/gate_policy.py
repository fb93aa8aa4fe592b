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
  never `pass`; a skipped rule does not change the exit code, and its reason says why. A change
  in % against a baseline of 0 is undefined, so it is `skipped` too, even when the candidate is 0.
- A value equal to its threshold within float rounding meets it.
- A metric rule naming a metric that no judge of the run produces (a misspelt name, a judge the
  run was not created with) is `missing`, naming the metrics the run has: at `block` it fails
  the gate like a failed rule, at `warn` it is reported. A gate must not pass on a metric that
  was never going to be measured.
- Baseline-relative budgets (any `max_delta_*`, and the gate's `max_regressions` and cost deltas)
  follow `on_missing_baseline` when the run has no baseline cohort: `warn` (the default) reports
  each as a warning, `block` fails it at the rule's own severity, `pass` skips it.
- Nothing is checked before the run is evaluated (completed or completed_with_regressions).

This module reads a policy (its file, the flags); `neens_eval.gate_rules` holds what a policy
is and evaluates it, and its names are re-exported here. No I/O except reading the policy file.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final, NoReturn

from neens_eval.errors import ConfigError
from neens_eval.gate_rules import (
    ABS_TOLERANCE,
    EVALUATED_STATUSES,
    REL_TOLERANCE,
    Check,
    GatePolicy,
    MissingBaseline,
    Rule,
    RuleResult,
    RuleStatus,
    RunData,
    Severity,
    evaluate,
    evaluate_check,
    finite_number,
    format_value,
)
from neens_eval.strict_json import no_duplicate_keys

__all__ = [
    "ABS_TOLERANCE",
    "Check",
    "DIMENSIONS",
    "EVALUATED_STATUSES",
    "FAMILIES",
    "GatePolicy",
    "MISSING_BASELINE_MODES",
    "MissingBaseline",
    "POLICY_ENV_VAR",
    "POLICY_KEYS",
    "REL_TOLERANCE",
    "Rule",
    "RuleResult",
    "RuleStatus",
    "RunData",
    "SCALARS",
    "SERVER_COST_KEYS",
    "SERVER_GATE_KEYS",
    "SEVERITIES",
    "Severity",
    "check_server_gate",
    "evaluate",
    "evaluate_check",
    "flag_rule",
    "format_value",
    "load_policy",
    "parse_policy",
    "parse_rule",
    "with_flag_rules",
]

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
        return json.loads(
            text, parse_constant=_refuse_constant, object_pairs_hook=no_duplicate_keys
        )
    except json.JSONDecodeError as exc:
        json_problem = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except ValueError as exc:  # NaN / Infinity, a key given twice
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
        return yaml.load(text, Loader=_strict_loader(yaml))  # noqa: S506 (a SafeLoader)
    except _YamlDuplicateKey as exc:
        raise ConfigError(f"gate policy {path}: {exc}") from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"gate policy {path}: not valid YAML ({detail})") from None


class _YamlDuplicateKey(ValueError):
    """A YAML mapping gives a key twice."""


def _strict_loader(yaml: Any) -> Any:
    """PyYAML's SafeLoader, except that a key given twice in one mapping is an error (PyYAML
    keeps the last, so a second `rules:` would silently drop the first one's rules)."""

    class StrictLoader(yaml.SafeLoader):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if isinstance(key, str | int | float | bool) and key in seen:
                    raise _YamlDuplicateKey(
                        f"the key {key!r} is given twice in one mapping (lines {seen[key]} and "
                        f"{line}); give each key once"
                    )
                seen[key] = line
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


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
                if finite_number(number) is None:
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
            number = finite_number(threshold)
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


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_fraction(value: Any) -> bool:
    number = finite_number(value)
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
