"""`neens import openai-evals --dataset samples.jsonl [--graders FILE]`: an OpenAI Evals eval
moved to the bench, as a local dataset file and graders.

Where it writes (in the project folder `--out`, default the current one):

- `datasets/NAME.jsonl`: one case per sample, `{"id", "input", "expected"}`: `input` the
  sample's `input` (its chat messages, or its text), `expected` its `ideal` (a list of several
  ideal answers stays a list). The id is `c_` and 16 hex digits of the SHA-256 of the sample's
  RFC 8785 canonical JSON, so it does not move when lines are added or reordered. `neens exp run
  -d NAME` runs on it. Nothing is overwritten: an existing file is refused.
- `NAME.graders.json`: `graders` (for a spec's `"graders"`, the bench's grader kinds), `judges`
  (the same graders as `POST /judges` bodies for a server), and `unmapped`: every grader with no
  faithful Neens equivalent, with the reason. Nothing is approximated.

Faithful mappings (`map_graders`):

- `string_check` on `{{sample.output_text}}`: `eq` against the sample's ideal → `exact`
  (case-sensitive, not stripped), against a constant → `regex` `\\A…\\Z`; `like` → `contains`,
  `ilike` → `contains` case-insensitive. `ne` has no built-in check.
- registry `Includes` → `contains` (case-insensitive with `ignore_case`), when every sample has one
  ideal answer. `Match` (the answer *starts with* an ideal) and `FuzzyMatch` (token F1) have no
  built-in check of the same meaning.
- `score_model` with one message and the 0..1 range → an LLM judge (`llm` grader, `llm_prompt`
  judge) with the same prompt and its `pass_threshold`; `label_model` with one message → a
  classifier judge with the same prompt and labels (its passing labels are listed with it).
  Model-graded registry evals (`ModelBasedClassify`) map the same way when their spec is given
  inline (`prompt`, `choice_strings`); a spec named only by its registry name is unmapped.
- Templates: `{{sample.output_text}}` (or `{completion}`) → `{output}`, `{{item.input}}` →
  `{input}`, `{{item.ideal}}` (or `{ideal}`) → `{expected_output}`; a prompt using any other
  field is unmapped, since a Neens judge sees only those three.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError

from neens.imports.errors import ImportFormatError
from neens.imports.openai_evals import read_samples, sample_key
from neens.imports.trial import json_type, loads

OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
OPENAI_KEY_ENV: Final = "OPENAI_API_KEY"
_OUTPUT_REFS: Final = ("{{sample.output_text}}", "{{ sample.output_text }}")
_TEMPLATE: Final = re.compile(r"\{\{\s*([^}]+?)\s*\}\}")
_HOSTED_FIELDS: Final = {
    "sample.output_text": "{output}",
    "item.input": "{input}",
    "item.ideal": "{expected_output}",
}
_REGISTRY_FIELDS: Final = {
    "completion": "{output}",
    "input": "{input}",
    "ideal": "{expected_output}",
}
_PY_FIELD: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Unmapped(Exception):
    """A grader with no faithful Neens equivalent; the message says why."""


def case_of(sample: Mapping[str, Any], where: str) -> dict[str, Any]:
    if "input" not in sample:
        raise ImportFormatError(f"{where}: input: a sample needs its input")
    case: dict[str, Any] = {"id": sample_key(sample, where)}
    case["input"] = sample["input"]
    if sample.get("ideal") is not None:
        case["expected"] = sample["ideal"]
    return case


def _hosted_template(text: str) -> str:
    return _mapped_fields(text, _TEMPLATE, _HOSTED_FIELDS, "{{{{{}}}}}")


def _registry_template(text: str) -> str:
    return _mapped_fields(text, _PY_FIELD, _REGISTRY_FIELDS, "{{{}}}")


def _mapped_fields(text: str, field: re.Pattern[str], fields: Mapping[str, str], shown: str) -> str:
    """`text` with each `field` reference replaced by its Neens one; Unmapped naming the first
    reference (written as `shown` formats it) that a Neens judge has no value for."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in fields:
            raise Unmapped(
                f"its prompt uses {shown.format(name)}; a Neens judge sees only the input, the "
                "output and the expected output"
            )
        return fields[name]

    return field.sub(replace, text)


