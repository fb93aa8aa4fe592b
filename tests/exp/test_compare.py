"""`neens exp compare` on two real runs, on both databases: the documentation's example output
reproduced, the gate, the margin, --json and the warnings."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar

from neens.domain.exp_compare import Side, TrialOutcome, compare
from neens.exp.compare import render
from tests.exp.conftest import CASES, Project

DOCS = Path(__file__).resolve().parents[2] / "docs" / "exp.md"

EXAMPLE_CASES = [
    {"id": "c_756966685591eb9b", "input": "refund", "expected": "REFUND"},
    {"id": "c_0f4e1a9d2b7c8e35", "input": "status", "expected": "STATUS"},
]


def _two_runs(project: Project, wrong_in_b: str, cases: list[dict[str, str]]) -> tuple[str, str]:
    project.write_dataset(cases, name="smoke")
    command = f"{sys.executable} agent.py"
    project.write_spec(
        "base.json", name="base", dataset="smoke", task={"kind": "command", "command": command}
    )
    project.write_spec(
        "cand.json",
        name="cand",
        dataset="smoke",
        task={"kind": "command", "command": command, "env": {"WRONG": wrong_in_b}},
    )
    a = project.exp_json("run", "base.json")["id"]
    b = project.exp_json("run", "cand.json")["id"]
    return a, b


def test_the_documented_example_is_reproduced(project: Project) -> None:
    a, b = _two_runs(project, "refund", EXAMPLE_CASES)
    result = project.exp("compare", a, b)
    assert result.code == 0
    assert result.out == (
        f"A base {a}  pass 100.0%\n"
        f"B cand {b}  pass 50.0%\n"
        "\n"
        "B − A   -50.0pp [-100.0pp, 0.0pp] (2 paired cases, 95% paired bootstrap)\n"
        "mcnemar p=1.000  1 regressed, 0 improved\n"
        "verdict inconclusive (CI includes 0)\n"
        "\n"
        "regressions 1\n"
        "case                   A   B       Δ\n"
        "------------------  ----  --  ------\n"
        "c_756966685591eb9b  100%  0%  -100pp\n"
        "\n"
        "P(B>A) 25.0% (Beta(1,1) prior on the 1 flipped case; below 100 paired cases)\n"
        "no 80% power at this n (exact McNemar ceiling 0%)\n"
    )
    # The runs ran one after the other: said on stderr, so the report stays as documented.
    assert result.err.startswith("warning: A and B ran one after the other")


def test_the_gate_holds_an_inconclusive_result_and_ships_a_clear_gain(project: Project) -> None:
    a, b = _two_runs(project, "refund", EXAMPLE_CASES)
    held = project.exp("compare", a, b, "--gate")
    assert held.code == 1
    assert held.out.rstrip().endswith("Hold: B is not shown better (CI includes 0)")

    cases = [{"id": f"c{i:02d}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(12)]
    project.write_dataset(cases, name="smoke")
    command = f"{sys.executable} agent.py"
    wrong = ",".join(f"q{i}" for i in range(10))
    project.write_spec(
        "old.json",
        name="old",
        dataset="smoke",
        task={"kind": "command", "command": command, "env": {"WRONG": wrong}},
    )
    old = project.exp_json("run", "old.json")["id"]
    new = project.exp_json("run", "base.json")["id"]
    shipped = project.exp("compare", old, new, "--gate")
    assert shipped.code == 0, shipped.out
    p = binomtest(10, 10, 0.5).pvalue  # 10 cases fixed, none broken
    assert f"verdict better (CI above 0, exact sign test p={p:.3f})" in shipped.out
    assert "borderline" not in shipped.out
    assert shipped.out.rstrip().endswith("Ship it")


def _flips(project: Project, *, n11: int, n10: int, n01: int, n00: int) -> tuple[str, str]:
    """Two runs of n11 + n10 + n01 + n00 cases with these paired cells (n10: A only passes)."""
    cases = [{"id": f"c{i:02d}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(60)]
    total = n11 + n10 + n01 + n00
    project.write_dataset(cases[:total], name="smoke")
    wrong_a = [f"q{i}" for i in range(n11 + n10, total)]
    wrong_b = [f"q{i}" for i in range(n11, n11 + n10)] + [
        f"q{i}" for i in range(n11 + n10 + n01, total)
    ]
    command = f"{sys.executable} agent.py"
    for name, wrong in (("a", wrong_a), ("b", wrong_b)):
        project.write_spec(
            f"{name}.json",
            name=name,
            dataset="smoke",
            task={"kind": "command", "command": command, "env": {"WRONG": ",".join(wrong)}},
        )
    return project.exp_json("run", "a.json")["id"], project.exp_json("run", "b.json")["id"]


def test_two_cases_that_both_flipped_are_not_better_and_the_gate_holds(project: Project) -> None:
    """The interval collapses to [+100pp, +100pp]; exact McNemar (the sign test) has p = 0.5."""
    a, b = _flips(project, n11=0, n10=0, n01=2, n00=0)
    p = binomtest(2, 2, 0.5).pvalue
    assert p == mcnemar([[0, 0], [2, 0]], exact=True).pvalue
    result = project.exp("compare", a, b, "--gate")
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[3] == (
        "B − A   +100.0pp [+100.0pp, +100.0pp] (2 paired cases, 95% paired bootstrap)"
    )
    assert lines[4] == f"mcnemar p={p:.3f}  0 regressed, 2 improved"
    why = f"CI above 0 but exact sign test p={p:.3f} on 2 changed cases"
    assert lines[5] == f"verdict inconclusive ({why})"
    assert lines[6] == (
        "borderline: the interval excludes 0 but the exact sign test does not reject at 5% "
        f"(p={p:.3f} on 2 changed cases)"
    )
    assert lines[-1] == f"Hold: B is not shown better ({why})"
    held = project.exp("compare", a, b, "--gate", "--json")
    assert held.code == 1
    body = held.json()
    assert body["intervalVerdict"] == "better" and body["verdict"] == "inconclusive"
    assert body["borderline"] is True and body["disagreement"] == lines[6].removeprefix(
        "borderline: "
    )
    assert body["signTest"]["p"] == p and body["mcnemar"]["p"] == p
    assert (body["signTest"]["up"], body["signTest"]["down"]) == (2, 0)
    assert body["signTest"]["units"] == "cases" and body["signTest"]["sameAsMcnemar"] is True
    assert body["ship"] is False and body["gate"] == "Hold"


def test_the_stats_methods_vector_is_borderline_as_documented(project: Project) -> None:
    """b = 2, c = 9 of 50 (stats-methods §3): the interval excludes 0, exact McNemar p = 0.065.
    docs/exp.md shows this report under "Borderline"."""
    a, b = _flips(project, n11=20, n10=2, n01=9, n00=19)
    result = project.exp("compare", a, b, "--gate")
    assert result.code == 1
    p = binomtest(9, 11, 0.5).pvalue
    assert abs(p - mcnemar([[20, 2], [9, 19]], exact=True).pvalue) < 1e-12
    assert f"mcnemar p={p:.3f}  2 regressed, 9 improved" in result.out
    docs = DOCS.read_text()
    start = docs.index("**Borderline.**")
    opening = docs.index("```text", start)
    example = docs[opening : docs.index("```\n", opening + 7)].splitlines()[1:]
    assert len(example) == 4
    lines = result.out.splitlines()
    assert lines[3:7] == example
    why = f"CI above 0 but exact sign test p={p:.3f} on 11 changed cases"
    assert lines[-1] == f"Hold: B is not shown better ({why})"
    body = project.exp_json("compare", a, b)
    assert body["interval"]["low"] > 0 and body["borderline"] is True
    assert body["signTest"]["p"] == p


FLAKY = """\
import os, sys
text = sys.stdin.read()
wrong = os.environ.get("WRONG_TRIALS", "").split(",")
print("wrong" if os.environ["NEENS_TRIAL"] in wrong else text.upper())
"""


def test_with_several_trials_the_sign_test_on_b_minus_a_decides(project: Project) -> None:
    """Three trials: A fails every one, B passes two of three on each of 8 cases. No case
    passes every trial on either side (McNemar p = 1); every case went up (sign test)."""
    (project.path / "flaky.py").write_text(FLAKY)
    cases = [{"id": f"c{i}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(8)]
    project.write_dataset(cases, name="smoke")
    command = f"{sys.executable} flaky.py"
    for name, wrong in (("a", "0,1,2"), ("b", "0")):
        project.write_spec(
            f"{name}.json",
            name=name,
            dataset="smoke",
            trials=3,
            task={"kind": "command", "command": command, "env": {"WRONG_TRIALS": wrong}},
        )
    a = project.exp_json("run", "a.json")["id"]
    b = project.exp_json("run", "b.json")["id"]
    result = project.exp("compare", a, b, "--gate")
    assert result.code == 0, result.out
    p = binomtest(8, 8, 0.5).pvalue
    lines = result.out.splitlines()
    assert lines[4] == "mcnemar p=1.000  0 regressed, 0 improved"
    assert lines[5] == (
        f"sign test p={p:.3f}  8 cases up, 0 down, 0 unchanged (exact, on B − A per case)"
    )
    assert lines[6] == f"verdict better (CI above 0, exact sign test p={p:.3f})"
    assert lines[-1] == "Ship it"
    body = project.exp_json("compare", a, b)
    assert body["signTest"]["p"] == p and body["signTest"]["sameAsMcnemar"] is False
    assert body["mcnemar"]["p"] == 1.0 and body["mcnemar"]["n00"] == 8


def test_json_has_every_number_unrounded(project: Project) -> None:
    a, b = _two_runs(project, "refund", EXAMPLE_CASES)
    body = project.exp_json("compare", a, b)
    assert body["diff"] == -0.5
    assert body["interval"] == {"low": -1.0, "high": 0.0, "confidence": 0.95}
    assert body["mcnemar"]["p"] == 1.0 and body["mcnemar"]["n10"] == 1
    assert body["probBBeatsA"] == 0.25
    assert body["verdict"] == "inconclusive" and body["ship"] is False
    assert body["regressions"][0]["case"] == "c_756966685591eb9b"
    assert body["ranOneAfterTheOther"] is True
    assert isinstance(body["seed"], int)
    again = project.exp_json("compare", a, b, "--seed", str(body["seed"]))
    assert again["interval"] == body["interval"]


def test_the_margin_exits_1_unless_the_lower_end_is_above_minus_the_margin(
    project: Project,
) -> None:
    cases = [{"id": f"c{i:02d}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(40)]
    a, b = _two_runs(project, "q3", cases)
    tight = project.exp("compare", a, b, "--margin", "0.01")
    assert tight.code == 1
    assert "not shown non-inferior at -1.0pp" in tight.out
    loose = project.exp("compare", a, b, "--margin", "0.2")
    assert loose.code == 0
    assert "non-inferior at -20.0pp: the lower ends of the score interval (Tango)" in loose.out
    assert "score   B − A [" in loose.out and "1 down, 0 up" in loose.out
    body = project.exp_json("compare", a, b, "--margin", "0.2")
    assert body["marginHeldBy"] == [] and body["marginDecidedBy"] == ["score", "bootstrap"]
    assert body["scoreInterval"]["down"] == 1 and body["scoreInterval"]["n"] == 40
    assert -0.2 < body["scoreInterval"]["low"] < body["interval"]["low"]


def test_the_margin_holds_two_agreeing_cases(project: Project) -> None:
    both_pass = [{"id": f"c{i}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(2)]
    a, b = _two_runs(project, "none", both_pass)
    result = project.exp("compare", a, b, "--gate", "--margin", "0.03")
    assert result.code == 1
    assert "Hold: the score interval for B − A (Tango) reaches -65.8pp at 2 paired cases" in (
        result.out
    )
    held = project.exp("compare", a, b, "--margin", "0.03", "--json")
    assert held.code == 1
    body = json.loads(held.out)
    assert body["interval"]["low"] == 0.0 and body["marginHeldBy"] == ["score"]
    assert body["ship"] is False


def test_b_rerun_on_as_failing_cases_warns_of_regression_to_the_mean(project: Project) -> None:
    cases = [{"id": f"c{i:02d}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(10)]
    project.write_dataset(cases)
    command = f"{sys.executable} agent.py"
    project.write_spec(
        task={"kind": "command", "command": command, "env": {"WRONG": "q1,q2,q3,q4,q5,q6,q7"}}
    )
    a = project.exp_json("run", "spec.json")["id"]
    project.write_spec()
    b = project.exp_json("run", "spec.json", "--failing", a)["id"]
    result = project.exp("compare", a, b, "--gate")
    assert result.code == 1
    assert "verdict inconclusive (regression to the mean: B ran only A's failing cases)" in (
        result.out
    )
    assert "Hold: B ran only A's failing cases (regression to the mean)" in result.out
    assert f"warning: B ran with --failing {a}" in result.err


def test_the_matrix_and_gained_and_lost_cases_with_several_trials(project: Project) -> None:
    cases = [{"id": f"c{i}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(3)]
    a, b = _two_runs(project, "q1", cases)
    result = project.exp("compare", a, b, "--matrix")
    assert "matrix cases by passes out of 1 in A (rows) and 1 in B" in result.out
    assert "A\\B  0  1\n---  -  -\n  0  0  0\n  1  1  2" in result.out


def test_a_grader_changed_between_runs_is_named_and_holds_the_gate(project: Project) -> None:
    a = project.exp_json("run", "spec.json")["id"]
    b = project.exp_json("run", "spec.json", "-g", '{"kind": "contains", "name": "has"}')["id"]
    result = project.exp("compare", a, b, "--gate")
    assert result.code == 1
    assert "warning: grader has graded B only" in result.err
    assert "the graders differ between A and B" in result.out


def test_an_unknown_experiment_is_refused(project: Project) -> None:
    a = project.exp_json("run", "spec.json")["id"]
    result = project.exp("compare", a, "exp_nothing")
    assert result.code == 2
    assert (
        result.err.strip() == "neens: error: B exp_nothing: no such experiment in this store "
        "(`neens exp list`)"
    )
    short = project.exp_json("compare", a[:12], a)
    assert short["a"]["id"] == a


def test_cluster_resamples_groups_and_warns_below_ten(project: Project) -> None:
    cases = [
        {
            "id": f"c{i:02d}",
            "input": {"q": f"q{i}", "repo": f"repo{i % 3}"},
            "expected": "x",
            "group": f"g{i % 4}",
        }
        for i in range(12)
    ]
    project.write_dataset(cases, name="smoke")
    project.write_spec(
        "base.json",
        name="base",
        dataset="smoke",
        task={"kind": "command", "command": f"{sys.executable} agent.py"},
        graders=[{"kind": "regex", "pattern": "REPO0"}],
    )
    a = project.exp_json("run", "base.json")["id"]
    project.write_spec(
        "cand.json",
        name="cand",
        dataset="smoke",
        task={"kind": "command", "command": f"{sys.executable} agent.py"},
        graders=[{"kind": "regex", "pattern": "REPO0"}],
    )
    b = project.exp_json("run", "cand.json")["id"]
    by_group = project.exp("compare", a, b, "--cluster", "group")
    assert "(12 paired cases, 4 groups of group, 95% cluster bootstrap)" in by_group.out
    assert "warning: only 4 groups of group: a cluster bootstrap needs at least 10" in (
        by_group.err
    )
    by_input = project.exp_json("compare", a, b, "--cluster", "repo")
    assert by_input["cluster"] == {"field": "repo", "groups": 3, "ungrouped": 0}
    missing = project.exp_json("compare", a, b, "--cluster", "team")
    assert missing["cluster"] == {"field": "team", "groups": 12, "ungrouped": 12}


def test_case_kinds_report_each_kind_and_what_broke(project: Project) -> None:
    cases = [
        {"id": "bug1", "input": "bug1", "expected": "BUG1", "kind": "bad"},
        {"id": "bug2", "input": "bug2", "expected": "BUG2", "kind": "bad"},
        {"id": "keep1", "input": "keep1", "expected": "KEEP1", "kind": "guard"},
        {"id": "keep2", "input": "keep2", "expected": "KEEP2", "kind": "guard"},
        {"id": "other", "input": "other", "expected": "OTHER", "kind": "control"},
    ]
    project.write_dataset(cases, name="smoke")
    command = f"{sys.executable} agent.py"
    project.write_spec(
        "base.json",
        name="base",
        dataset="smoke",
        task={"kind": "command", "command": command, "env": {"WRONG": "bug1,bug2"}},
    )
    project.write_spec(
        "cand.json",
        name="cand",
        dataset="smoke",
        task={"kind": "command", "command": command, "env": {"WRONG": "bug2,keep2"}},
    )
    a = project.exp_json("run", "base.json")["id"]
    b = project.exp_json("run", "cand.json")["id"]
    out = project.exp("compare", a, b).out
    assert (
        "kind     cases       A       B        Δ\n"
        "-------  -----  ------  ------  -------\n"
        "bad          2    0.0%   50.0%  +50.0pp\n"
        "control      1  100.0%  100.0%    0.0pp\n"
        "guard        2  100.0%   50.0%  -50.0pp\n"
        "bad cases not showing the fix 1: bug2\n"
        "broken guards 1: keep2\n"
        "broken controls 0\n"
    ) in out
    body = project.exp_json("compare", a, b)
    assert body["kinds"]["brokenGuards"] == ["keep2"]


def test_labels_correct_each_llm_judges_difference_with_ppi(project: Project) -> None:
    import json as jsonlib
    from typing import Any

    from neens.demo.endpoints import ChatModel, serve_one
    from neens.domain.paired import ppi_mean

    cases = [{"id": f"c{i:02d}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(16)]
    project.write_dataset(cases, name="smoke")

    def lenient(body: dict[str, Any]) -> str:
        # A judge that is right except that it passes every answer to q1..q3.
        prompt = body["messages"][-1]["content"]
        answer, expected = prompt.split("|")
        generous = expected.strip() in ("Q1", "Q2", "Q3")
        return jsonlib.dumps({"score": 1 if answer.strip() == expected.strip() or generous else 0})

    with serve_one(ChatModel(lenient)) as judge:
        grader = {
            "kind": "llm",
            "name": "judge",
            "base_url": judge.base_url,
            "model": "j",
            "prompt": "{output}|{expected_output}",
        }
        command = f"{sys.executable} agent.py"
        for name, wrong in (("base", "q1,q2,q5,q6,q7"), ("cand", "q1,q5")):
            project.write_spec(
                f"{name}.json",
                name=name,
                dataset="smoke",
                graders=[grader],
                task={"kind": "command", "command": command, "env": {"WRONG": wrong}},
            )
        a = project.exp_json("run", "base.json")["id"]
        b = project.exp_json("run", "cand.json")["id"]
    human_a = {f"c{i:02d}": i not in (1, 2, 5, 6, 7) for i in range(0, 16, 2)}
    human_b = {f"c{i:02d}": i not in (1, 5) for i in range(0, 16, 2)}
    for name, labels in (("a.jsonl", human_a), ("b.jsonl", human_b)):
        (project.path / name).write_text(
            "".join(jsonlib.dumps({"id": c, "passed": p}) + "\n" for c, p in labels.items())
        )
    body = project.exp_json("compare", a, b, "--labels-a", "a.jsonl", "--labels-b", "b.jsonl")
    [correction] = body["judgeCorrections"]
    judge_a = {f"c{i:02d}": float(i not in (5, 6, 7)) for i in range(16)}
    judge_b = {f"c{i:02d}": float(i != 5) for i in range(16)}
    labeled = sorted(human_a)
    unlabeled = [c for c in sorted(judge_a) if c not in human_a]
    expected = ppi_mean(
        [float(human_b[c]) - float(human_a[c]) for c in labeled],
        [judge_b[c] - judge_a[c] for c in labeled],
        [judge_b[c] - judge_a[c] for c in unlabeled],
    )
    assert (correction["labeled"], correction["unlabeled"]) == (8, 8)
    assert correction["judgeDiff"] == sum(judge_b[c] - judge_a[c] for c in judge_a) / 16
    assert correction["corrected"]["estimate"] == expected.estimate
    assert correction["corrected"]["interval"] == {
        "low": expected.interval.low,
        "high": expected.interval.high,
    }
    human = project.exp("compare", a, b, "--labels-a", "a.jsonl", "--labels-b", "b.jsonl")
    assert "PPI++ judge B − A " in human.out and "(8 labeled, 8 judged only; the judge alone" in (
        human.out
    )
    one = project.exp("compare", a, b, "--labels-a", "a.jsonl")
    assert one.code == 2 and "--labels-b: give people's labels of both runs" in one.err
    (project.path / "bad.jsonl").write_text('{"id": "c00", "pass": true}\n')
    bad = project.exp("compare", a, b, "--labels-a", "bad.jsonl", "--labels-b", "b.jsonl")
    assert bad.code == 2 and "--labels-a bad.jsonl line 1: pass: unknown key" in bad.err


def test_pairwise_judges_see_both_answers_in_both_orders(project: Project) -> None:
    import json as jsonlib
    import re
    from typing import Any

    from neens.demo.endpoints import ChatModel, serve

    cases = [{"id": f"c{i}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(6)]
    a, b = _two_runs(project, "", cases)
    project.write_spec(
        "worse.json",
        name="worse",
        dataset="smoke",
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"WRONG": "q0,q1,q2,q3"},
        },
    )
    worse = project.exp_json("run", "worse.json")["id"]

    def fair(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        first, second = re.findall(r"Answer [12]:\n(.*)\n", prompt)
        label = "tie" if first == second else ("second" if first == "wrong" else "first")
        return jsonlib.dumps({"label": label, "reason": "compared"})

    biased = ChatModel(
        '{"label": "first", "reason": "the first one"}', path="/biased/v1/chat/completions"
    )
    judge = ChatModel(fair)
    with serve(judge, biased):
        (project.path / "fair.json").write_text(
            jsonlib.dumps({"name": "fair", "base_url": judge.base_url, "model": "j"})
        )
        (project.path / "biased.json").write_text(
            jsonlib.dumps({"name": "biased", "base_url": biased.base_url, "model": "j"})
        )
        body = project.exp_json(
            "compare", worse, a, "--pairwise", "fair.json", "--pairwise", "biased.json"
        )
        human = project.exp("compare", worse, a, "--pairwise", "fair.json")
    fair_result, biased_result = body["pairwise"]
    assert (fair_result["bWins"], fair_result["aWins"], fair_result["ties"]) == (4, 0, 2)
    assert fair_result["signTestP"] == 0.125
    assert biased_result["orderDependent"] == 6 and biased_result["bWins"] == 0
    assert judge.call_count == 2 * 6 * 2  # both orders, every case, two compares
    assert (
        "pairwise fair: B preferred 4, A 0, tie 2, order-dependent 0 of 6 pairs (both orders)"
        in human.out
    )
    (project.path / "bad.json").write_text('{"model": "j", "url": "http://x"}')
    bad = project.exp("compare", worse, a, "--pairwise", "bad.json")
    assert bad.code == 2 and "--pairwise bad.json: url: unknown key" in bad.err
    del b


def test_runs_on_different_cases_under_the_same_ids_are_refused(project: Project) -> None:
    # The same ids and inputs, but v1's expected answers are all wrong: the agent did not
    # change, so a comparison would credit the data's change to it.
    cases = [{"id": f"c{i}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(10)]
    project.write_dataset([{**c, "expected": "WRONG"} for c in cases], name="v1")
    project.write_dataset(cases, name="v2")
    a = project.exp_json("run", "spec.json", "-d", "v1")["id"]
    b = project.exp_json("run", "spec.json", "-d", "v2")["id"]
    for flags in (["--gate"], ["--json"], ["--margin", "0.05"]):
        result = project.exp("compare", a, b, *flags)
        assert (result.code, result.out) == (2, ""), result
        assert result.err == (
            f"neens: error: A base ({a}, datasets/v1.jsonl) and B base ({b}, "
            "datasets/v2.jsonl) cannot be compared: 10 of the 10 cases both ran differ (case "
            "c0: its expected); compare two runs of the same dataset\n"
        )
    # Another input under the same id is refused alike.
    project.write_dataset([{**c, "input": c["input"] + "?"} for c in cases], name="v3")
    c = project.exp_json("run", "spec.json", "-d", "v3")["id"]
    assert "(case c0: its input)" in project.exp("compare", b, c).err


def test_a_dataset_edited_between_the_runs_is_refused(project: Project) -> None:
    a = project.exp_json("run", "spec.json")["id"]
    # A case added: the cases both ran are alike, but A and B did not run the same dataset.
    project.write_dataset([*CASES, {"id": "omega", "input": "omega", "expected": "OMEGA"}])
    b = project.exp_json("run", "spec.json")["id"]
    result = project.exp("compare", a, b, "--gate")
    assert result.code == 2
    assert result.err == (
        f"neens: error: A base ({a}, datasets/qa.jsonl) and B base ({b}, datasets/qa.jsonl) "
        "cannot be compared: the dataset changed between them; compare two runs of the same "
        "dataset\n"
    )
    # A part of one dataset (--case) against the whole of it is compared as before.
    c = project.exp_json("run", "spec.json", "--case", "alpha", "--case", "omega")["id"]
    assert project.exp_json("compare", b, c)["pairedCases"] == 2


def test_a_case_id_with_control_characters_is_printed_escaped() -> None:
    # Datasets refuse such ids now; a run saved before may still hold one, and its report must
    # not let it move the cursor or start a line of its own.
    forged = "c1\x1b[1A\x1b[2Kverdict better (CI above 0)\nShip it"
    ids = [forged, "c2\u202e", "c3"]
    started = datetime(2026, 1, 1, tzinfo=UTC)

    def side(name: str, passed: list[bool]) -> Side:
        return Side(
            id=f"exp_{name}",
            name=name,
            trials=1,
            outcomes=[TrialOutcome(i, p) for i, p in zip(ids, passed, strict=True)],
            graders={"exact": "1"},
            started_at=started,
            ended_at=started,
            planned=3,
            finished=True,
        )

    result = compare(
        side("a", [True, False, True]),
        side("b", [False, True, True]),
        seed=0,
        kinds=dict.fromkeys(ids, "bad\x1b[31m"),
    )
    report = render(result, gate=True)
    assert "\x1b" not in report and "\u202e" not in report
    assert "c1\\x1b[1A\\x1b[2Kverdict better (CI above 0)\\nShip it  100%  0%  -100pp" in report
    assert "improved 1: c2\\u202e" in report
    assert "bad\\x1b[31m" in report
    assert not any(line.startswith(("Ship it", "verdict better")) for line in report.splitlines())
