"""`neens exp aa`: one config twice, interleaved; its flip rate floors compare's MDE."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.exp.conftest import Project, saved_trials
from tests.support.sqlite_only import sqlite_only

NOISY = """\
import json, os, pathlib, sys
text = sys.stdin.read()
seen = [os.environ["NEENS_EXPERIMENT_ID"], text, os.environ["NEENS_TRIAL"]]
with open(os.environ["LOG"], "a") as f:
    f.write(json.dumps(seen) + "\\n")
# The same config both times, yet a flaky case passes when first asked and fails when asked
# again: the second run of each pair flips exactly the flaky cases.
marker = pathlib.Path(os.environ["LOG"] + "." + text + "." + os.environ["NEENS_TRIAL"])
flaky = text in set(os.environ.get("FLAKY", "").split(","))
if flaky and marker.exists():
    print("no")
else:
    marker.touch()
    print(text.upper())
"""

CASES = [{"id": f"c{i:02d}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(60)]


def test_aa_runs_one_config_twice_interleaved_and_reports_its_flip_rate(
    project: Project,
) -> None:
    log = project.path / "calls.jsonl"
    (project.path / "noisy.py").write_text(NOISY)
    project.write_dataset(CASES[:12])
    project.write_spec(
        task={
            "kind": "command",
            "command": f"{sys.executable} noisy.py",
            "env": {"LOG": str(log), "FLAKY": "q1,q5,q7"},
        }
    )
    body = project.exp_json("aa", "spec.json", "--concurrency", "1")
    first, second = body["ids"]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    # In pairs: the same case in both runs, one after the other.
    assert len(calls) == 24
    for pair in zip(calls[::2], calls[1::2], strict=True):
        assert {pair[0][0], pair[1][0]} == {first, second}
        assert pair[0][1:] == pair[1][1:]
    compared = project.exp_json("compare", first, second)
    flipped = compared["mcnemar"]["n10"] + compared["mcnemar"]["n01"]
    assert body["flipped"] == flipped == 3 and body["pairedCases"] == 12
    assert body["flipRate"] == 0.25
    human = project.exp("aa", "spec.json", "--concurrency", "1")
    assert human.code == 0
    assert human.out.splitlines()[0].endswith("base  flip rate 0.0% (0 of 12 paired cases)")
    listed = {e["id"]: e for e in project.exp_json("list")["experiments"]}
    assert listed[first]["kind"] == "aa" and listed[first]["status"] == "finished"


@sqlite_only(
    "the subject is a statistic; this module's other tests store A/A runs on both databases"
)
def test_compare_never_reports_an_mde_below_the_aa_flip_rate(project: Project) -> None:
    (project.path / "noisy.py").write_text(NOISY)
    project.write_dataset(CASES)
    log = str(project.path / "calls.jsonl")
    flaky = ",".join(f"q{i}" for i in range(40))
    project.write_spec(
        "noisy.json",
        task={
            "kind": "command",
            "command": f"{sys.executable} noisy.py",
            "env": {"LOG": log, "FLAKY": flaky},
        },
    )
    command = f"{sys.executable} agent.py"
    project.write_spec(
        "old.json",
        name="old",
        task={
            "kind": "command",
            "command": command,
            "env": {"WRONG": ",".join(f"q{i}" for i in range(30))},
        },
    )
    project.write_spec("new.json", name="new")
    a = project.exp_json("run", "old.json")["id"]
    b = project.exp_json("run", "new.json")["id"]
    before = project.exp_json("compare", a, b)
    assert before["aa"] is None
    assert before["power"]["mde"] == before["power"]["mdeBeforeAaFloor"]
    aa = project.exp_json("aa", "noisy.json", "--concurrency", "1")
    assert aa["flipRate"] == 40 / 60
    after = project.exp_json("compare", a, b)
    assert after["aa"]["flipRate"] == aa["flipRate"] and after["aa"]["ids"] == sorted(aa["ids"])
    raw = after["power"]["mdeBeforeAaFloor"]
    assert raw == before["power"]["mde"]
    assert after["power"]["mde"] == max(raw, aa["flipRate"])
    assert aa["flipRate"] > raw  # noisy enough for the floor to show
    human = project.exp("compare", a, b)
    assert f"A/A flip rate {aa['flipRate'] * 100:.1f}% (" in human.out
    assert f"exact MDE {aa['flipRate'] * 100:.1f}pp" in human.out


MANY = [{"id": f"c{i:02d}", "input": f"case {i}", "expected": f"CASE {i}"} for i in range(12)]


def _saved(database_url: str, experiment_id: str) -> set[tuple[str, int]]:
    return {(t.case_id, t.trial) for t in saved_trials(database_url, experiment_id, grades=False)}


def test_an_aa_pair_killed_with_sigkill_resumes_exactly_the_missing_case_trials(
    project: Project, database_url: str
) -> None:
    log = project.path / "calls.jsonl"
    project.write_dataset(MANY)
    project.write_spec(
        task={
            "kind": "command",
            "command": f"{sys.executable} agent.py",
            "env": {"SLEEP": "0.15", "WRONG": "case 3,case 7", "LOG": str(log)},
        }
    )
    # Calls after the eighth hang (set for the agent only, so the resume runs the same spec
    # without it): the kill lands mid-pair however slow the machine.
    env = {**os.environ, "NEENS_DATABASE_URL": database_url, "HANG_AFTER": "8"}
    command = [sys.executable, "-m", "neens_eval", "exp", "aa", "spec.json", "--trials", "2"]
    command += ["--concurrency", "2", "--seed", "7"]
    process = subprocess.Popen(
        command,
        cwd=project.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    ids: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            listed = [e for e in project.exp_json("list")["experiments"] if e["kind"] == "aa"]
            if len(listed) == 2 and sum(e["done"] for e in listed) >= 8:
                ids = sorted(e["id"] for e in listed)
                break
            time.sleep(0.05)
        assert ids, "the A/A pair saved nothing in time"
        os.killpg(process.pid, signal.SIGKILL)  # the pair and its hanging agents, as kill -9
    finally:
        process.wait(timeout=30)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    time.sleep(1.0)  # agent commands in flight at the kill finish on their own
    every = {(f"c{i:02d}", trial) for i in range(12) for trial in (0, 1)}
    missing = {experiment_id: every - _saved(database_url, experiment_id) for experiment_id in ids}
    assert 0 < sum(len(m) for m in missing.values()) < 48 - 8 + 1
    listed = {e["id"]: e for e in project.exp_json("list")["experiments"]}
    assert all(listed[i]["status"] == "partial" for i in ids)
    calls_before = len(log.read_text().splitlines())

    resumed = project.exp_json("aa", "spec.json", "--trials", "2", "--resume", ids[1])
    assert resumed["ids"] == ids and resumed["resumed"] is True and resumed["seed"] == 7
    calls = [json.loads(line) for line in log.read_text().splitlines()[calls_before:]]
    ran = [(c["exp"], c["id"], int(c["trial"])) for c in calls]
    assert len(ran) == len(set(ran)) == resumed["ranNow"]
    assert set(ran) == {(e, case, trial) for e, left in missing.items() for case, trial in left}
    listed = {e["id"]: e for e in project.exp_json("list")["experiments"]}
    assert all(listed[i]["status"] == "finished" and listed[i]["done"] == 24 for i in ids)

    clean = project.exp_json("aa", "spec.json", "--trials", "2", "--seed", "7")
    assert clean["ranNow"] == 48 and clean["resumed"] is False
    for key in ("name", "seed", "pairedCases", "flipped", "flipRate", "passRates", "errors"):
        assert resumed[key] == clean[key], key
    assert resumed["passRates"] == [20 / 24, 20 / 24]
    for mine, theirs in zip(ids, clean["ids"], strict=True):
        assert _outcomes(database_url, mine) == _outcomes(database_url, theirs)
    again = project.exp_json("aa", "spec.json", "--trials", "2", "--resume", ids[0])
    assert again["ranNow"] == 0 and again["flipRate"] == clean["flipRate"]


def test_an_aa_resume_refuses_a_changed_config_or_seed_and_names_it(project: Project) -> None:
    body = project.exp_json("aa", "spec.json", "--seed", "3")
    first = body["ids"][0]
    (project.path / "agent.py").write_text("print('changed')\n")
    result = project.exp("aa", "spec.json", "--resume", first, "--seed", "4")
    assert result.code == 2
    assert result.err.startswith(f"neens: error: cannot resume {first}: ")
    assert "the agent script agent.py changed" in result.err
    assert "--seed changed (3 → 4)" in result.err
    run = project.exp_json("run", "spec.json")["id"]
    refused = project.exp("aa", "spec.json", "--resume", run)
    assert refused.code == 2 and "it is not an A/A run (it is a run)" in refused.err
    none_left = project.exp("aa", "spec.json", "--resume")
    assert none_left.code == 2
    assert "--resume: no unfinished A/A pair named 'base' in this store" in none_left.err
    lonely = project.exp("aa", "spec.json", "--retry-errors")
    assert lonely.code == 2 and "--retry-errors: only with --resume" in lonely.err


def _outcomes(database_url: str, experiment_id: str) -> list[tuple[str, int, bool | None]]:
    return [
        (t.case_id, t.trial, t.passed)
        for t in saved_trials(database_url, experiment_id, grades=False)
    ]
