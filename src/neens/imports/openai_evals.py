"""OpenAI Evals runs: the open-source recorder's JSONL log, and a hosted Evals export.

**Recorder log** (`oaieval … --record_path run.jsonl`, `evals/record.py` `LocalRecorder`): line 1
is `{"spec": RunSpec}`, then one event a line (`{run_id, event_id, sample_id, type, data, …}`),
and last `{"final_report": …}`. A `match` event's `correct` is pass/fail; a `metrics` event
(model-graded evals) carries a `score`, which passes at 1 and fails at 0 (other values are a
score without a verdict); an `error` event is an errored case-trial. The sample id
(`base.split.N`) is the sample's line number in its samples file, so it moves when the file is
edited: given that file (`samples`), each case is keyed by the hash of its sample's content
instead.

**Hosted export**: output items as `GET /v1/evals/{eval_id}/runs/{run_id}/output_items` lists
them (`{"object": "eval.run.output_item", …}`), one a line, or a JSON object with them under
`output_items` (or `data`), optionally beside the `run` and the `eval`. `datasource_item_id` is
positional too, so a case is keyed by the hash of its `datasource_item`, as `sample_key` keys a
sample: a run on the dataset migrated from the same samples pairs with it. An item passes when
every grader result passed; each result is a scorer; `sample.error` is an errored case-trial.

Neither records a cost or a per-call latency; both run each sample once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from neens.imports.errors import ImportFormatError
from neens.imports.trial import (
    CaseKeyKind,
    ImportedRun,
    Score,
    Trial,
    check_case_key,
    check_unique,
    checked,
    content_key,
    jsonl_objects,
    loads,
    mapping,
    number,
    passed_of,
    read_file,
    repeats_of,
    text_of,
    whole,
    whole_at,
)

OUTPUT_ITEM: Final = "eval.run.output_item"
_RECORDER_FIELDS: Final = {
    "case_key": "sample_id",
    "output": "sampling data.sampled",
    "error": "error data.message",
    "model": "spec.completion_fns",
    "input": "input",
    "expected": "ideal",
    "scores": "match/metrics data",
}
_HOSTED_FIELDS: Final = {
    "output": "sample.output[0].content",
    "error": "sample.error.message",
    "model": "sample.model",
    "input": "datasource_item",
    "scores": "results",
}
NO_COST: Final = "OpenAI Evals records no cost per sample"
NO_LATENCY: Final = "OpenAI Evals records no latency per sample"


def read_openai_evals(path: Path, *, samples: Path | None = None) -> ImportedRun:
    """The run in a recorder log or a hosted-Evals export."""
    where = str(path)
    objects = _objects(path, where)
    if not objects:
        raise ImportFormatError(f"{where}: is empty")
    first = objects[0]
    if "spec" in first:
        return _recorder(objects, where, _sample_keys(samples) if samples else None)
    if samples is not None:
        raise ImportFormatError(
            "--dataset: is for a recorder log, whose cases are named by line number; a hosted "
            "export needs no samples file: each item is keyed by its datasource_item's content "
            "(c_ and 16 hex digits), the id the migrated dataset gives the same sample"
        )
    if first.get("object") == OUTPUT_ITEM:
        return _hosted(objects, {}, where)
    if len(objects) == 1 and isinstance(first.get("output_items", first.get("data")), list):
        items = first.get("output_items", first.get("data"))
        return _hosted([mapping(i, f"{where}: output item") for i in items], first, where)
    raise ImportFormatError(
        f'{where}: neither an OpenAI Evals recorder log (first line {{"spec": …}}) nor a hosted '
        "export (output items)"
    )


def _objects(path: Path, where: str) -> list[Mapping[str, Any]]:
    raw = read_file(path, where)
    try:
        whole_body = loads(raw, where)
    except (UnicodeDecodeError, json.JSONDecodeError):
        whole_body = None
    if isinstance(whole_body, Mapping):
        return [whole_body]
    if isinstance(whole_body, list):
        return [mapping(o, f"{where}: item {i}") for i, o in enumerate(whole_body)]
    return list(jsonl_objects(raw, where))


def read_samples(path: Path) -> list[Mapping[str, Any]]:
    """The samples of an OpenAI Evals samples JSONL file, in line order (blank lines skipped,
    as the evals library skips them)."""
    where = str(path)
    found = list(jsonl_objects(read_file(path, where), where))
    if not found:
        raise ImportFormatError(f"{where}: has no samples")
    return found


def sample_key(sample: Mapping[str, Any], where: str = "a sample") -> str:
    """A sample's case key, whatever line it is on: `c_` and the first 16 hex digits of the
    SHA-256 of its RFC 8785 canonical JSON. It is the case's id in the dataset file
    `--dataset` alone writes (`migrate.case_of`), the case key of a recorder log imported with
    `--dataset` and that of a hosted export's item (its `datasource_item` is the sample), so a
    run on that dataset pairs with the imported one."""
    return "c_" + content_key(dict(sample), where).removeprefix("sha256:")[:16]


def _sample_keys(path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    return [
        (sample_key(s, f"--dataset {path} sample {i}"), s)
        for i, s in enumerate(read_samples(path), start=1)
    ]


def _index_of(sample_id: str) -> int | None:
    tail = sample_id.rsplit(".", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _recorder(
    objects: list[Mapping[str, Any]],
    where: str,
    keys: list[tuple[str, Mapping[str, Any]]] | None,
) -> ImportedRun:
    spec = mapping(objects[0]["spec"], f"{where}: spec")
    models = spec.get("completion_fns")
    model = ", ".join(str(m) for m in models) if isinstance(models, list) and models else None
    events: dict[str, list[Mapping[str, Any]]] = {}
    report = None
    for index, body in enumerate(objects[1:], start=2):
        if "final_report" in body:
            report = body["final_report"]
            continue
        sample_id = body.get("sample_id")
        if not isinstance(sample_id, str) or not sample_id:
            continue  # a run-level event (no sample)
        if not isinstance(body.get("type"), str):
            raise ImportFormatError(f"{where} line {index}: type: an event needs its type")
        events.setdefault(sample_id, []).append(body)
    if not events:
        raise ImportFormatError(f"{where}: the log has no sample events")
    trials: list[Trial] = []
    for sample_id, sample_events in events.items():
        at = f"{where}: sample {sample_id}"
        key: str = sample_id
        kind: CaseKeyKind = "item_id"
        sample: Mapping[str, Any] | None = None
        if keys is not None:
            position = _index_of(sample_id)
            if position is None or position >= len(keys):
                raise ImportFormatError(
                    f"{at}: --dataset has {len(keys)} samples, and this sample id names line "
                    f"{position}: the log was not made from that samples file"
                )
            key, sample = keys[position]
            kind = "dataset_case_id"
        found = _recorder_trials(check_case_key(key, at), kind, sample_events, model, sample)
        trials.extend(checked(t, at, _RECORDER_FIELDS) for t in found)
    trials.sort(key=lambda t: (t.case_key, t.trial_idx))
    check_unique(trials, where)
    warnings = []
    if keys is None:
        warnings.append(
            "cases are keyed by their sample ids (base.split.N), which are line numbers in the "
            "samples file; give the file with --dataset to key them by content"
        )
    if report is None:
        warnings.append("the log has no final_report: the run may not have finished")
    return ImportedRun(
        tool="openai_evals",
        tool_version=None,
        run_id=text_of(spec.get("run_id")),
        task=text_of(spec.get("eval_name")),
        model=model,
        trials=trials,
        repeats=repeats_of(trials),
        unknown={"cost_usd": NO_COST, "latency_ms": NO_LATENCY},
        warnings=warnings,
        created_at=text_of(spec.get("created_at")),
    )


def _recorder_trials(
    key: str,
    kind: CaseKeyKind,
    events: Sequence[Mapping[str, Any]],
    model: str | None,
    sample: Mapping[str, Any] | None,
) -> list[Trial]:
    """One trial per verdict event (`match` or `metrics`) or `error` event, each taking the
    `sampling` event before it as its output."""
    trials: list[Trial] = []
    output = None
    prompt = None
    for event in sorted(events, key=lambda e: whole(e.get("event_id")) or 0):
        data = event.get("data")
        data = data if isinstance(data, Mapping) else {}
        kind_ = event["type"]
        if kind_ == "sampling":
            sampled = data.get("sampled")
            output = text_of(sampled[0] if isinstance(sampled, list) and sampled else sampled)
            prompt = data.get("prompt")
            continue
        if kind_ not in ("match", "metrics", "error"):
            continue
        error = None
        scores: tuple[Score, ...] = ()
        if kind_ == "error":
            error = text_of(data.get("message") or data) or "an error event without a message"
        elif kind_ == "match":
            correct = data.get("correct")
            passed = correct if isinstance(correct, bool) else None
            score = None if passed is None else float(passed)
            scores = (Score("match", None, score, passed, correct, _match_reason(data)),)
        else:
            value = number(data.get("score"))
            passed = True if value == 1 else False if value == 0 else None
            reason = f"choice {data['choice']!r}" if "choice" in data else None
            scores = (Score("metrics", None, value, passed, data.get("score"), reason),)
        trials.append(
            Trial(
                case_key=key,
                case_key_kind=kind,
                trial_idx=len(trials),
                passed=None if error else passed_of(scores),
                scores=scores,
                error=error,
                error_kind="harness" if error else None,
                model=model,
                cost_usd=None,
                latency_ms=None,
                input_tokens=None,
                output_tokens=None,
                output=output,
                input=sample.get("input") if sample is not None else prompt,
                expected=sample.get("ideal") if sample is not None else data.get("expected"),
            )
        )
        output = None
    return trials


def _match_reason(data: Mapping[str, Any]) -> str | None:
    if "picked" not in data:
        return None
    return f"picked {data.get('picked')!r}, expected {data.get('expected')!r}"


def _hosted(items: list[Mapping[str, Any]], wrapper: Mapping[str, Any], where: str) -> ImportedRun:
    run: Mapping[str, Any] = wrapper["run"] if isinstance(wrapper.get("run"), Mapping) else {}
    eval_: Mapping[str, Any] = wrapper["eval"] if isinstance(wrapper.get("eval"), Mapping) else {}
    rank: dict[str, int] = {}
    trials = []
    ordered = sorted(items, key=lambda i: whole(i.get("datasource_item_id")) or 0)
    for item in ordered:
        at = f"{where}: output item {item.get('id')}"
        source = item.get("datasource_item")
        if not isinstance(source, Mapping):
            raise ImportFormatError(f"{at}: datasource_item: expected the item as an object")
        key = sample_key(source, f"{at}: datasource_item")
        trial_idx = rank.get(key, 0)
        rank[key] = trial_idx + 1
        found = item.get("sample")
        sample: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        error_body = sample.get("error")
        error = None
        if isinstance(error_body, Mapping) and (
            error_body.get("message") or error_body.get("code")
        ):
            error = text_of(error_body.get("message") or error_body.get("code"))
        scores = tuple(
            Score(
                str(r.get("name") or "grader"),
                None,
                number(r.get("score")),
                r.get("passed") if isinstance(r.get("passed"), bool) else None,
                r.get("score"),
            )
            for r in item.get("results") or []
            if isinstance(r, Mapping)
        )
        usage: Mapping[str, Any] = (
            sample["usage"] if isinstance(sample.get("usage"), Mapping) else {}
        )
        outputs = sample.get("output")
        output = None
        if isinstance(outputs, list) and outputs and isinstance(outputs[0], Mapping):
            output = text_of(outputs[0].get("content"))
        trials.append(
            Trial(
                case_key=key,
                case_key_kind="dataset_case_id",
                trial_idx=trial_idx,
                passed=None if error else passed_of(scores),
                scores=() if error else scores,
                error=error,
                error_kind="model" if error else None,
                model=text_of(sample.get("model") or run.get("model")),
                cost_usd=None,
                latency_ms=None,
                input_tokens=whole_at(usage.get("prompt_tokens"), f"{at}: usage.prompt_tokens"),
                output_tokens=whole_at(
                    usage.get("completion_tokens"), f"{at}: usage.completion_tokens"
                ),
                output=output,
                input=dict(source),
            )
        )
        checked(trials[-1], at, _HOSTED_FIELDS)
    if not trials:
        raise ImportFormatError(f"{where}: has no output items")
    check_unique(trials, where)
    models = sorted({t.model for t in trials if t.model})
    return ImportedRun(
        tool="openai_evals",
        tool_version=None,
        run_id=text_of(run.get("id") or items[0].get("run_id")),
        task=text_of(eval_.get("name") or items[0].get("eval_id")),
        model=", ".join(models) or None,
        trials=trials,
        repeats=repeats_of(trials),
        unknown={"cost_usd": NO_COST, "latency_ms": NO_LATENCY},
        created_at=None,
    )
