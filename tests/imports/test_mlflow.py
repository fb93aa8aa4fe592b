"""MLflow GenAI evaluation results, from the documented `result_df` columns and Feedback shape
(mlflow/genai/evaluation/entities.py, mlflow/entities/assessment.py; MLflow 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neens.imports.errors import ImportFormatError
from neens.imports.mlflow import read_mlflow
from neens.imports.trial import content_key

ROWS = [
    {
        "request_id": "tr-1",
        "inputs": {"question": "What is 2+2?"},
        "outputs": "4",
        "expectations": {"expected_response": "4"},
        "tags": {"eval.requestId": "q1"},
        "correctness/value": "yes",
        "correctness/rationale": "matches",
        "relevance/value": 0.9,
    },
    {
        "request_id": "tr-2",
        "inputs": {"question": "What is 3+5?"},
        "outputs": "9",
        "correctness/value": False,
        "relevance/value": 0.4,
    },
    {
        "request_id": "tr-3",
        "inputs": {"question": "What is 6*7?"},
        "outputs": None,
        "error_message": "predict_fn raised TimeoutError",
    },
    {
        "request_id": "tr-4",
        "inputs": {"question": "What is 10-7?"},
        "outputs": "3",
        "correctness/error_message": "judge call failed: 429",
        "correctness/error_code": "RATE_LIMIT",
    },
]


def _write(tmp_path: Path, rows: object, name: str = "r.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(rows))
    return path


def test_value_columns_become_scorers_and_yes_no_a_verdict(tmp_path: Path) -> None:
    run = read_mlflow(_write(tmp_path, ROWS))
    by_key = {t.case_key: t for t in run.trials}
    q1 = by_key["q1"]
    assert q1.case_key_kind == "request_id" and q1.passed is True
    assert [(s.scorer, s.score, s.passed) for s in q1.scores] == [
        ("correctness", 1.0, True),
        ("relevance", 0.9, None),  # a number has no threshold: a score, no verdict
    ]
    q2 = by_key[content_key({"question": "What is 3+5?"})]
    assert q2.case_key_kind == "content_sha256" and q2.passed is False
    q3 = by_key[content_key({"question": "What is 6*7?"})]
    assert (q3.error_kind, q3.passed, q3.scores) == ("model", None, ())
    q4 = by_key[content_key({"question": "What is 10-7?"})]
    assert q4.passed is None and q4.scores[0].error == "judge call failed: 429"
    assert run.unknown["cost_usd"] and run.unknown["repeats"] and run.repeats == 1


def test_jsonl_and_split_orientations_read_the_same(tmp_path: Path) -> None:
    records = read_mlflow(_write(tmp_path, ROWS))
    lines = tmp_path / "r.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    columns = sorted({k for r in ROWS for k in r})
    split = {"columns": columns, "data": [[r.get(c) for c in columns] for r in ROWS]}
    for other in (read_mlflow(lines), read_mlflow(_write(tmp_path, split, "s.json"))):
        assert [(t.case_key, t.passed) for t in other.trials] == [
            (t.case_key, t.passed) for t in records.trials
        ]


def test_duplicate_case_keys_are_left_unpaired_with_a_warning(tmp_path: Path) -> None:
    rows = [ROWS[1], dict(ROWS[1], request_id="tr-9"), ROWS[0]]
    run = read_mlflow(_write(tmp_path, rows))
    assert [t.case_key for t in run.trials] == ["q1"]
    assert "ambiguous" in run.warnings[0]


def test_assessments_in_the_trace_are_read_and_other_runs_left_out(tmp_path: Path) -> None:
    trace = {
        "info": {
            "trace_id": "tr-1",
            "tags": {"eval.requestId": "q7"},
            "execution_duration_ms": 840,
            "assessments": [
                {
                    "assessment_name": "correctness",
                    "feedback": {"value": True},
                    "metadata": {"mlflow.assessment.sourceRunId": "run-a"},
                },
                {
                    "assessment_name": "correctness-old",
                    "feedback": {"value": False},
                    "metadata": {"mlflow.assessment.sourceRunId": "run-b"},
                },
                {"assessment_name": "overridden", "feedback": {"value": False}, "valid": False},
                {"assessment_name": "expected", "expectation": {"value": "4"}},
            ],
        }
    }
    rows = [{"request_id": "tr-1", "inputs": {"q": 1}, "trace": json.dumps(trace)}]
    run = read_mlflow(_write(tmp_path, rows), run_id="run-a")
    (trial,) = run.trials
    assert trial.case_key == "q7" and trial.latency_ms == 840
    assert [(s.scorer, s.passed) for s in trial.scores] == [("correctness", True)]


def test_a_row_without_inputs_or_tag_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="row 1 of 1: inputs"):
        read_mlflow(_write(tmp_path, [{"request_id": "x"}]))
    with pytest.raises(ImportFormatError, match="expected evaluation result rows"):
        read_mlflow(_write(tmp_path, 3))
