"""OpenAI Evals runs, from the documented shapes: the recorder's JSONL (evals/record.py) and
hosted output items (the /v1/evals API reference)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neens.imports.errors import ImportFormatError
from neens.imports.openai_evals import read_openai_evals, sample_key

SPEC = {
    "completion_fns": ["gpt-4o-mini"],
    "eval_name": "test-match.s1.simple-v0",
    "base_eval": "test-match",
    "split": "s1",
    "run_config": {},
    "created_by": "",
    "run_id": "2611011000ABCDEFGH",
    "created_at": "2026-11-01 10:00:00",
}
SAMPLES = [
    {"input": [{"role": "user", "content": "2+2?"}], "ideal": "4"},
    {"input": [{"role": "user", "content": "3+5?"}], "ideal": "8"},
    {"input": [{"role": "user", "content": "6*7?"}], "ideal": ["42", "forty-two"]},
]


def _event(n: int, sample: int, kind: str, data: dict[str, object]) -> dict[str, object]:
    return {
        "run_id": SPEC["run_id"],
        "event_id": n,
        "sample_id": f"test-match.s1.{sample}",
        "type": kind,
        "data": data,
        "created_by": "",
        "created_at": "2026-11-01 10:00:01+00:00",
    }


def _recorder(tmp_path: Path) -> Path:
    lines = [
        {"spec": SPEC},
        _event(0, 0, "sampling", {"prompt": SAMPLES[0]["input"], "sampled": ["4"]}),
        _event(1, 0, "match", {"correct": True, "expected": ["4"], "picked": "4"}),
        _event(2, 1, "sampling", {"prompt": SAMPLES[1]["input"], "sampled": ["9"]}),
        _event(3, 1, "match", {"correct": False, "expected": ["8"], "picked": None}),
        _event(4, 2, "error", {"type": "RateLimitError", "message": "429 Too Many Requests"}),
        {"final_report": {"accuracy": 0.5, "boostrap_std": 0.35}, "run_id": SPEC["run_id"]},
    ]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _samples(tmp_path: Path) -> Path:
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    return path


def test_recorder_log_match_events_are_verdicts_and_errors_are_errors(tmp_path: Path) -> None:
    run = read_openai_evals(_recorder(tmp_path))
    assert (run.tool, run.task, run.model) == (
        "openai_evals",
        "test-match.s1.simple-v0",
        "gpt-4o-mini",
    )
    by_key = {t.case_key: t for t in run.trials}
    assert by_key["test-match.s1.0"].passed is True and by_key["test-match.s1.0"].output == "4"
    assert by_key["test-match.s1.1"].passed is False
    errored = by_key["test-match.s1.2"]
    assert (errored.passed, errored.error_kind, errored.error) == (
        None,
        "harness",
        "429 Too Many Requests",
    )
    assert "line numbers" in run.warnings[0]
    assert set(run.unknown) == {"cost_usd", "latency_ms"}


def test_with_the_samples_file_cases_are_keyed_by_content(tmp_path: Path) -> None:
    run = read_openai_evals(_recorder(tmp_path), samples=_samples(tmp_path))
    assert {t.case_key for t in run.trials} == {sample_key(s) for s in SAMPLES}
    assert {t.case_key_kind for t in run.trials} == {"dataset_case_id"}
    assert not run.warnings


def test_a_samples_file_the_log_was_not_made_from_is_refused(tmp_path: Path) -> None:
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps(SAMPLES[0]) + "\n")
    with pytest.raises(ImportFormatError, match="--dataset has 1 samples"):
        read_openai_evals(_recorder(tmp_path), samples=short)


def _item(n: int, source: dict[str, object], results: list[dict[str, object]]) -> dict[str, object]:
    return {
        "object": "eval.run.output_item",
        "id": f"outputitem_{n}",
        "run_id": "evalrun_1",
        "eval_id": "eval_1",
        "status": "pass" if all(r["passed"] for r in results) else "fail",
        "datasource_item_id": n,
        "datasource_item": source,
        "results": results,
        "sample": {
            "output": [{"role": "assistant", "content": "4"}],
            "model": "gpt-4o-mini-2024-07-18",
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
            "error": {"code": None, "message": None},
        },
    }


def test_hosted_output_items_pass_when_every_grader_passed(tmp_path: Path) -> None:
    items = [
        _item(0, {"q": "2+2?", "ideal": "4"}, [{"name": "exact", "passed": True, "score": 1.0}]),
        _item(
            1,
            {"q": "3+5?", "ideal": "8"},
            [
                {"name": "exact", "passed": False, "score": 0.0},
                {"name": "tone", "passed": True, "score": 0.8},
            ],
        ),
    ]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    run = read_openai_evals(path)
    assert [t.passed for t in run.trials] == [True, False]
    assert run.trials[1].scores[1].score == 0.8
    assert run.model == "gpt-4o-mini-2024-07-18" and run.trials[0].input_tokens == 10
    wrapped = tmp_path / "export.json"
    wrapped.write_text(json.dumps({"run": {"id": "evalrun_1"}, "output_items": items}))
    again = read_openai_evals(wrapped)
    assert [t.case_key for t in again.trials] == [t.case_key for t in run.trials]
    assert again.run_id == "evalrun_1"


def test_anything_else_is_refused_naming_both_formats(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ImportFormatError, match="neither an OpenAI Evals recorder log"):
        read_openai_evals(path)
