"""Gate-as-code: reading a policy file, and checking its rules over a run's data.

Pure tests: the run data is written out as the server's documented answers (`/comparison`,
`/metrics`, `/items`); docs/cli.md is the contract.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from neens_eval import gate_policy
from neens_eval.errors import ConfigError
from neens_eval.gate_policy import (
    GatePolicy,
    RunData,
    evaluate,
    flag_rule,
    load_policy,
    parse_policy,
    with_flag_rules,
)

SPEC_POLICY: dict[str, Any] = {
    "gate": {"max_regressions": 0, "min_pass_rate": 0.9},
    "rules": [
        {"cost": {"max_avg_usd": 0.05, "max_delta_pct": 20}, "severity": "warn"},
        {"latency": {"max_avg_ms": 3000, "max_delta_pct": 25}, "severity": "warn"},
        {"steps": {"max_avg": 8, "max_delta_pct": 50}, "severity": "block"},
        {"max_abs_failures": 3, "severity": "block"},
        {"min_avg_score": 0.8, "severity": "block"},
        {"metric": "faithfulness", "min_avg": 0.8, "severity": "block"},
        {"metric": "toxicity_safety", "min_avg": 0.9, "severity": "warn"},
    ],
    "on_missing_baseline": "warn",
}


def cohort(cost: float | None, latency: float | None, steps: float | None) -> dict[str, Any]:
    return {
        "avgCostUsd": cost,
        "pricedSessions": 0 if cost is None else 4,
        "sessions": 4,
        "avgLatencyMs": latency,
        "avgStepCount": steps,
    }


def item(status: str, score: float | None = None, passed: bool | None = None) -> dict[str, Any]:
    return {"item_id": f"dsi_{status}_{score}", "status": status, "score": score, "passed": passed}


ITEMS = [item("scored", 1.0, True), item("scored", 0.9, True), item("scored", 0.2, False)]
METRICS = [
    {"metric": "faithfulness", "judgeId": "jdg_f", "avgScore": 0.85, "passRate": 1.0},
    {"metric": "toxicity_safety", "judgeId": "jdg_t", "avgScore": None, "passRate": None},
]


def data(
    candidate: dict[str, Any] | None = None,
    baseline: dict[str, Any] | None = None,
    *,
    status: str = "completed",
    items: list[dict[str, Any]] | None = None,
) -> RunData:
    comparison = {
        "candidate": candidate or cohort(0.006, 1200.0, 4.0),
        "baseline": baseline,
    }
    return RunData(status, ITEMS if items is None else items, comparison, METRICS)


def results(policy: dict[str, Any], run: RunData) -> dict[str, gate_policy.RuleResult]:
    return {r.check.name: r for r in evaluate(parse_policy(policy, source="p.json"), run)}


# --- reading ----------------------------------------------------------------------------------


def test_the_specs_example_policy_reads_as_one_check_per_budget() -> None:
    policy = parse_policy(SPEC_POLICY, source="gate.json")

    assert policy.gate == {"max_regressions": 0, "min_pass_rate": 0.9}
    assert policy.on_missing_baseline == "warn"
    assert [(c.name, c.threshold, c.severity) for c in policy.checks] == [
        ("cost.max_avg_usd", 0.05, "warn"),
        ("cost.max_delta_pct", 20, "warn"),
        ("latency.max_avg_ms", 3000, "warn"),
        ("latency.max_delta_pct", 25, "warn"),
        ("steps.max_avg", 8, "block"),
        ("steps.max_delta_pct", 50, "block"),
        ("max_abs_failures", 3, "block"),
        ("min_avg_score", 0.8, "block"),
        ("metric:faithfulness", 0.8, "block"),
        ("metric:toxicity_safety", 0.9, "warn"),
    ]


def test_severity_defaults_to_block_and_on_missing_baseline_to_warn() -> None:
    policy = parse_policy({"rules": [{"min_avg_score": 0.5}]}, source="p.json")

    assert policy.checks[0].severity == "block"
    assert policy.on_missing_baseline == "warn"
    assert policy.gate is None


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "expected an object"),
        ({"rule": []}, 'unknown key "rule"'),
        ({"rules": {}}, '"rules" must be a list'),
        ({"rules": [{"max_cost": 1}]}, 'rules[0]: unknown key "max_cost"'),
        (
            {
                "rules": [
                    {"min_avg_score": 0.5},
                    {"cost": {"max_avg_usd": 1}, "steps": {"max_avg": 1}},
                ]
            },
            'rules[1]: a rule has exactly one dimension key of "cost", "latency", "steps", '
            '"max_abs_failures", "min_avg_score" and "metric" (found "cost" and "steps")',
        ),
        ({"rules": [{"severity": "warn"}]}, "rules[0]: a rule has exactly one dimension key"),
        ({"rules": [{"min_avg_score": 0.5, "severity": "fatal"}]}, 'rules[0]: "severity" must be'),
        (
            {"rules": [{"cost": {"max_avg_ms": 1}}]},
            'rules[0]: cost has an unknown budget "max_avg_ms"',
        ),
        (
            {"rules": [{"latency": {"max_avg_usd": 1}}]},
            'latency has an unknown budget "max_avg_usd"',
        ),
        ({"rules": [{"steps": {}}]}, '"steps" must be an object'),
        ({"rules": [{"cost": {"max_delta_pct": "20"}}]}, "cost.max_delta_pct must be a number"),
        ({"rules": [{"cost": {"max_delta_pct": -101}}]}, "cost.max_delta_pct must be >= -100"),
        ({"rules": [{"latency": {"max_avg_ms": -1}}]}, "latency.max_avg_ms must be >= 0"),
        ({"rules": [{"max_abs_failures": 1.5}]}, "max_abs_failures must be an integer >= 0"),
        ({"rules": [{"max_abs_failures": True}]}, "max_abs_failures must be an integer >= 0"),
        ({"rules": [{"min_avg_score": 2}]}, "min_avg_score must be a number between 0 and 1"),
        ({"rules": [{"metric": "faithfulness"}]}, 'needs a "min_avg" floor'),
        ({"rules": [{"metric": ""}]}, '"metric" must be the name of a judge metric'),
        ({"rules": [{"min_avg_score": 0.5, "min_avg": 0.5}]}, '"min_avg" belongs to a metric rule'),
        (
            {"on_missing_baseline": "skip"},
            '"on_missing_baseline" must be "warn", "block" or "pass"',
        ),
        ({"gate": {"max_regresions": 0}}, 'gate: unknown key "max_regresions"'),
        ({"gate": {"min_pass_rate": 90}}, "min_pass_rate must be a number between 0 and 1"),
        ({"gate": {"cost": {"max_avg": 1}}}, 'cost has an unknown key "max_avg"'),
    ],
)
def test_a_bad_policy_is_a_usage_error_that_names_the_file_and_the_rule(
    document: object, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_policy(document, source="gate.json")

    assert str(raised.value).startswith("gate policy gate.json: ")
    assert message in str(raised.value)
    assert raised.value.exit_code == 2


def test_a_json_file_is_read_and_a_json_syntax_error_says_where(tmp_path: Path) -> None:
    good = tmp_path / "gate.json"
    good.write_text("\ufeff" + json.dumps(SPEC_POLICY), encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text('{"rules": [\n  {"min_avg_score": 0.8},\n]}', encoding="utf-8")

    assert load_policy(good).source == str(good)
    with pytest.raises(ConfigError, match=r"bad\.json: not valid JSON \(.* at line 3"):
        load_policy(bad)
    with pytest.raises(ConfigError, match="no such file; check --gate-policy or NEENS_GATE_POLICY"):
        load_policy(tmp_path / "missing.json")


def test_nan_is_refused_in_a_json_policy(tmp_path: Path) -> None:
    path = tmp_path / "gate.json"
    path.write_text('{"rules": [{"min_avg_score": NaN}]}', encoding="utf-8")

    with pytest.raises(ConfigError, match="NaN is not valid JSON"):
        load_policy(path)


def test_a_key_given_twice_is_refused_rather_than_the_last_one_kept(tmp_path: Path) -> None:
    """The second `rules` would otherwise silently drop the first one's blocking rule."""
    pytest.importorskip("yaml")
    rule = '{"metric": "toxicity", "min_avg": 0.9}'
    cases = {
        "policy.json": f'{{"rules": [{rule}], "rules": []}}',
        "rule.json": '{"rules": [{"metric": "toxicity", "metric": "Primary Score", "min_avg": 1}]}',
        "policy.yaml": "rules:\n  - metric: toxicity\n    min_avg: 0.9\nrules: []\n",
        "rule.yaml": "rules:\n  - metric: toxicity\n    min_avg: 0.9\n    min_avg: 0.1\n",
    }
    messages = {
        "policy.json": "the key 'rules' is given twice in one object; give each key once",
        "rule.json": "the key 'metric' is given twice in one object; give each key once",
        "policy.yaml": "the key 'rules' is given twice in one mapping (lines 1 and 4); give "
        "each key once",
        "rule.yaml": "the key 'min_avg' is given twice in one mapping (lines 3 and 4); give "
        "each key once",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError) as raised:
            load_policy(path)
        assert str(raised.value) == f"gate policy {path}: {messages[name]}"
        assert raised.value.exit_code == 2
    merged = tmp_path / "merged.yaml"
    merged.write_text(
        "base: &base {metric: toxicity, min_avg: 0.9}\nrules:\n  - <<: *base\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match='unknown key "base"'):
        load_policy(merged)  # a YAML merge is not a repeated key: the policy is read, then checked


def test_a_yaml_policy_without_pyyaml_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gate_policy, "_yaml_module", lambda: None)
    path = tmp_path / "gate.yaml"
    path.write_text("rules:\n  - min_avg_score: 0.8\n", encoding="utf-8")
    unnamed = tmp_path / "gate.policy"
    unnamed.write_text("rules:\n  - min_avg_score: 0.8\n", encoding="utf-8")

    with pytest.raises(ConfigError) as raised:
        load_policy(path)
    assert "is YAML, but PyYAML is not installed: pip install pyyaml" in str(raised.value)
    with pytest.raises(ConfigError, match="a YAML policy needs PyYAML"):
        load_policy(unnamed)