def _one_message(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    if not isinstance(messages, list) or len(messages) != 1:
        raise Unmapped(
            "its prompt is several messages; a Neens judge sends one prompt, so the "
            "conversation would change"
        )
    content = messages[0].get("content") if isinstance(messages[0], Mapping) else None
    if not isinstance(content, str):
        raise Unmapped("its message's content is not text")
    return content


def _checked(template: str) -> str:
    if "{output}" not in template:
        raise Unmapped("its prompt never shows the answer being graded")
    return template


def _managed(
    name: str, check: str, config: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    kinds = {"exact_match": "exact", "contains": "contains", "regex": "regex"}
    return (
        {"kind": kinds[check], "name": name, **config},
        {"name": name, "type": "managed", "check": check, "config": config},
    )


def _string_check(grader: Mapping[str, Any], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    if grader.get("input") not in _OUTPUT_REFS:
        raise Unmapped("it checks something other than the answer ({{sample.output_text}})")
    operation = grader.get("operation")
    reference = grader.get("reference")
    if not isinstance(reference, str):
        raise Unmapped("its reference is not text")
    refs = _TEMPLATE.findall(reference)
    if refs and (len(refs) != 1 or refs[0] != "item.ideal" or _TEMPLATE.sub("", reference)):
        raise Unmapped(
            "its reference is not the ideal answer ({{item.ideal}}) nor a constant; a Neens "
            "check compares with the expected output or a fixed value"
        )
    constant = None if refs else reference
    if operation == "eq":
        if constant is None:
            return _managed(name, "exact_match", {"case_sensitive": True, "strip": False})
        return _managed(name, "regex", {"pattern": r"\A" + re.escape(constant) + r"\Z"})
    if operation in ("like", "ilike"):
        config: dict[str, Any] = {"case_sensitive": operation == "like"}
        if constant is not None:
            if not constant:
                raise Unmapped("its reference is empty, which every answer contains")
            config["value"] = constant
        return _managed(name, "contains", config)
    raise Unmapped(f"operation {operation!r} has no built-in check of the same meaning")


def _llm(
    name: str, template: str, model: Any, threshold: float | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(model, str) or not model:
        raise Unmapped("it names no model")
    grader: dict[str, Any] = {
        "kind": "llm",
        "name": name,
        "base_url": OPENAI_BASE_URL,
        "model": model,
        "prompt": template,
        "api_key_env": OPENAI_KEY_ENV,
    }
    if threshold is not None:
        grader["threshold"] = threshold
    judge = {
        "name": name,
        "type": "llm_prompt",
        "template": template,
        "endpoint": {"baseUrl": OPENAI_BASE_URL, "model": model},
    }
    return grader, judge


def _classifier(name: str, template: str, model: Any, labels: Any, passing: Any) -> dict[str, Any]:
    if not isinstance(model, str) or not model:
        raise Unmapped("it names no model")
    if (
        not isinstance(labels, list)
        or len(labels) < 2
        or not all(isinstance(x, str) for x in labels)
    ):
        raise Unmapped("it has fewer than two labels")
    return {
        "name": name,
        "type": "classifier",
        "template": template,
        "labels": labels,
        "endpoint": {"baseUrl": OPENAI_BASE_URL, "model": model},
        "passingLabels": passing if isinstance(passing, list) else [],
    }


def _hosted(grader: Mapping[str, Any], name: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    kind = grader.get("type")
    if kind == "string_check":
        return _string_check(grader, name)
    if kind == "score_model":
        scale = grader.get("range", [0, 1])
        if list(scale) != [0, 1]:
            raise Unmapped(f"its scores run over {scale}; a Neens judge's run from 0 to 1")
        template = _checked(_hosted_template(_one_message(grader.get("input"))))
        threshold = grader.get("pass_threshold")
        return _llm(name, template, grader.get("model"), threshold)
    if kind == "label_model":
        template = _checked(_hosted_template(_one_message(grader.get("input"))))
        judge = _classifier(
            name, template, grader.get("model"), grader.get("labels"), grader.get("passing_labels")
        )
        return None, judge
    if kind == "text_similarity":
        raise Unmapped(
            f"{grader.get('evaluation_metric')!r} similarity has no built-in check of the same "
            "measure (fuzzy_similarity is rapidfuzz's ratio)"
        )
    if kind == "python":
        raise Unmapped("it runs its own Python code; port it to a command grader by hand")
    if kind == "multi":
        raise Unmapped("it combines graders with a formula; Neens composites are weighted means")
    raise Unmapped(f"grader type {kind!r} is not one Neens knows")


def _registry(
    spec: Mapping[str, Any], name: str, samples: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    cls = str(spec.get("class", ""))
    args: Mapping[str, Any] = spec["args"] if isinstance(spec.get("args"), Mapping) else {}
    short = cls.rsplit(":", 1)[-1]
    if short == "Includes":
        if any(isinstance(s.get("ideal"), list) and len(s["ideal"]) > 1 for s in samples):
            raise Unmapped(
                "some samples have several ideal answers, and contains checks one expected output"
            )
        return _managed(name, "contains", {"case_sensitive": not args.get("ignore_case", False)})
    if short == "Match":
        raise Unmapped(
            "Match passes when the answer starts with an ideal answer; no built-in check tests "
            "a prefix (exact would fail answers that go on after it)"
        )
    if short == "FuzzyMatch":
        raise Unmapped("FuzzyMatch scores token F1; fuzzy_similarity is rapidfuzz's ratio")
    if short == "ModelBasedClassify":
        graded = args.get("modelgraded_spec")
        if not isinstance(graded, Mapping):
            raise Unmapped(
                f"its spec {graded!r} is named, not given: copy evals/registry/modelgraded/"
                f"{graded}.yaml into the graders file as modelgraded_spec"
            )
        prompt = graded.get("prompt")
        template = _checked(_registry_template(_one_message(prompt)))
        choices = graded.get("choice_strings")
        labels = list(choices) if isinstance(choices, str | list) else None
        scores = graded.get("choice_scores")
        passing = [c for c, v in scores.items() if v == 1] if isinstance(scores, Mapping) else []
        model = args.get("eval_model") or spec.get("eval_model") or "gpt-3.5-turbo"
        return None, _classifier(name, template, model, labels, passing)
    raise Unmapped(f"eval class {cls or 'unknown'!r} has no Neens equivalent")


def _yaml_problem(exc: Exception) -> str:
    """A YAML parser's error in one line: where (line and column, from 1) and what."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    at = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
    return f"neither JSON nor YAML: {at}{' '.join(str(problem).split())}"


def _load_graders(path: Path) -> list[tuple[str, Mapping[str, Any], str]]:
    """Each grader of the file: its name, its definition, and its kind ("hosted"/"registry")."""
    where = str(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFormatError(f"--graders {where}: cannot be read: {exc}") from None
    try:
        body = loads(text, f"--graders {where}")
    except json.JSONDecodeError:
        try:
            import yaml  # type: ignore[import-untyped, unused-ignore]
        except ImportError:
            raise ConfigError(
                f"--graders {where}: reading YAML needs PyYAML (pip install pyyaml); or give "
                "the graders as JSON"
            ) from None
        try:
            body = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ImportFormatError(f"--graders {where}: {_yaml_problem(exc)}") from None
    if isinstance(body, Mapping) and isinstance(body.get("testing_criteria"), list):
        body = body["testing_criteria"]
    if isinstance(body, list):
        found = []
        for i, g in enumerate(body):
            if not isinstance(g, Mapping):
                raise ImportFormatError(
                    f"--graders {where}: grader {i + 1}: expected a JSON object, found "
                    f"{json_type(g)}"
                )
            found.append((str(g.get("name") or f"grader-{i + 1}"), g, "hosted"))
        return found
    if isinstance(body, Mapping):
        return [
            (str(name), spec, "registry")
            for name, spec in body.items()
            if isinstance(spec, Mapping) and "class" in spec
        ]
    raise ImportFormatError(
        f"--graders {where}: expected a hosted eval (testing_criteria), a list of graders, or "
        "registry YAML"
    )


def map_graders(
    graders: list[tuple[str, Mapping[str, Any], str]], samples: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    mapped: list[dict[str, Any]] = []
    judges: list[dict[str, Any]] = []
    unmapped: list[dict[str, Any]] = []
    for name, grader, kind in graders:
        try:
            if kind == "hosted":
                bench, judge = _hosted(grader, name)
            else:
                bench, judge = _registry(grader, name, samples)
        except Unmapped as exc:
            label = grader.get("type") if kind == "hosted" else grader.get("class")
            unmapped.append({"name": name, "type": label, "reason": str(exc)})
            continue
        if bench is not None:
            mapped.append(bench)
        judges.append(judge)
    return {"graders": mapped, "judges": judges, "unmapped": unmapped}


def _write_new(path: Path, text: str) -> None:
    """Write `path` whole or not at all; an existing file is refused."""
    if path.exists():
        raise ConfigError(f"--out: {path} exists; move it away or give another --name")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.link(temp, path)  # fails if the file appeared meanwhile
    finally:
        os.unlink(temp)


def migrate_command(args: argparse.Namespace) -> dict[str, Any]:
    """Write the dataset file and the graders file; print what was done and what was not."""
    samples_path = Path(args.dataset)
    samples = read_samples(samples_path)
    name = args.name or samples_path.stem
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise ConfigError(f"--name {name!r}: use letters, digits, dots, dashes and underscores")
    cases = [case_of(s, f"{samples_path} sample {i + 1}") for i, s in enumerate(samples)]
    seen: dict[str, int] = {}
    for i, case in enumerate(cases):
        if case["id"] in seen:
            raise ImportFormatError(
                f"{samples_path}: sample {i + 1} repeats sample {seen[case['id']] + 1} exactly"
            )
        seen[case["id"]] = i
    mapping_ = map_graders(_load_graders(Path(args.graders)), samples) if args.graders else None
    out = Path(args.out or ".")
    dataset_path = out / "datasets" / f"{name}.jsonl"
    graders_path = out / f"{name}.graders.json"
    if mapping_ is not None and graders_path.exists():
        raise ConfigError(f"--out: {graders_path} exists; move it away or give another --name")
    _write_new(dataset_path, "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases))
    if mapping_ is not None:
        _write_new(graders_path, json.dumps(mapping_, indent=2, ensure_ascii=False) + "\n")
    body: dict[str, Any] = {
        "dataset": str(dataset_path),
        "cases": len(cases),
        "gradersFile": str(graders_path) if mapping_ is not None else None,
        "mapped": [g["name"] for g in mapping_["judges"]] if mapping_ else [],
        "unmapped": mapping_["unmapped"] if mapping_ else [],
    }
    if not args.json:
        _print(body, name)
    return body


def _print(body: dict[str, Any], name: str) -> None:
    import sys

    out = sys.stdout
    out.write(f"dataset {body['dataset']}  {body['cases']} cases  (neens exp run -d {name})\n")
    if body["gradersFile"] is not None:
        mapped = ", ".join(body["mapped"]) or "none"
        out.write(f"graders {body['gradersFile']}  mapped {len(body['mapped'])}: {mapped}\n")
        for u in body["unmapped"]:
            out.write(f"unmapped {u['name']} ({u['type']}): {u['reason']}\n")
