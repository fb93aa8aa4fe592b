"""Matrix specs: `exp run matrix.json` runs every cell interleaved, compares each with the
baseline and Holm-adjusts over the cells; --plan, --cell, --reuse, --resume; a cell that
changes anything but /task/… and /trials is refused before anything runs."""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update
from statsmodels.stats.multitest import multipletests

from neens.domain.exp_matrix import holm
from neens.exp.matrix import pointer_tokens, set_pointer
from neens.store.db import Database
from neens.store.models import Experiment, ExperimentMatrix, ExperimentTrial
from neens.store.types import utcnow
from tests.exp.conftest import Project, hold_claims
from tests.support.sqlite_only import sqlite_only

# A seeded stand-in for `node agent.mjs`: the "shout.md" prompt answers in capitals; the big
# model with the plain prompt does so for the cases its seeded coin picks (4 of these 8 at
# SEED 0: bravo, charlie, delta, echo); the small model with the plain prompt never.
STANDIN = """\
import json, os, random, sys, time
text = sys.stdin.read()
time.sleep(float(os.environ.get("SLEEP", "0")))
model, prompt = os.environ["MODEL"], os.environ["PROMPT"]
log = os.environ.get("LOG")
hang_after = int(os.environ.get("HANG_AFTER", "-1"))  # N: calls after the first N logged hang
if log and hang_after >= 0 and os.path.exists(log) and sum(1 for _ in open(log)) >= hang_after:
    time.sleep(60)
if log:
    with open(log, "a") as f:
        f.write(json.dumps({"input": text, "model": model, "prompt": prompt,
                            "trial": os.environ["NEENS_TRIAL"]}) + "\\n")
if prompt == "shout.md":
    print(text.upper())
elif model == "stub-big" and random.Random(os.environ.get("SEED", "0") + ":" + text).random() < 0.5:
    print(text.upper())
else:
    print(text)
"""

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
CELLS = [
    "model=small,prompt=plain",
    "model=small,prompt=shout",
    "model=big,prompt=plain",
    "model=big,prompt=shout",
]


def _matrix(project: Project, **overrides: Any) -> dict[str, Any]:
    """The spec text's matrix.json, with the stand-in agent."""
    spec: dict[str, Any] = {
        "name": "shout-matrix",
        "dataset": "qa",
        "task": {
            "kind": "command",
            "command": f"{sys.executable} -S standin.py",
            "env": {
                "MODEL": "stub-small",
                "PROMPT": "plain.md",
                "LOG": str(project.path / "calls.jsonl"),
            },
        },
        "graders": [{"kind": "regex", "pattern": "^[A-Z]+$"}],
        "matrix": {
            "model": {
                "path": "/task/env/MODEL",
                "values": [{"small": "stub-small"}, {"big": "stub-big"}],
            },
            "prompt": {
                "path": "/task/env/PROMPT",
                "values": [{"plain": "plain.md"}, {"shout": "shout.md"}],
            },
        },
        "baseline": {"model": "small", "prompt": "plain"},
    }
    spec.update(overrides)
    (project.path / "matrix.json").write_text(json.dumps(spec))
    return spec


@pytest.fixture
def shout(project: Project) -> Project:
    (project.path / "standin.py").write_text(STANDIN)
    project.write_dataset([{"id": w, "input": w} for w in WORDS])
    _matrix(project)
    return project


def _calls(project: Project) -> list[dict[str, Any]]:
    log = project.path / "calls.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def _cell_of(call: dict[str, Any]) -> str:
    model = "small" if call["model"] == "stub-small" else "big"
    prompt = "plain" if call["prompt"] == "plain.md" else "shout"
    return f"model={model},prompt={prompt}"


def _table(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("cell "))
    end = lines.index("", start)
    return lines[start:end]


