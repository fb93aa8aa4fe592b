"""`neens exp session`: in a folder with a session, each run prints its delta against the
session's previous run on the same dataset, naming the files that changed; notes and the
summary's timeline."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
from scipy.stats import binomtest, bootstrap

from tests.exp.conftest import Project
from tests.support.sqlite_only import sqlite_only

SHOUTER = """\
import os, sys
text = sys.stdin.read()
prompt = open(os.environ["PROMPT"]).read().strip()
print(text.upper() if prompt == "shout" else text)
"""


def _shout_project(project: Project) -> None:
    (project.path / "agent.py").write_text(SHOUTER)
    (project.path / "prompt.md").write_text("plain\n")
    project.write_spec(
        name="shout",
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"PROMPT": "prompt.md"},
        },
        graders=[{"kind": "regex", "name": "caps", "pattern": "^[A-Z]+$"}],
    )


def test_each_run_in_a_session_prints_its_delta_against_the_previous_one(
    project: Project,
) -> None:
    _shout_project(project)
    started = project.exp("session", "new", "--name", "shout")
    assert started.code == 0, started.err
    assert started.out.startswith("session shout exs_")
    first = project.exp("run", "spec.json")
    assert first.code == 0, first.err
    first_id = first.out.split()[1]
    assert first.out.splitlines()[-1] == (
        "session shout: the first run on datasets/qa.jsonl in this session; the next one is "
        "compared with it"
    )
    (project.path / "prompt.md").write_text("shout\n")
    second = project.exp("run", "spec.json")
    assert second.code == 0, second.err
    lines = second.out.splitlines()
    at = lines.index(f"session shout: vs {first_id}")
    # The spec's sample, line by line.
    assert lines[at + 1 :] == [
        "  changed prompt.md",
        "  pass 0.0% → 100.0%",
        "  Δ +100.0pp [+100.0pp, +100.0pp] mcnemar p=0.125 (4 paired cases, 95% CI)",
        "  grader caps score Δ +100.0pp [+100.0pp, +100.0pp]",
        "  fixed 4: alpha, beta, delta, gamma",
        "  broke —",
    ]
    # 4 cases fixed, none broken: exact McNemar is the two-sided binomial test on 4 of 4.
    assert binomtest(0, 4, 0.5).pvalue == 0.125
    # The same comparison as exp compare.
    second_id = second.out.split()[1]
    compared = project.exp_json("compare", first_id, second_id)
    (project.path / "agent.py").write_text(SHOUTER + "# tidied\n")
    third = project.exp_json("run", "spec.json")
    assert third["session"]["previousId"] == second_id
    assert third["session"]["changed"] == ["agent.py"]
    delta = third["session"]["delta"]
    assert delta["diff"] == 0.0 and delta["fixed"] == [] and delta["broke"] == []
    again = project.exp_json("compare", second_id, third["id"])
    assert again["diff"] == delta["diff"] and again["mcnemar"]["p"] == delta["mcnemarP"]
    assert again["seed"] == delta["seed"]
    assert compared["interval"] == {"low": 1.0, "high": 1.0, "confidence": 0.95}


def test_the_delta_is_the_compare_statistics_and_each_graders_mean_score(
    project: Project,
) -> None:
    cases = [{"id": f"c{i:02d}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(30)]
    project.write_dataset(cases)
    # The length grader scores each answer by its length and passes every one of them: the
    # exact grader decides.
    (project.path / "score.py").write_text(
        "import json, sys\n"
        "case = json.load(sys.stdin)\n"
        "print(json.dumps({'score': min(len(case['output']) / 10, 1.0)}))\n"
    )
    graders = [
        {"kind": "exact"},
        {
            "kind": "command",
            "name": "length",
            "command": f"{sys.executable} score.py",
            "threshold": 0.1,
        },
    ]
    wrong_a = ",".join(f"q{i}" for i in range(0, 12))
    wrong_b = ",".join(f"q{i}" for i in range(8, 14))
    project.write_spec(
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"WRONG": wrong_a},
        },
        graders=graders,
    )
    assert project.exp("session", "new", "--name", "fix wrong answers").code == 0
    a = project.exp_json("run", "spec.json")
    assert a["session"]["previousId"] is None and a["session"]["delta"] is None
    project.write_spec(
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"WRONG": wrong_b},
        },
        graders=graders,
    )
    b = project.exp_json("run", "spec.json")
    session = b["session"]
    assert session["previousId"] == a["id"] and session["changed"] == ["spec.json"]
    delta = session["delta"]
    compared = project.exp_json("compare", a["id"], b["id"])
    assert delta["diff"] == compared["diff"]
    assert delta["interval"] == {
        "low": compared["interval"]["low"],
        "high": compared["interval"]["high"],
    }
    assert delta["mcnemarP"] == compared["mcnemar"]["p"]
    assert delta["pairedCases"] == 30 and delta["verdict"] == compared["verdict"]
    assert delta["fixed"] == [f"c{i:02d}" for i in range(0, 8)]
    assert delta["broke"] == ["c12", "c13"]
    # 8 fixed, 2 broken: exact McNemar is the two-sided binomial test on 2 of 10.
    assert abs(delta["mcnemarP"] - binomtest(2, 10, 0.5).pvalue) < 1e-12

    def score(text: str) -> float:
        return min(len(text) / 10, 1.0)

    def answer(i: int, wrong: set[int]) -> str:
        return "wrong" if i in wrong else f"Q{i}"

    set_a, set_b = set(range(0, 12)), set(range(8, 14))
    diffs = [score(answer(i, set_b)) - score(answer(i, set_a)) for i in range(30)]
    length = next(g for g in delta["graders"] if g["name"] == "length")
    assert length["cases"] == 30
    assert abs(length["scoreDiff"] - sum(diffs) / 30) < 1e-12
    oracle = bootstrap(
        (np.array(diffs),),
        np.mean,
        n_resamples=10_000,
        method="percentile",
        random_state=np.random.default_rng(1),
    ).confidence_interval
    assert abs(length["interval"]["low"] - oracle.low) < 0.01
    assert abs(length["interval"]["high"] - oracle.high) < 0.01
    human = project.exp("run", "spec.json")
    assert "  grader length score Δ 0.0pp [0.0pp, 0.0pp]" in human.out.splitlines()
    assert "  changed —" in human.out.splitlines()


def test_the_previous_run_is_the_one_on_the_same_dataset(project: Project) -> None:
    project.write_dataset([{"id": "x", "input": "x", "expected": "X"}], name="other")
    project.exp("session", "new", "--name", "two datasets")
    first = project.exp_json("run", "spec.json")
    other = project.exp_json("run", "spec.json", "-d", "other")
    assert other["session"]["previousId"] is None
    third = project.exp_json("run", "spec.json")
    assert third["session"]["previousId"] == first["id"]
    # A run in another folder joins no session.
    elsewhere = project.path / "elsewhere"
    (elsewhere / "datasets").mkdir(parents=True)
    for name in ("agent.py", "spec.json", "datasets/qa.jsonl"):
        (elsewhere / name).write_text((project.path / name).read_text())
    os.chdir(elsewhere)
    try:
        outside = project.exp_json("run", "spec.json")
        assert outside["session"] is None
        lonely = project.exp("session", "summary")
        assert lonely.code == 2
        assert lonely.err.strip() == (
            f"neens: error: exp session summary: no session in {elsewhere.resolve()}; start one "
            "with `neens exp session new --name TOPIC`"
        )
    finally:
        os.chdir(project.path)


def test_notes_and_the_summary_timeline(project: Project) -> None:
    project.exp("session", "new", "--name", "old topic")
    started = project.exp_json("session", "new", "--name", "shout")
    assert started["name"] == "shout" and started["replaced"] is not None
    assert started["folder"] == str(Path.cwd().resolve())
    first = project.exp_json("run", "spec.json")
    noted = project.exp("session", "note", "hypothesis: beta fails because of the prompt")
    assert noted.code == 0 and noted.out.startswith("noted in session shout at ")
    project.write_spec(
        task={"kind": "command", "command": f"{sys.executable} agent.py", "env": {"WRONG": "beta"}}
    )
    second = project.exp_json("run", "spec.json")
    project.exp_json("session", "note", "reading: beta broke, as expected")
    body = project.exp_json("session", "summary")
    assert body["id"] == started["id"] and body["runs"] == 2 and body["notes"] == 2
    kinds = [(item["kind"], item.get("id") or item.get("text")) for item in body["timeline"]]
    assert kinds == [
        ("run", first["id"]),
        ("note", "hypothesis: beta fails because of the prompt"),
        ("run", second["id"]),
        ("note", "reading: beta broke, as expected"),
    ]
    runs = [item for item in body["timeline"] if item["kind"] == "run"]
    assert [r["passRate"] for r in runs] == [1.0, 0.75]
    assert runs[1]["session"]["delta"]["broke"] == ["beta"]
    assert runs[1]["session"]["changed"] == ["spec.json"]
    assert set(runs[0]["files"]) == {"spec.json", "agent.py", "datasets/qa.jsonl"}
    human = project.exp("session", "summary")
    lines = human.out.splitlines()
    assert lines[0].startswith(f"session shout {started['id']}  started ")
    assert lines[0].endswith("2 runs, 2 notes")
    assert lines[1].endswith(
        f"run      {first['id']} base  pass 100.0% (4/4)  first on datasets/qa.jsonl"
    )
    assert lines[2].endswith("note     hypothesis: beta fails because of the prompt")
    assert lines[3].endswith(
        f"run      {second['id']} base  pass 75.0% (3/4)  Δ -25.0pp [-75.0pp, 0.0pp] vs "
        f"{first['id']}  changed spec.json"
    )


def test_a_resumed_run_keeps_its_place_in_the_session(project: Project, database_url: str) -> None:
    from tests.exp.test_resume import _interrupt

    project.exp("session", "new", "--name", "resume")
    first = project.exp_json("run", "spec.json")
    _interrupt(database_url, first["id"], keep=2)
    resumed = project.exp_json("run", "spec.json", "--resume")
    assert resumed["id"] == first["id"] and resumed["session"]["previousId"] is None
    body = project.exp_json("session", "summary")
    assert [item["id"] for item in body["timeline"]] == [first["id"]]


@sqlite_only("refused before anything is written")
def test_bad_session_input_is_one_line_naming_it(project: Project) -> None:
    note = project.exp("session", "note", "no session yet")
    assert note.code == 2 and "exp session note: no session in " in note.err
    empty = project.exp("session", "new", "--name", "  ")
    assert empty.code == 2 and empty.err.strip() == "neens: error: --name: must not be empty"
    project.exp("session", "new", "--name", "x")
    blank = project.exp("session", "note", " ")
    assert blank.code == 2 and blank.err.strip() == "neens: error: note: the text is empty"
    assert json.loads(project.exp("session", "summary", "--json").out)["timeline"] == []