def test_a_yaml_policy_reads_like_its_json_twin_when_pyyaml_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "gate.yml"
    path.write_text(
        "gate: {max_regressions: 0, min_pass_rate: 0.9}\n"
        "rules:\n"
        "  - cost: {max_avg_usd: 0.05, max_delta_pct: 20}\n"
        "    severity: warn  # reported, never blocks\n"
        "  - metric: faithfulness\n"
        "    min_avg: 0.8\n",
        encoding="utf-8",
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [\n", encoding="utf-8")

    policy = load_policy(path)

    assert policy.gate == {"max_regressions": 0, "min_pass_rate": 0.9}
    assert [c.name for c in policy.checks] == [
        "cost.max_avg_usd",
        "cost.max_delta_pct",
        "metric:faithfulness",
    ]
    with pytest.raises(ConfigError, match="bad.yaml: not valid YAML"):
        load_policy(bad)


def test_a_convenience_flag_replaces_every_file_rule_of_its_dimension() -> None:
    policy = parse_policy(SPEC_POLICY, source="gate.json")

    merged = with_flag_rules(
        policy, [flag_rule("--max-cost-delta-pct", "cost", "max_delta_pct", 10.0)]
    )

    cost = [c for c in merged.checks if c.dimension == "cost"]
    assert [(c.name, c.threshold, c.severity, c.origin) for c in cost] == [
        ("cost.max_delta_pct", 10.0, "block", "--max-cost-delta-pct")
    ]
    assert merged.notes == ("--max-cost-delta-pct replaces rules[0] (cost) of the gate policy",)
    assert len(merged.checks) == len(policy.checks) - 1  # latency, steps... are untouched


# --- evaluating -------------------------------------------------------------------------------


def test_absolute_rules_read_the_candidate_cohort_the_items_and_the_metrics() -> None:
    checked = results(SPEC_POLICY, data(baseline=cohort(0.005, 1000.0, 4.0)))

    assert checked["cost.max_avg_usd"].status == "pass"
    assert checked["cost.max_avg_usd"].observed == pytest.approx(0.006)
    assert checked["latency.max_avg_ms"].observed == 1200
    assert checked["steps.max_avg"].observed == 4
    assert checked["max_abs_failures"].observed == 1  # one scored item failed
    assert checked["min_avg_score"].observed == pytest.approx(0.7)  # mean of 1.0, 0.9, 0.2
    assert checked["min_avg_score"].status == "fail"
    assert checked["min_avg_score"].blocking is True
    assert checked["metric:faithfulness"].observed == pytest.approx(0.85)
    assert checked["metric:faithfulness"].status == "pass"


def test_delta_rules_compare_with_the_baseline_in_percent() -> None:
    checked = results(SPEC_POLICY, data(baseline=cohort(0.005, 1000.0, 4.0)))

    cost = checked["cost.max_delta_pct"]
    assert cost.observed == pytest.approx(20.0)  # (0.006 - 0.005) / 0.005 * 100
    assert cost.status == "pass"  # exactly at the budget meets it
    latency = checked["latency.max_delta_pct"]
    assert latency.observed == pytest.approx(20.0)
    assert latency.status == "pass"
    assert checked["steps.max_delta_pct"].observed == 0


def test_a_breached_warn_rule_is_reported_but_never_blocks() -> None:
    checked = results(SPEC_POLICY, data(baseline=cohort(0.002, 1000.0, 4.0)))

    cost = checked["cost.max_delta_pct"]
    assert (cost.status, cost.severity, cost.blocking) == ("fail", "warn", False)
    assert cost.reason == "cost change vs baseline +200.0% is above the maximum +20.0%"


def test_max_abs_failures_counts_failed_and_errored_items() -> None:
    items = [*ITEMS, item("error"), item("pending")]
    policy = {"rules": [{"max_abs_failures": 1}]}

    checked = results(policy, data(items=items))

    assert checked["max_abs_failures"].observed == 2
    assert checked["max_abs_failures"].blocking is True


def test_a_rule_whose_data_is_missing_is_skipped_never_passed() -> None:
    policy = {
        "rules": [
            {"cost": {"max_avg_usd": 1, "max_delta_usd": 1}},
            {"metric": "toxicity_safety", "min_avg": 0.1},
            {"min_avg_score": 0.1},
        ]
    }
    unpriced = data(cohort(None, 1000.0, 2.0), cohort(0.01, 900.0, 2.0), items=[item("error")])

    checked = results(policy, unpriced)

    assert {name: r.status for name, r in checked.items()} == {
        "cost.max_avg_usd": "skipped",
        "cost.max_delta_usd": "skipped",
        "metric:toxicity_safety": "skipped",
        "min_avg_score": "skipped",
    }
    assert not any(r.blocking for r in checked.values())
    assert checked["cost.max_avg_usd"].reason == (
        "candidate cost unknown: no priced session (0 of 4 priced)"
    )
    assert checked["metric:toxicity_safety"].reason == (
        'metric "toxicity_safety" scored no session'
    )
    assert checked["min_avg_score"].reason == "no item was scored"


def test_a_metric_no_judge_of_the_run_produces_is_missing_and_blocks_at_block() -> None:
    policy = {
        "rules": [
            {"metric": "relevance", "min_avg": 0.1},
            {"metric": "relevnce", "min_avg": 0.1, "severity": "warn"},
        ]
    }

    for status in ("completed", "running"):
        checked = results(policy, data(status=status))

        blocked, warned = checked["metric:relevance"], checked["metric:relevnce"]
        assert (blocked.status, blocked.blocking) == ("missing", True)
        assert (warned.status, warned.severity, warned.blocking) == ("missing", "warn", False)
        assert blocked.reason == (
            'no judge of this run produces metric "relevance" (the run\'s metrics: '
            '"faithfulness", "toxicity_safety"); fix the name in the policy, or create the run '
            "with that judge (--judge)"
        )


def test_a_metric_of_a_judge_of_the_run_that_scored_nothing_yet_is_skipped_not_missing() -> None:
    policy = {"rules": [{"metric": "relevance", "min_avg": 0.1}]}
    judges = {"jdg_f": "faithfulness", "jdg_r": "relevance"}

    finished = replace(data(), judges=judges)
    running = replace(data(status="running"), judges=judges)
    unnamed = replace(data(), judges={"jdg_f": "faithfulness", "jdg_r": None})

    assert results(policy, finished)["metric:relevance"].reason == (
        'metric "relevance" has no score on this run: its judge scored nothing'
    )
    assert results(policy, running)["metric:relevance"].reason.startswith("not evaluated")
    for run in (finished, running, unnamed):
        rule = results(policy, run)["metric:relevance"]
        assert (rule.status, rule.blocking) == ("skipped", False)


def test_a_percentage_change_from_a_zero_baseline_is_skipped() -> None:
    checked = results(
        {"rules": [{"steps": {"max_delta_pct": 10}}]}, data(baseline=cohort(0.1, 100.0, 0.0))
    )

    assert checked["steps.max_delta_pct"].status == "skipped"
    assert "baseline step count is 0" in checked["steps.max_delta_pct"].reason


def test_nothing_is_checked_before_the_run_is_evaluated() -> None:
    for status in ("awaiting_traces", "running", "failed", "cancelled"):
        checked = results(SPEC_POLICY, data(status=status))
        assert {r.status for r in checked.values()} == {"skipped"}
        assert all(f"the run is {status}" in r.reason for r in checked.values())


MISSING = {
    "gate": {"max_regressions": 0, "cost": {"max_avg_usd": 1, "max_delta_pct": 10}},
    "rules": [
        {"latency": {"max_delta_pct": 25}, "severity": "block"},
        {"cost": {"max_delta_usd": 0.01}, "severity": "warn"},
        {"steps": {"max_avg": 10}},
    ],
}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "warn",
            {
                "latency.max_delta_pct": ("fail", "warn", False),
                "cost.max_delta_usd": ("fail", "warn", False),
                "gate.max_regressions": ("fail", "warn", False),
                "gate.cost.max_delta_pct": ("fail", "warn", False),
            },
        ),
        (
            "block",
            {
                "latency.max_delta_pct": ("fail", "block", True),
                "cost.max_delta_usd": ("fail", "warn", False),  # the rule's own severity
                "gate.max_regressions": ("fail", "block", True),
                "gate.cost.max_delta_pct": ("fail", "block", True),
            },
        ),
        (
            "pass",
            {
                "latency.max_delta_pct": ("skipped", "block", False),
                "cost.max_delta_usd": ("skipped", "warn", False),
                "gate.max_regressions": ("skipped", "block", False),
                "gate.cost.max_delta_pct": ("skipped", "block", False),
            },
        ),
    ],
)
def test_on_missing_baseline_governs_only_the_baseline_relative_rules(
    mode: str, expected: dict[str, tuple[str, str, bool]]
) -> None:
    checked = results({**MISSING, "on_missing_baseline": mode}, data(baseline=None))

    relative = {
        name: (r.status, r.severity, r.blocking)
        for name, r in checked.items()
        if name != "steps.max_avg"
    }
    assert relative == expected
    assert checked["steps.max_avg"].status == "pass"  # absolute rules always evaluate
    assert all(
        f"no baseline cohort to compare against (on_missing_baseline: {mode})" == r.reason
        for name, r in checked.items()
        if name != "steps.max_avg"
    )


def test_with_a_baseline_the_server_gate_keys_are_left_to_the_server() -> None:
    checked = results(MISSING, data(baseline=cohort(0.006, 1200.0, 4.0)))

    assert "gate.max_regressions" not in checked
    assert "gate.cost.max_delta_pct" not in checked


def test_a_rule_result_in_json_names_the_rule_its_numbers_and_its_effect() -> None:
    policy = GatePolicy(
        rules=(flag_rule("--min-avg-score", "min_avg_score", "min_avg_score", 0.9),)
    )

    (result,) = evaluate(policy, data())

    assert result.to_json() == {
        "rule": "min_avg_score",
        "dimension": "min_avg_score",
        "budget": "min_avg_score",
        "observed": pytest.approx(0.7),
        "threshold": 0.9,
        "status": "fail",
        "severity": "block",
        "blocking": True,
        "reason": "avg item score 0.7 is below the minimum 0.9",
        "origin": "--min-avg-score",
    }
