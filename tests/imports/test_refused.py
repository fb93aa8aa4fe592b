"""Values the store cannot hold, ambiguous cases and bad flags: refused with one line, exit 2,
naming the file, the record and the field, before anything is saved."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.imports.conftest import FIXTURES, Result
from tests.support.sqlite_only import sqlite_only

pytestmark = sqlite_only(
    "the file is refused before anything is written; what an import writes: test_store.py, both"
)

Neens = Callable[..., Result]


def _promptfoo(tmp_path: Path, **changes: object) -> Path:
    body = json.loads((FIXTURES / "promptfoo_arith.json").read_text())
    body["results"]["results"][1].update(changes)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(body))
    return path


def _refused(done: Result, *words: str) -> None:
    assert done.code == 2, done.err
    assert done.err.count("\n") == 1 and "Traceback" not in done.err
    for word in words:
        assert word in done.err


def _nothing_saved(neens: Neens) -> None:
    assert neens("exp", "list", "--json").json()["experiments"] == []


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"cost": float("inf")}, ["result 1: cost", "inf"]),
        ({"latencyMs": float("nan")}, ["result 1: latencyMs", "nan"]),
        ({"response": {"output": "\ud800"}}, ["result 1: response.output", "lone surrogate"]),
        ({"response": {"output": "4\u0000x"}}, ["result 1: response.output", "NUL"]),
        ({"latencyMs": -3}, ["result 1: latencyMs: -3.0 is negative, and a latency cannot be"]),
        ({"cost": -0.5}, ["result 1: cost: -0.5 is negative, and a cost cannot be"]),
        # a value of the wrong type is not "not recorded": refused, never read as missing
        ({"cost": "0.5"}, ['result 1: cost: expected a number, got string "0.5"']),
        ({"latencyMs": "fast"}, ['result 1: latencyMs: expected a number, got string "fast"']),
        ({"latencyMs": True}, ["result 1: latencyMs: expected a number, got boolean true"]),
        ({"success": "yes"}, ['result 1: success: expected true or false, got string "yes"']),
        (
            {"tokenUsage": {"prompt": 1.5, "completion": 2}},
            ["result 1: tokenUsage.prompt: expected a whole number, got number 1.5"],
        ),
    ],
)
def test_promptfoo_unstorable_values_are_refused(
    neens: Neens, tmp_path: Path, changes: dict[str, object], words: list[str]
) -> None:
    path = _promptfoo(tmp_path, **changes)
    _refused(neens("import", "promptfoo", str(path)), str(path), *words)
    _nothing_saved(neens)


def test_a_nul_in_a_promptfoo_case_key_is_refused(neens: Neens, tmp_path: Path) -> None:
    body = json.loads((FIXTURES / "promptfoo_arith.json").read_text())
    body["results"]["results"][0]["testCase"]["metadata"] = {"id": "q\u00001"}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(body))
    _refused(neens("import", "promptfoo", str(path)), "testCase.metadata.id", "NUL")


def _mlflow(tmp_path: Path, **row: object) -> Path:
    rows = [
        {"inputs": {"q": "2+2?"}, "outputs": "4", "correct/value": "yes"},
        {"inputs": {"q": "3+5?"}, "outputs": "8", "correct/value": "yes", **row},
    ]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(rows))
    return path


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ({"outputs": "\udc80"}, ["row 2 of 2: outputs", "lone surrogate"]),
        ({"outputs": "4\u0000x"}, ["row 2 of 2: outputs", "NUL"]),
        ({"correct/value": float("inf")}, ["row 2 of 2", "'correct'", "inf"]),
        ({"inputs": {"q": "\u0000"}}, ["row 2 of 2: inputs", "NUL"]),
    ],
)
def test_mlflow_unstorable_values_are_refused(
    neens: Neens, tmp_path: Path, row: dict[str, object], words: list[str]
) -> None:
    path = _mlflow(tmp_path, **row)
    _refused(neens("import", "mlflow", str(path)), str(path), *words)
    _nothing_saved(neens)


def _recorder(tmp_path: Path, data: dict[str, object], kind: str = "metrics") -> Path:
    lines = [
        {"spec": {"completion_fns": ["m"], "eval_name": "e", "run_id": "r"}},
        {"event_id": 0, "sample_id": "e.dev.0", "type": "sampling", "data": {"sampled": ["4"]}},
        {"event_id": 1, "sample_id": "e.dev.0", "type": kind, "data": data},
    ]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_openai_evals_non_finite_scores_are_refused(neens: Neens, tmp_path: Path) -> None:
    path = _recorder(tmp_path, {"score": 1})
    path.write_text(path.read_text().replace('"score": 1}', '"score": 1e999}'))
    _refused(neens("import", "openai-evals", str(path)), str(path), "e.dev.0", "score", "inf")
    _nothing_saved(neens)


def test_openai_evals_hosted_nul_output_is_refused(neens: Neens, tmp_path: Path) -> None:
    item = {
        "object": "eval.run.output_item",
        "id": "oi_1",
        "datasource_item_id": 0,
        "datasource_item": {"q": "2+2?"},
        "results": [{"name": "exact", "passed": True, "score": 1.0}],
        "sample": {"output": [{"role": "assistant", "content": "4\u0000"}]},
    }
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(item) + "\n")
    _refused(neens("import", "openai-evals", str(path)), "oi_1", "sample.output[0].content")


def test_two_different_promptfoo_tests_with_one_id_are_refused(
    neens: Neens, tmp_path: Path
) -> None:
    body = json.loads((FIXTURES / "promptfoo_arith.json").read_text())
    results = body["results"]["results"]
    for r in results[:2]:
        r["testCase"]["metadata"] = {"id": "same"}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(body))
    _refused(neens("import", "promptfoo", str(path)), "'same'", "result 0", "different test")
    _nothing_saved(neens)


def test_repeats_of_one_promptfoo_test_share_its_id(neens: Neens, tmp_path: Path) -> None:
    body = json.loads((FIXTURES / "promptfoo_arith.json").read_text())
    results = body["results"]["results"]
    results[0]["testCase"]["metadata"] = {"id": "same"}
    again = json.loads(json.dumps(results[0]))
    again["testIdx"] = 99
    results.append(again)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(body))
    done = neens("import", "promptfoo", str(path), "--json")
    assert done.code == 0, done.err
    assert done.json()["repeats"] == 2


@pytest.mark.parametrize(
    "flags",
    [
        ["--name", "x" * 501],
        ["--name", "  "],
        ["--server", "--dataset-id", ""],
        ["--server", "--dataset-id", "ds_1", "--dataset-version-id", " "],
        ["--server", "--dataset-name", ""],
    ],
)
def test_blank_or_too_long_names_are_bad_flags(
    neens: Neens, flags: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEENS_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("NEENS_API_KEY", "nk_test")
    done = neens("import", "promptfoo", str(FIXTURES / "promptfoo_arith.json"), *flags)
    _refused(done, flags[-2])
    _nothing_saved(neens)


def test_a_name_with_a_control_character_is_refused(neens: Neens, tmp_path: Path) -> None:
    """An escape in a provider's label would recolour the terminal listing the run."""
    body = json.loads((FIXTURES / "promptfoo_arith.json").read_text())
    for result in body["results"]["results"]:
        result["provider"] = {"id": "echo", "label": "\x1b[31mecho"}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(body))
    _refused(
        neens("import", "promptfoo", str(path)),
        "the default name (tool:task:model), 'promptfoo:results:\\x1b[31mecho / {{reply}}', "
        "must not hold control characters (U+001B at position 18): give the experiment's name "
        "with --name",
    )
    _refused(neens("import", "promptfoo", str(path), "--name", "a\tb"), "--name: must not hold")
    _refused(
        neens("import", "promptfoo", str(path), "--name", "coloured"),
        f"{path}: the run's model, '\\x1b[31mecho / {{{{reply}}}}', must not hold control "
        "characters (U+001B at position 0): nothing was saved",
    )
    _nothing_saved(neens)


def test_migration_flags_with_a_recorder_log_are_refused(neens: Neens, tmp_path: Path) -> None:
    path = _recorder(tmp_path, {"correct": True}, "match")
    for flags in (["--graders", "g.yaml"], ["--out", "elsewhere"]):
        _refused(neens("import", "openai-evals", str(path), *flags), flags[0])
    _nothing_saved(neens)


def test_bad_graders_yaml_is_one_line(neens: Neens, tmp_path: Path) -> None:
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"input": "2+2?", "ideal": "4"}) + "\n")
    graders = tmp_path / "g.yaml"
    graders.write_text("a: [1, 2\nb: {c: d\n")
    done = neens("import", "openai-evals", "--dataset", str(samples), "--graders", str(graders))
    _refused(done, "--graders", "line ")


def test_type_errors_use_json_words(neens: Neens, tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"results": None}))
    _refused(neens("import", "promptfoo", str(path)), "found null")
