"""`neens import openai-evals --dataset`: samples to a dataset file, graders mapped where a
faithful mapping exists and listed by name where none does."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from neens.exp.datasets import read_jsonl
from neens.imports.openai_evals import read_openai_evals
from tests.imports.conftest import Result

Neens = Callable[..., Result]
SAMPLES = [
    {
        "input": [{"role": "system", "content": "Answer."}, {"role": "user", "content": "2+2?"}],
        "ideal": "4",
    },
    {"input": [{"role": "user", "content": "3+5?"}], "ideal": "8"},
]
TESTING_CRITERIA = [
    {
        "type": "string_check",
        "name": "exact",
        "input": "{{sample.output_text}}",
        "reference": "{{item.ideal}}",
        "operation": "eq",
    },
    {
        "type": "string_check",
        "name": "says-sorry",
        "input": "{{sample.output_text}}",
        "reference": "Sorry",
        "operation": "ilike",
    },
    {
        "type": "string_check",
        "name": "not-empty",
        "input": "{{sample.output_text}}",
        "reference": "",
        "operation": "ne",
    },
    {
        "type": "score_model",
        "name": "helpful",
        "model": "gpt-4o-mini",
        "pass_threshold": 0.6,
        "input": [
            {
                "role": "user",
                "content": "Q: {{item.input}}\nA: {{sample.output_text}}\nScore 0 to 1.",
            }
        ],
    },
    {
        "type": "label_model",
        "name": "tone",
        "model": "gpt-4o-mini",
        "input": [{"role": "user", "content": "Classify the tone of: {{sample.output_text}}"}],
        "labels": ["polite", "rude"],
        "passing_labels": ["polite"],
    },
    {
        "type": "label_model",
        "name": "two-turns",
        "model": "gpt-4o-mini",
        "input": [
            {"role": "system", "content": "Judge."},
            {"role": "user", "content": "{{sample.output_text}}"},
        ],
        "labels": ["a", "b"],
        "passing_labels": ["a"],
    },
    {
        "type": "text_similarity",
        "name": "bleu",
        "input": "{{sample.output_text}}",
        "reference": "{{item.ideal}}",
        "evaluation_metric": "bleu",
        "pass_threshold": 0.5,
    },
    {"type": "python", "name": "custom", "source": "def grade(s, i): return 1.0"},
]


def _files(tmp_path: Path, graders: object, name: str = "graders.json") -> tuple[Path, Path]:
    samples = tmp_path / "arith.jsonl"
    samples.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    path = tmp_path / name
    path.write_text(graders if isinstance(graders, str) else json.dumps(graders))
    return samples, path


def test_hosted_graders_map_faithfully_or_are_named_unmapped(neens: Neens, tmp_path: Path) -> None:
    samples, graders = _files(tmp_path, {"name": "arith", "testing_criteria": TESTING_CRITERIA})
    done = neens("import", "openai-evals", "--dataset", str(samples), "--graders", str(graders))
    assert done.code == 0, done.err
    assert "2 cases  (neens exp run -d arith)" in done.out
    unmapped = [line.split()[1] for line in done.out.splitlines() if line.startswith("unmapped")]
    assert unmapped == ["not-empty", "two-turns", "bleu", "custom"]

    cases = read_jsonl(tmp_path / "datasets" / "arith.jsonl", "arith")
    assert [c.expected for c in cases] == ["4", "8"]
    assert cases[0].input == SAMPLES[0]["input"] and cases[0].id.startswith("c_")

    body = json.loads((tmp_path / "arith.graders.json").read_text())
    assert body["graders"][:2] == [
        {"kind": "exact", "name": "exact", "case_sensitive": True, "strip": False},
        {"kind": "contains", "name": "says-sorry", "case_sensitive": False, "value": "Sorry"},
    ]
    helpful = body["graders"][2]
    assert helpful["kind"] == "llm" and helpful["threshold"] == 0.6
    assert helpful["prompt"] == "Q: {input}\nA: {output}\nScore 0 to 1."
    tone = next(j for j in body["judges"] if j["name"] == "tone")
    assert (tone["type"], tone["labels"], tone["passingLabels"]) == (
        "classifier",
        ["polite", "rude"],
        ["polite"],
    )
    assert tone["template"] == "Classify the tone of: {output}"
    reasons = {u["name"]: u["reason"] for u in body["unmapped"]}
    assert "several messages" in reasons["two-turns"]


def test_mapped_graders_run_in_a_spec(tmp_path: Path) -> None:
    """The bench accepts the managed graders as written (the spec reader validates them)."""
    from neens.exp.spec import read_spec

    spec = tmp_path / "spec.json"
    graders = [
        {"kind": "exact", "name": "exact", "case_sensitive": True, "strip": False},
        {"kind": "contains", "name": "says-sorry", "case_sensitive": False, "value": "Sorry"},
        {"kind": "regex", "name": "four", "pattern": r"\A4\Z"},
    ]
    spec.write_text(
        json.dumps(
            {
                "name": "x",
                "dataset": "arith",
                "task": {"kind": "command", "command": "cat"},
                "graders": graders,
            }
        )
    )
    assert [g.kind for g in read_spec(spec).graders] == ["exact", "contains", "regex"]


def test_registry_classes_match_and_includes(neens: Neens, tmp_path: Path) -> None:
    registry = {
        "arith": {"id": "arith.dev.v0", "metrics": ["accuracy"]},
        "arith.dev.v0": {
            "class": "evals.elsuite.basic.match:Match",
            "args": {"samples_jsonl": "arith/samples.jsonl"},
        },
        "arith-includes.dev.v0": {
            "class": "evals.elsuite.basic.includes:Includes",
            "args": {"samples_jsonl": "arith/samples.jsonl", "ignore_case": True},
        },
        "arith-graded.dev.v0": {
            "class": "evals.elsuite.modelgraded.classify:ModelBasedClassify",
            "args": {"modelgraded_spec": "closedqa"},
        },
    }
    samples, graders = _files(tmp_path, yaml.safe_dump(registry), "arith.yaml")
    done = neens(
        "import", "openai-evals", "--dataset", str(samples), "--graders", str(graders), "--json"
    )
    body = done.json()["migration"]
    assert body["mapped"] == ["arith-includes.dev.v0"]
    reasons = {u["name"]: u["reason"] for u in body["unmapped"]}
    assert "starts with an ideal answer" in reasons["arith.dev.v0"]
    assert "closedqa.yaml" in reasons["arith-graded.dev.v0"]
    written = json.loads((tmp_path / "arith.graders.json").read_text())
    assert written["graders"] == [
        {"kind": "contains", "name": "arith-includes.dev.v0", "case_sensitive": False}
    ]


def test_an_existing_dataset_is_never_overwritten(neens: Neens, tmp_path: Path) -> None:
    samples, _ = _files(tmp_path, [])
    assert neens("import", "openai-evals", "--dataset", str(samples)).code == 0
    again = neens("import", "openai-evals", "--dataset", str(samples))
    assert again.code == 2 and "exists" in again.err and again.err.count("\n") == 1


def test_a_sample_without_input_is_refused_and_nothing_written(
    neens: Neens, tmp_path: Path
) -> None:
    samples = tmp_path / "bad.jsonl"
    samples.write_text(json.dumps({"ideal": "4"}) + "\n")
    result = neens("import", "openai-evals", "--dataset", str(samples))
    assert result.code == 2 and "sample 1: input" in result.err
    assert not (tmp_path / "datasets").exists()


def test_a_recorder_log_imported_with_dataset_pairs_with_a_run_on_the_migrated_dataset(
    neens: Neens, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/migrate.md steps 1, 3 and 4: the dataset's case ids are the imported run's keys."""
    monkeypatch.chdir(tmp_path)
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    migrated = neens("import", "openai-evals", "--dataset", str(samples), "--json")
    assert migrated.code == 0, migrated.err
    log = tmp_path / "run.jsonl"
    events = [{"spec": {"completion_fns": ["m"], "eval_name": "arith.dev.v0", "run_id": "r1"}}]
    for n, answer in enumerate(["4", "9"]):
        events.append(
            {
                "event_id": 2 * n,
                "sample_id": f"arith.dev.{n}",
                "type": "sampling",
                "data": {"sampled": [answer]},
            }  # fmt: skip
        )
        events.append(
            {
                "event_id": 2 * n + 1,
                "sample_id": f"arith.dev.{n}",
                "type": "match",
                "data": {"correct": answer == SAMPLES[n]["ideal"]},
            }  # fmt: skip
        )
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    imported = neens("import", "openai-evals", str(log), "--dataset", str(samples), "--json")
    assert imported.code == 0, imported.err

    dataset_ids = {c.id for c in read_jsonl(tmp_path / "datasets" / "samples.jsonl", "samples")}
    keys = {t.case_key for t in read_openai_evals(log, samples=samples).trials}
    assert keys == dataset_ids

    assert _paired_with_a_new_run(neens, tmp_path, imported.json()["id"]) == len(SAMPLES)