def test_the_spec_texts_matrix_table_is_reproduced_by_a_seeded_stand_in(shout: Project) -> None:
    result = shout.exp("run", "matrix.json", "--concurrency", "1")
    assert result.code == 0, result.err
    table = _table(result.out)
    # The rows of the experiments text's table, character for character. (Its header line sits
    # two columns left of its own p columns; here the header is aligned with the rows.)
    expected = [
        "cell                        pass     B − A      p  p (Holm)  verdict",
        "model=small,prompt=plain    0.0%  baseline",
        "model=small,prompt=shout  100.0%  +100.0pp  0.008     0.023  better",
        "model=big,prompt=plain     50.0%   +50.0pp  0.125     0.125  inconclusive",
        "model=big,prompt=shout    100.0%  +100.0pp  0.008     0.023  better",
    ]
    assert table == expected
    assert "Holm over 3 cells against the baseline" in result.out

    # Interleaved: case by case, every cell ran each case before the next case began.
    calls = _calls(shout)
    assert len(calls) == 32
    for index in range(0, 32, 4):
        group = calls[index : index + 4]
        assert {c["input"] for c in group} == {WORDS[index // 4]}
        assert sorted(_cell_of(c) for c in group) == sorted(CELLS)
    orders = {tuple(_cell_of(c) for c in calls[i : i + 4]) for i in range(0, 32, 4)}
    assert len(orders) > 1, "the cells' order within each case is shuffled"


def test_the_json_report_has_each_cells_experiment_and_unrounded_numbers(shout: Project) -> None:
    body = shout.exp_json("run", "matrix.json")
    assert body["status"] == "finished" and body["family"] == 3
    cells = {c["cell"]: c for c in body["cells"]}
    assert list(cells) == CELLS
    assert cells[CELLS[0]]["baseline"] and cells[CELLS[0]]["passRate"] == 0.0
    shouted = cells[CELLS[1]]
    assert shouted["p"] == pytest.approx(2 / 256, rel=1e-12)
    assert shouted["pHolm"] == pytest.approx(3 * 2 / 256, rel=1e-12)
    assert shouted["verdict"] == "better" and shouted["improved"] == 8
    assert cells[CELLS[2]]["pHolm"] == pytest.approx(0.125, rel=1e-12)
    assert cells[CELLS[2]]["verdict"] == "inconclusive"
    # Each cell is an experiment of its own: exp compare takes it.
    compared = shout.exp_json("compare", cells[CELLS[0]]["experiment"], shouted["experiment"])
    assert compared["mcnemar"]["p"] == pytest.approx(shouted["p"], rel=1e-12)
    assert compared["b"]["name"] == "shout-matrix[model=small,prompt=shout]"


@pytest.mark.parametrize(
    ("path", "pointer"),
    [
        ("/graders/0/pattern", "/graders/0/pattern"),
        ("/dataset", "/dataset"),
        ("/name", "/name"),
        ("/task", "/task"),
        ("/trials/0", "/trials/0"),
    ],
)
@sqlite_only("refused before anything is written")
def test_a_cell_changing_a_forbidden_pointer_is_refused_before_anything_runs(
    shout: Project, path: str, pointer: str
) -> None:
    _matrix(
        shout,
        matrix={
            "model": {"path": "/task/env/MODEL", "values": [{"small": "stub-small"}]},
            "other": {"path": path, "values": [{"x": "y"}]},
        },
        baseline={"model": "small", "other": "x"},
    )
    result = shout.exp("run", "matrix.json")
    assert result.code == 2
    assert result.err.count("\n") == 1
    assert f"matrix.other.path: {pointer}: a cell may change only /task/… and /trials" in result.err
    assert _calls(shout) == []
    assert shout.exp_json("list")["experiments"] == []


@sqlite_only("refused before anything is written")
def test_a_variant_changing_the_graders_is_refused_naming_the_pointer(shout: Project) -> None:
    spec = _matrix(shout)
    del spec["matrix"]
    spec["variants"] = {
        "plain": {},
        "lenient": {"/task/env/PROMPT": "shout.md", "/graders/0/pattern": ".*"},
    }
    spec["baseline"] = "plain"
    (shout.path / "matrix.json").write_text(json.dumps(spec))
    result = shout.exp("run", "matrix.json", "--plan")
    assert result.code == 2
    assert result.err.strip().endswith(
        "variants.lenient: /graders/0/pattern: a cell may change only /task/… and /trials"
    )


@sqlite_only("refused before anything is written")
def test_variants_name_cells_by_hand_and_bad_matrices_are_refused(shout: Project) -> None:
    spec = _matrix(shout)
    del spec["matrix"]
    spec["variants"] = {
        "small-plain": {},
        "big-shout": {"/task/env/MODEL": "stub-big", "/task/env/PROMPT": "shout.md"},
        "three-trials": {"/trials": 3},
    }
    spec["baseline"] = "small-plain"
    (shout.path / "matrix.json").write_text(json.dumps(spec))
    body = shout.exp_json("run", "matrix.json")
    cells = {c["cell"]: c for c in body["cells"]}
    assert cells["big-shout"]["verdict"] == "better"
    assert cells["three-trials"]["planned"] == 24 and cells["three-trials"]["trials"] == 3

    def refused(message: str, **changes: Any) -> None:
        broken = {**spec, **changes}
        (shout.path / "bad.json").write_text(json.dumps(broken))
        result = shout.exp("run", "bad.json")
        assert result.code == 2, result.out
        assert message in result.err, result.err
        assert result.err.count("\n") == 1

    refused("baseline: no cell is named 'nope'", baseline="nope")
    refused("matrix and variants: give one or the other", matrix=_matrix(shout)["matrix"])
    for message, changes in [
        ("cell a: task.env.MODEL: must be a string", {"/task/env/MODEL": 3}),
        (
            "cell a: /task/nothing/here: the spec has no /task/nothing to set it in",
            {"/task/nothing/here": 3},
        ),
        ("cell a: trials: must be a whole number", {"/trials": 0}),
        ("variants.a: 'task/env/MODEL': not a JSON Pointer", {"task/env/MODEL": "x"}),
    ]:
        refused(message, variants={"a": changes}, baseline="a")


def test_plan_prints_the_cells_and_what_each_changes_and_runs_nothing(shout: Project) -> None:
    result = shout.exp("run", "matrix.json", "--plan")
    assert result.code == 0, result.err
    assert "matrix shout-matrix  4 cells, baseline model=small,prompt=plain" in result.out
    line = next(x for x in result.out.splitlines() if x.startswith("model=big,prompt=shout"))
    assert '/task/env/MODEL = "stub-big", /task/env/PROMPT = "shout.md"' in line
    assert "32 case-trials; nothing ran (--plan)" in result.out
    assert _calls(shout) == []
    assert shout.exp_json("list")["experiments"] == []
    body = shout.exp_json("run", "matrix.json", "--plan", "--cell", "model=big,prompt=plain")
    runs = {c["cell"]: c["runs"] for c in body["cells"]}
    assert runs == {CELLS[0]: True, CELLS[1]: False, CELLS[2]: True, CELLS[3]: False}
    assert body["caseTrials"] == 16 and body["ran"] == 0
    assert _calls(shout) == []


def test_cell_runs_only_the_named_cells_and_always_the_baseline(shout: Project) -> None:
    result = shout.exp("run", "matrix.json", "--cell", "model=big,prompt=plain")
    assert result.code == 0, result.err
    assert [line.split()[0] for line in _table(result.out)[1:]] == [CELLS[0], CELLS[2]]
    # One cell alone is a family of one: its p is not adjusted.
    row = _table(result.out)[2]
    assert row.split()[-3:] == ["0.125", "0.125", "inconclusive"]
    assert "note: Holm over the cells run (--cell), not all 3 of the matrix" in result.out
    assert {_cell_of(c) for c in _calls(shout)} == {CELLS[0], CELLS[2]}
    unknown = shout.exp("run", "matrix.json", "--cell", "model=huge,prompt=plain")
    assert unknown.code == 2
    assert "--cell model=huge,prompt=plain: no such cell" in unknown.err
    plain = shout.exp("run", "spec.json", "--cell", "x")
    assert plain.code == 2 and "--cell: only with a matrix spec" in plain.err
    arms = shout.exp("run", "--arm", "a=spec.json", "--arm", "b=spec.json", "--plan")
    assert arms.code == 2 and "--plan: only with a matrix spec (not with --arm)" in arms.err


def _age(database_url: str, days: float) -> None:
    """Make every stored case-trial look `days` old."""

    async def age() -> None:
        db = Database(database_url)
        try:
            async with db.write() as s:
                await s.execute(
                    update(ExperimentTrial).values(started_at=utcnow() - timedelta(days=days))
                )
        finally:
            await db.dispose()

    asyncio.run(age())


def test_reuse_copies_an_identical_cells_results_and_says_so(
    shout: Project, database_url: str
) -> None:
    shout.write_dataset([{"id": w, "input": w} for w in WORDS[:4]])
    two = ("--cell", CELLS[1])
    first = shout.exp_json("run", "matrix.json", *two)
    first_cells = {c["cell"]: c for c in first["cells"]}
    (shout.path / "calls.jsonl").unlink()

    plan = shout.exp_json("run", "matrix.json", "--plan", "--reuse", "baseline")
    assert [c["reusable"] for c in plan["cells"]] == [4, None, None, None]

    result = shout.exp("run", "matrix.json", *two, "--reuse", "baseline")
    assert result.code == 0, result.err
    baseline_id = first_cells[CELLS[0]]["experiment"]
    assert (
        f"reused model=small,prompt=plain: 4 of 4 case-trials copied from {baseline_id}, "
        "not run again" in result.out
    )
    assert "note: copied case-trials ran before the rest" in result.out
    assert _table(result.out)[1:] == [
        "model=small,prompt=plain    0.0%  baseline",
        "model=small,prompt=shout  100.0%  +100.0pp  0.125     0.125  inconclusive",
    ]
    assert [_cell_of(c) for c in _calls(shout)] == [CELLS[1]] * 4

    # --reuse all: nothing left to run.
    (shout.path / "calls.jsonl").unlink()
    every = shout.exp_json("run", "matrix.json", *two, "--reuse", "all")
    assert _calls(shout) == [] and every["ranNow"] == 0
    assert [c["reused"]["trials"] for c in every["cells"]] == [4, 4]

    # Older than --reuse-max-age (default 7d): run again.
    _age(database_url, days=8)
    stale = shout.exp_json("run", "matrix.json", *two, "--reuse", "baseline")
    assert stale["cells"][0]["reused"]["trials"] == 0 and len(_calls(shout)) == 8
    (shout.path / "calls.jsonl").unlink()
    _age(database_url, days=8)
    recent_enough = shout.exp_json(
        "run", "matrix.json", *two, "--reuse", "baseline", "--reuse-max-age", "30d"
    )
    assert recent_enough["cells"][0]["reused"]["trials"] == 4 and len(_calls(shout)) == 4

    # Not the identical config (the agent script changed): nothing to copy.
    (shout.path / "calls.jsonl").unlink()
    (shout.path / "standin.py").write_text(STANDIN + "\n# edited\n")
    changed = shout.exp_json("run", "matrix.json", *two, "--reuse", "all")
    assert [c["reused"]["trials"] for c in changed["cells"]] == [0, 0]
    assert len(_calls(shout)) == 8

    bad = shout.exp("run", "matrix.json", "--reuse", "all", "--reuse-max-age", "7 days")
    assert bad.code == 2 and "--reuse-max-age 7 days: range must look like" in bad.err
    alone = shout.exp("run", "matrix.json", "--reuse-max-age", "7d")
    assert alone.code == 2 and "--reuse-max-age: only with --reuse" in alone.err


def _cell_runs(database_url: str, matrix_id: str) -> list[str]:
    """The experiment ids of the matrix's cells, in cell order."""
    from sqlalchemy import select

    from neens.store.models import ExperimentMatrixCell

    async def read() -> list[str]:
        db = Database(database_url)
        try:
            async with db.read() as s:
                return list(
                    await s.scalars(
                        select(ExperimentMatrixCell.experiment_id)
                        .where(ExperimentMatrixCell.matrix_id == matrix_id)
                        .order_by(ExperimentMatrixCell.position)
                    )
                )
        finally:
            await db.dispose()

    return asyncio.run(read())


def _interrupt(database_url: str, matrix_id: str, keep: int) -> int:
    """Leave only the first `keep` saved case-trials of the matrix, unfinished, as a crash
    would; how many were removed."""
    from sqlalchemy import delete, select

    from neens.store.models import ExperimentMatrixCell

    async def cut() -> int:
        db = Database(database_url)
        try:
            async with db.write() as s:
                ids = list(
                    await s.scalars(
                        select(ExperimentMatrixCell.experiment_id).where(
                            ExperimentMatrixCell.matrix_id == matrix_id
                        )
                    )
                )
                pks = list(
                    await s.scalars(
                        select(ExperimentTrial.pk)
                        .where(ExperimentTrial.experiment_id.in_(ids))
                        .order_by(ExperimentTrial.finished_at, ExperimentTrial.pk)
                    )
                )
                await s.execute(delete(ExperimentTrial).where(ExperimentTrial.pk.in_(pks[keep:])))
                await s.execute(
                    update(Experiment).where(Experiment.id.in_(ids)).values(finished_at=None)
                )
                await s.execute(
                    update(ExperimentMatrix)
                    .where(ExperimentMatrix.id == matrix_id)
                    .values(finished_at=None)
                )
                return len(pks) - keep
        finally:
            await db.dispose()

    return asyncio.run(cut())


def test_an_interrupted_matrix_resumes_only_what_is_left_to_the_same_table(
    shout: Project, database_url: str
) -> None:
    shout.write_dataset([{"id": w, "input": w} for w in WORDS[:4]])
    whole = shout.exp("run", "matrix.json")
    assert whole.code == 0
    matrix_id = whole.out.split()[1]
    assert matrix_id.startswith("mx_")
    removed = _interrupt(database_url, matrix_id, keep=7)
    assert removed == 9
    (shout.path / "calls.jsonl").unlink()

    # What changed since is named, and nothing runs.
    (shout.path / "standin.py").write_text(STANDIN + "\n# edited\n")
    refused = shout.exp("run", "matrix.json", "--resume")
    assert refused.code == 2
    assert f"cannot resume {matrix_id}: model=small,prompt=plain: the agent script" in refused.err
    assert _calls(shout) == []
    (shout.path / "standin.py").write_text(STANDIN)
    narrowed = shout.exp("run", "matrix.json", "--resume", "--cell", CELLS[2])
    assert narrowed.code == 2
    assert "the chosen cells changed (--cell; it ran every cell)" in narrowed.err
    with_reuse = shout.exp("run", "matrix.json", "--resume", "--reuse", "all")
    assert with_reuse.code == 2 and "--reuse: not with --resume" in with_reuse.err
    assert _calls(shout) == []

    # Another process resuming the matrix holds one cell's run: refused, naming it.
    held = _cell_runs(database_url, matrix_id)[1]
    hold_claims(database_url, [held], held=True)
    busy = shout.exp("run", "matrix.json", "--resume")
    assert busy.code == 2 and busy.out == ""
    assert busy.err.startswith(
        f"neens: error: cannot resume {held}: it is being run by another neens process "
        "(pid 1 on another-host, its claim renewed until "
    )
    assert _calls(shout) == []
    hold_claims(database_url, [held], held=False)

    resumed = shout.exp("run", "matrix.json", "--resume")
    assert resumed.code == 0, resumed.err
    assert resumed.out.split()[1] == matrix_id
    assert _table(resumed.out) == _table(whole.out)
    assert "resumed: ran 9 case-trials left" in resumed.out
    assert len(_calls(shout)) == 9
    again = shout.exp("run", "matrix.json", "--resume", matrix_id)
    assert again.code == 0 and "resumed: ran 0 case-trials left" in again.out
    nothing = shout.exp("run", "matrix.json", "--resume")
    assert nothing.code == 2
    assert "--resume: no unfinished matrix named 'shout-matrix'" in nothing.err


def test_holm_matches_statsmodels_and_the_step_down_formula(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def step_down(p: list[float]) -> list[float]:
        """Holm (1979): p_adj(i) = max over j <= i of min(1, (m - j + 1) p(j)), sorted order."""
        m = len(p)
        order = sorted(range(m), key=lambda i: p[i])
        adjusted = [0.0] * m
        running = 0.0
        for rank, index in enumerate(order):
            running = max(running, min(1.0, (m - rank) * p[index]))
            adjusted[index] = running
        return adjusted

    rng = random.Random(15)
    # statsmodels' Holm ends with a full garbage collection (`gc.collect()`), which in a test
    # process holding the whole suite's objects took 0.3 s a call; it changes no result.
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    for _ in range(50):
        m = rng.randint(1, 12)
        p = [rng.choice([rng.random(), rng.random() / 50, 2 / 256, 0.125, 1.0]) for _ in range(m)]
        ours = holm(p)
        assert ours == pytest.approx(list(multipletests(p, method="holm")[1]), rel=1e-12)
        assert ours == pytest.approx(step_down(p), rel=1e-12)
    assert holm([0.04, 0.04]) == pytest.approx([0.08, 0.08])
    assert holm([2 / 256, 0.125, 2 / 256]) == pytest.approx([6 / 256, 0.125, 6 / 256])
    assert holm([]) == []
    with pytest.raises(ValueError):
        holm([0.01, math.nan])


def test_ctrl_c_keeps_a_matrixs_finished_case_trials_and_resume_runs_the_rest(
    shout: Project, database_url: str
) -> None:
    shout.write_dataset([{"id": w, "input": w} for w in WORDS[:4]])
    spec = _matrix(shout)
    spec["task"]["env"]["SLEEP"] = "0.3"
    (shout.path / "matrix.json").write_text(json.dumps(spec))
    # Calls after the third hang (set for the agent only), so Ctrl-C lands mid-matrix however
    # slow the machine; the resume below runs without it.
    env = {**os.environ, "NEENS_DATABASE_URL": database_url, "HANG_AFTER": "3"}
    process = subprocess.Popen(
        [sys.executable, "-m", "neens_eval", "exp", "run", "matrix.json", "--concurrency", "2"],
        cwd=shout.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_calls(shout)) < 3:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    matrix_id = err.split("the matrix ")[1].split()[0]
    assert err.strip().endswith(
        f"neens: interrupted: the matrix {matrix_id} keeps every finished case-trial; run the "
        f"same command with --resume {matrix_id} to run only what is left"
    )
    saved = sum(c["done"] for c in shout.exp_json("list")["experiments"])
    assert 1 <= saved < 16
    resumed = shout.exp_json("run", "matrix.json", "--resume", matrix_id[:12])
    assert resumed["matrix"] == matrix_id and resumed["status"] == "finished"
    assert resumed["ranNow"] == 16 - saved
    # 4 of 4, 3 of 4 and 4 of 4 cases flipped: p = 0.125, 0.25, 0.125; Holm 0.375 for each.
    assert [c["p"] for c in resumed["cells"][1:]] == pytest.approx([0.125, 0.25, 0.125])
    assert [c["pHolm"] for c in resumed["cells"][1:]] == pytest.approx([0.375] * 3)


@pytest.mark.parametrize(
    ("pointer", "tokens"),
    [
        ("/task/env/MODEL", ["task", "env", "MODEL"]),
        ("/task/env/A~1B", ["task", "env", "A/B"]),
        ("/task/env/A~0B~01", ["task", "env", "A~B~1"]),
        ("/trials", ["trials"]),
    ],
)
def test_json_pointers_are_read_as_rfc_6901_says(pointer: str, tokens: list[str]) -> None:
    assert pointer_tokens(pointer, "m.json", "path") == tokens
    doc: dict[str, Any] = {"task": {"env": {}}, "trials": 1}
    set_pointer(doc, tokens, 7, pointer, "m.json")
    target: Any = doc
    for token in tokens:
        target = target[token]
    assert target == 7
