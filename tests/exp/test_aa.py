"""`neens exp aa`: one config twice, interleaved; its flip rate floors compare's MDE."""

from __future__ import annotations

import json
import sys

from tests.exp.conftest import Project

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
