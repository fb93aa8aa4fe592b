"""promptfoo outputs written by promptfoo 0.123.1 itself (fixtures/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rfc8785

from neens.imports.errors import ImportFormatError
from neens.imports.promptfoo import case_key, read_promptfoo
from tests.imports.conftest import FIXTURES


def test_results_json_v3_keys_cases_by_their_metadata_id() -> None:
    run = read_promptfoo(FIXTURES / "promptfoo_arith.json")
    assert (run.tool, run.tool_version, run.repeats) == ("promptfoo", "0.123.1", 1)
    assert run.run_id is not None and run.run_id.startswith("eval-")
    found = {t.case_key: (t.passed, t.output) for t in run.trials}
    assert found == {"q1": (True, "4"), "q2": (True, "8"), "q3": (True, "3"), "q4": (False, "41")}
    assert {t.case_key_kind for t in run.trials} == {"metadata_id"}
    q4 = next(t for t in run.trials if t.case_key == "q4")
    assert [(s.scorer, s.passed, s.reason) for s in q4.scores] == [
        ("contains", False, 'Expected output to contain "42"')
    ]


def test_cost_0_is_unknown_since_promptfoo_writes_0_for_no_cost() -> None:
    run = read_promptfoo(FIXTURES / "promptfoo_arith.json")
    assert all(t.cost_usd is None for t in run.trials)
    assert "promptfoo writes 0" in run.unknown["cost_usd"]
    assert "repeats" in run.unknown


@pytest.mark.parametrize("name", ["promptfoo_errors.jsonl", "promptfoo_errors.json"])
def test_repeats_rank_by_test_index_and_errors_are_not_failures(name: str) -> None:
    run = read_promptfoo(FIXTURES / name)
    assert run.repeats == 2 and "repeats" not in run.unknown
    by_case: dict[str, list[tuple[int, bool | None, str | None]]] = {}
    for t in run.trials:
        by_case.setdefault(t.case_key, []).append((t.trial_idx, t.passed, t.error_kind))
    assert sorted(by_case.values(), key=repr) == [
        [(0, False, None), (1, False, None)],  # "seven": an assertion failure
        [(0, None, "model"), (1, None, "model")],  # failureReason 2: an error
        [(0, True, None), (1, True, None)],
    ]
    errored = [t for t in run.trials if t.error_kind == "model"]
    assert all(t.error == "API error: 503 upstream unavailable" for t in errored)
    assert all(t.cost_usd is None for t in errored)  # written as 0 by promptfoo
    priced = [t for t in run.trials if t.error is None]
    assert all(t.cost_usd == pytest.approx(2e-05) for t in priced)


def test_a_case_without_an_id_is_keyed_by_the_canonical_hash_of_its_test() -> None:
    test = {"description": "d", "vars": {"b": 1, "a": "x"}, "assert": [{"type": "equals"}]}
    key, kind = case_key(test)
    text = rfc8785.dumps({"description": "d", "vars": {"a": "x", "b": 1}, "assert": test["assert"]})
    assert kind == "content_sha256"
    import hashlib

    assert key == "sha256:" + hashlib.sha256(text).hexdigest()
    reordered = {"assert": test["assert"], "vars": {"a": "x", "b": 1}, "description": "d"}
    assert case_key(reordered) == (key, kind)


def test_the_same_tests_key_alike_in_json_and_jsonl_outputs() -> None:
    keys_json = {t.case_key for t in read_promptfoo(FIXTURES / "promptfoo_errors.json").trials}
    keys_jsonl = {t.case_key for t in read_promptfoo(FIXTURES / "promptfoo_errors.jsonl").trials}
    assert keys_json == keys_jsonl and len(keys_json) == 3


def test_a_file_of_several_arms_asks_for_one(tmp_path: Path) -> None:
    body = json.loads((FIXTURES / "promptfoo_arith.json").read_text())
    other = json.loads(json.dumps(body["results"]["results"][0]))
    other["provider"] = {"id": "openai:gpt-4o-mini"}
    body["results"]["results"].append(other)
    path = tmp_path / "two.json"
    path.write_text(json.dumps(body))
    with pytest.raises(ImportFormatError, match="holds 2 arms.*--arm"):
        read_promptfoo(path)
    run = read_promptfoo(path, arm="openai:gpt-4o-mini")
    assert [t.case_key for t in run.trials] == ["q1"]
    with pytest.raises(ImportFormatError, match="--arm nope"):
        read_promptfoo(path, arm="nope")


def test_an_unknown_version_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"results": {"version": 9, "results": []}}))
    with pytest.raises(ImportFormatError, match=r"results\.version: 9"):
        read_promptfoo(path)
