"""Inspect AI logs written by inspect_ai 0.3.285 itself (fixtures/README.md): `.eval` with
Zstandard members, the chunked sample layout, and `.json`."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from neens.imports.errors import ImportFormatError
from neens.imports.inspect import ZIP_ZSTANDARD, read_eval_archive, read_inspect, score_value
from tests.imports.conftest import FIXTURES

# What the fixture's mockllm answered (make_inspect.py): epoch 1 then epoch 2.
EXPECTED = {
    ("q1", 0): (True, "4"),
    ("q2", 0): (True, "8"),
    ("q3", 0): (False, "I think 2"),
    ("q4", 0): (True, "42"),
    ("q1", 1): (True, "4"),
    ("q2", 1): (False, "9"),
    ("q3", 1): (True, "3"),
    ("q4", 1): (True, "42"),
}


@pytest.mark.parametrize(
    "name", ["inspect_arith.eval", "inspect_arith_chunked.eval", "inspect_arith.json"]
)
def test_every_layout_reads_the_same_case_trials(name: str) -> None:
    run = read_inspect(FIXTURES / name)
    assert run.tool == "inspect_ai" and run.tool_version == "0.3.285"
    assert (run.task, run.model, run.repeats) == ("arith", "mockllm/model", 2)
    found = {(t.case_key, t.trial_idx): (t.passed, t.output) for t in run.trials}
    assert found == EXPECTED
    trial = next(t for t in run.trials if (t.case_key, t.trial_idx) == ("q3", 0))
    assert trial.case_key_kind == "sample_id"
    assert [(s.scorer, s.raw, s.score) for s in trial.scores] == [("includes", "I", 0.0)]
    assert trial.input_tokens == 12 and trial.output_tokens == 3
    assert trial.latency_ms is not None and trial.latency_ms > 0


def test_eval_members_are_zstandard_and_read_without_inspect() -> None:
    path = FIXTURES / "inspect_arith.eval"
    with zipfile.ZipFile(path) as archive:
        assert {i.compress_type for i in archive.infolist()} == {ZIP_ZSTANDARD}
        with pytest.raises(NotImplementedError):
            archive.read("header.json")  # what a plain zipfile reader hits
    header, samples = read_eval_archive(path)
    assert header["status"] == "success" and len(samples) == 8


def test_no_cost_recorded_is_unknown_with_a_reason_not_zero() -> None:
    run = read_inspect(FIXTURES / "inspect_arith.eval")
    assert all(t.cost_usd is None for t in run.trials)
    assert "total_cost" in run.unknown["cost_usd"]


def test_an_errored_sample_is_an_error_without_scores() -> None:
    run = read_inspect(FIXTURES / "inspect_arith_errors.json")
    errored = [t for t in run.trials if t.error is not None]
    assert [(t.case_key, t.trial_idx) for t in errored] == [("q4", 1)]
    assert errored[0].error_kind == "harness" and errored[0].passed is None
    assert "custom_outputs ran out of values" in (errored[0].error or "")
    assert errored[0].scores == () and errored[0].output is None


def _log(tmp_path: Path, **changes: object) -> Path:
    body = json.loads((FIXTURES / "inspect_arith.json").read_text())
    body.update(changes)
    path = tmp_path / "log.json"
    path.write_text(json.dumps(body))
    return path


def test_a_cancelled_log_is_refused_unless_partial_is_allowed(tmp_path: Path) -> None:
    path = _log(tmp_path, status="cancelled")
    with pytest.raises(ImportFormatError, match="--allow-partial"):
        read_inspect(path)
    run = read_inspect(path, allow_partial=True)
    assert run.warnings and "cancelled" in run.warnings[0]


def test_a_dict_value_is_one_scorer_per_key_and_letters_follow_inspect(tmp_path: Path) -> None:
    body = json.loads((FIXTURES / "inspect_arith.json").read_text())
    body["samples"][0]["scores"] = {"rubric": {"value": {"style": "C", "facts": 0.5}}}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(body))
    trial = next(t for t in read_inspect(path).trials if (t.case_key, t.trial_idx) == ("q1", 0))
    assert [(s.scorer, s.score, s.passed) for s in trial.scores] == [
        ("rubric/style", 1.0, True),
        ("rubric/facts", 0.5, None),
    ]
    assert trial.passed is True  # the one verdict given passed


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("C", (1.0, True)),
        ("P", (0.5, False)),
        ("I", (0.0, False)),
        ("N", (0.0, False)),
        ("yes", (1.0, True)),
        ("False", (0.0, False)),
        ("0.25", (0.25, None)),
        (1, (1.0, True)),
        (0.7, (0.7, None)),
        ([1, 0], (None, None)),
    ],
)
def test_score_values_map_as_inspects_value_to_float(
    value: object, expected: tuple[float | None, bool | None]
) -> None:
    assert score_value(value) == expected


def test_a_file_that_is_not_a_log_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "x.eval"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ImportFormatError, match=r"x\.eval: not a readable \.eval archive"):
        read_inspect(path)


def test_inspects_own_reader_agrees_when_installed() -> None:
    pytest.importorskip("inspect_ai")
    from neens.imports.inspect import _with_inspect, run_of

    path = FIXTURES / "inspect_arith.eval"
    header, samples = _with_inspect(path)
    theirs = run_of(header, samples, str(path))
    header, samples = read_eval_archive(path)
    ours = run_of(header, samples, str(path))
    assert sorted(theirs.trials, key=repr) == sorted(ours.trials, key=repr)