def test_a_hosted_export_pairs_with_a_run_on_the_migrated_dataset(
    neens: Neens, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/migrate.md steps 1, 3 and 4, literally, for a hosted export: its output items'
    `datasource_item`s are the samples file's lines, so every case pairs."""
    monkeypatch.chdir(tmp_path)
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    migrated = neens("import", "openai-evals", "--dataset", str(samples))
    assert migrated.code == 0, migrated.err
    export = tmp_path / "export"
    export.mkdir()
    items = [
        {
            "object": "eval.run.output_item",
            "id": f"outputitem_{n}",
            "run_id": "evalrun_68a1",
            "eval_id": "eval_68a0",
            "status": "pass" if answer == sample["ideal"] else "fail",
            "datasource_item_id": n,
            # As the hosted API returned it: the same keys, written in another order.
            "datasource_item": dict(reversed(list(sample.items()))),
            "results": [{"name": "exact", "passed": answer == sample["ideal"], "score": 1.0}],
            "sample": {
                "output": [{"role": "assistant", "content": answer}],
                "model": "gpt-4o-mini",
                "error": {"code": None, "message": None},
            },
        }
        for n, (sample, answer) in enumerate(zip(SAMPLES, ["4", "9"], strict=True))
    ]
    hosted = export / "evalrun_68a1-items.jsonl"
    hosted.write_text("".join(json.dumps(i) + "\n" for i in items))
    imported = neens("import", "openai-evals", str(hosted), "--json")
    assert imported.code == 0, imported.err

    assert _paired_with_a_new_run(neens, tmp_path, imported.json()["id"]) == len(SAMPLES)

    dataset_ids = {c.id for c in read_jsonl(tmp_path / "datasets" / "samples.jsonl", "samples")}
    run = read_openai_evals(hosted)
    assert {t.case_key for t in run.trials} == dataset_ids
    assert {t.case_key_kind for t in run.trials} == {"dataset_case_id"}

    # --dataset is for recorder logs: refused for a hosted export, saying why it is not needed.
    refused = neens("import", "openai-evals", str(hosted), "--dataset", str(samples))
    assert refused.code == 2
    assert "recorder log" in refused.err and "c_" in refused.err


def _paired_with_a_new_run(neens: Neens, tmp_path: Path, imported_id: str) -> int:
    """docs/migrate.md step 4: a new run on the migrated dataset, compared with the import;
    the cases paired."""
    (tmp_path / "agent.py").write_text("print('4')\n")
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "name": "new",
                "dataset": "samples",
                "task": {"kind": "command", "command": f"{sys.executable} agent.py"},
                "graders": [{"kind": "exact"}],
            }
        )
    )
    ran = neens("exp", "run", str(spec), "-d", "samples", "--json")
    assert ran.code == 0, ran.err
    compared = neens("exp", "compare", imported_id, ran.json()["id"], "--json")
    assert compared.code == 0, compared.err
    return int(compared.json()["pairedCases"])
