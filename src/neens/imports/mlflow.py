"""MLflow GenAI evaluation results (`mlflow.genai.evaluate`), exported as JSON.

Reads the rows of `EvaluationResult.result_df` written with pandas, as a JSON array of records
(`df.to_json(path, orient="records")`), JSON Lines (`orient="records", lines=True`), or the
`{"columns", "data"}` split orientation. A row has `request_id`, `inputs`, `outputs`,
`expectations`, `tags`, `trace`, `error_message` and, for each scorer, `<name>/value`,
`<name>/rationale`, `<name>/error_message`, `<name>/error_code`. Rows without `/value` columns
are read from their assessments instead: an `assessments` list, or the `trace` JSON's
`info.assessments` (MLflow 3 Feedback objects).

The case key follows MLflow's own pairing (`mlflow/genai/evaluation/comparison.py`): the trace
tag `eval.requestId` when present, else the hash of the row's `inputs` (RFC 8785 canonical
JSON). A key that appears twice in one run is ambiguous, so both rows are left out with a
warning, never paired. Feedback that is `valid: false`, failed (an `error`), or comes from
another run (`metadata["mlflow.assessment.sourceRunId"]`) is left out.

A boolean or "yes"/"no" value is pass/fail; a number is a score without a verdict (MLflow gives
it no threshold). An evaluate run has one trial per row (repeats are separate runs), records no
cost, and a latency only when the trace is included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from neens.imports.errors import ImportFormatError
from neens.imports.trial import (
    CaseKeyKind,
    ImportedRun,
    Score,
    Trial,
    check_case_key,
    checked,
    content_key,
    json_type,
    loads,
    number,
    number_at,
    passed_of,
    read_file,
    text_of,
)

SOURCE_RUN_ID: Final = "mlflow.assessment.sourceRunId"
REQUEST_ID_TAG: Final = "eval.requestId"
_SUFFIXES: Final = ("/value", "/rationale", "/error_message", "/error_code")


def read_mlflow(path: Path, *, run_id: str | None = None) -> ImportedRun:
    """The run in an exported MLflow GenAI evaluation result."""
    where = str(path)
    rows = list(_rows(path, where))
    if not rows:
        raise ImportFormatError(f"{where}: has no rows")
    keyed: list[tuple[str, CaseKeyKind, str, Mapping[str, Any]]] = []
    counts: dict[str, int] = {}
    for at, row in rows:
        key, kind = _case_key(row, at)
        counts[key] = counts.get(key, 0) + 1
        keyed.append((key, kind, at, row))
    ambiguous = sorted(k for k, n in counts.items() if n > 1)
    warnings = []
    if ambiguous:
        warnings.append(
            f"{len(ambiguous)} case key(s) appear more than once in this run and are left out "
            f"(ambiguous, as MLflow's own comparison leaves them unpaired): "
            f"{', '.join(ambiguous[:5])}"
        )
    trials = [
        _trial(key, kind, row, at, run_id) for key, kind, at, row in keyed if counts[key] == 1
    ]
    if not trials:
        raise ImportFormatError(f"{where}: every row's case key is ambiguous; nothing to import")
    unknown = {
        "cost_usd": "MLflow evaluation results record no cost",
        "repeats": "mlflow.genai.evaluate runs each row once; repeats are separate runs",
    }
    if all(t.latency_ms is None for t in trials):
        unknown["latency_ms"] = "the rows carry no trace with an execution duration"
    return ImportedRun(
        tool="mlflow",
        tool_version=None,
        run_id=run_id,
        task=None,
        model=None,
        trials=trials,
        repeats=1,
        unknown=unknown | {"model": "evaluation results do not name the model that answered"},
        warnings=warnings,
    )


def _rows(path: Path, where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each row with where it is, for messages: `FILE line N` in JSON Lines, else `FILE row N
    of M`; both counted from 1."""
    raw = read_file(path, where)
    try:
        body = loads(raw, where)
    except (UnicodeDecodeError, json.JSONDecodeError):
        yield from _lines(raw, where)
        return
    if isinstance(body, Mapping) and isinstance(body.get("columns"), list):
        columns, data = body["columns"], body.get("data")
        if not isinstance(data, list):
            raise ImportFormatError(f"{where}: data: expected the rows as a list")
        for index, values in enumerate(data, start=1):
            at = f"{where} row {index} of {len(data)}"
            if not isinstance(values, list) or len(values) != len(columns):
                raise ImportFormatError(
                    f"{at}: data: expected an array of {len(columns)} values (one per column), "
                    f"found {json_type(values)}"
                    + (f" of {len(values)}" if isinstance(values, list) else "")
                )
            yield at, dict(zip(columns, values, strict=True))
        return
    if isinstance(body, Mapping):
        body = [body]
    if not isinstance(body, list):
        raise ImportFormatError(
            f"{where}: expected evaluation result rows (a JSON array), found {json_type(body)}"
        )
    for index, row in enumerate(body, start=1):
        at = f"{where} row {index} of {len(body)}"
        if not isinstance(row, Mapping):
            raise ImportFormatError(f"{at}: a row must be a JSON object, found {json_type(row)}")
        yield at, row


def _lines(raw: bytes, where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for number_, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        at = f"{where} line {number_}"
        try:
            row = loads(line, at)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ImportFormatError(f"{at}: not JSON: {exc}") from None
        if not isinstance(row, Mapping):
            raise ImportFormatError(f"{at}: a row must be a JSON object, found {json_type(row)}")
        yield at, row


def _json_value(value: Any) -> Any:
    """A cell pandas wrote as a JSON string (trace, inputs) read back; anything else as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
    return value


def _trace_info(row: Mapping[str, Any]) -> Mapping[str, Any]:
    trace = _json_value(row.get("trace"))
    if isinstance(trace, Mapping):
        info = trace.get("info")
        if isinstance(info, Mapping):
            return info
    return {}


def _case_key(row: Mapping[str, Any], at: str) -> tuple[str, CaseKeyKind]:
    for tags in (_json_value(row.get("tags")), _trace_info(row).get("tags")):
        if isinstance(tags, Mapping) and isinstance(tags.get(REQUEST_ID_TAG), str):
            return check_case_key(tags[REQUEST_ID_TAG], at), "request_id"
    if "inputs" not in row:
        raise ImportFormatError(f"{at}: inputs: a row needs its inputs (or an eval.requestId tag)")
    return content_key(_json_value(row["inputs"]), f"{at}: inputs"), "content_sha256"


def verdict(value: Any) -> tuple[float | None, bool | None]:
    """A Feedback value as a score and a verdict: booleans and yes/no pass or fail, numbers are
    scores without a verdict, anything else neither."""
    if isinstance(value, bool):
        return (1.0 if value else 0.0), value
    if isinstance(value, str) and value.strip().lower() in ("yes", "no"):
        passed = value.strip().lower() == "yes"
        return (1.0 if passed else 0.0), passed
    return number(value), None


def _column_scores(row: Mapping[str, Any]) -> list[Score]:
    names = sorted(
        {key[: -len(suffix)] for key in row for suffix in _SUFFIXES if key.endswith(suffix)}
    )
    scores = []
    for name in names:
        error = text_of(row.get(f"{name}/error_message"))
        value = row.get(f"{name}/value")
        if error is not None:
            scores.append(Score(name, None, None, None, None, error=error))
            continue
        if value is None:
            continue
        score, passed = verdict(value)
        scores.append(
            Score(name, None, score, passed, value, text_of(row.get(f"{name}/rationale")))
        )
    return scores


def _assessment_scores(items: Sequence[Any], run_id: str | None) -> list[Score]:
    scores = []
    for item in items:
        if not isinstance(item, Mapping) or item.get("valid") is False:
            continue
        feedback = item.get("feedback")
        if not isinstance(feedback, Mapping):
            continue  # an expectation, not a scorer's finding
        metadata = item.get("metadata")
        source_run = metadata.get(SOURCE_RUN_ID) if isinstance(metadata, Mapping) else None
        if run_id is not None and source_run not in (None, run_id):
            continue
        name = str(item.get("assessment_name") or item.get("name") or "feedback")
        if feedback.get("error"):
            error = feedback["error"]
            message = error.get("error_message") if isinstance(error, Mapping) else error
            scores.append(Score(name, None, None, None, None, error=text_of(message)))
            continue
        score, passed = verdict(feedback.get("value"))
        scores.append(
            Score(name, None, score, passed, feedback.get("value"), text_of(item.get("rationale")))
        )
    return scores


def _trial(
    key: str, kind: CaseKeyKind, row: Mapping[str, Any], at: str, run_id: str | None
) -> Trial:
    scores = _column_scores(row)
    if not scores:
        listed = _json_value(row.get("assessments"))
        if not isinstance(listed, list):
            listed = _trace_info(row).get("assessments")
        scores = _assessment_scores(listed if isinstance(listed, list) else [], run_id)
    error = text_of(row.get("error_message")) or None
    info = _trace_info(row)
    field = next(
        (
            k
            for k in ("execution_time_ms", "execution_duration_ms", "execution_duration")
            if k in info
        ),
        None,
    )
    duration = None if field is None else number_at(info[field], f"{at}: {field}")
    trial = Trial(
        case_key=key,
        case_key_kind=kind,
        trial_idx=0,
        passed=None if error else passed_of(scores),
        scores=() if error else tuple(scores),
        error=error,
        error_kind="model" if error else None,
        model=None,
        cost_usd=None,
        latency_ms=duration,
        input_tokens=None,
        output_tokens=None,
        output=text_of(_json_value(row.get("outputs"))),
        input=_json_value(row.get("inputs")),
        expected=_json_value(row.get("expectations")),
    )
    return checked(trial, at, _FIELDS)


_FIELDS: Final = {
    "case_key": "tags.eval.requestId",
    "output": "outputs",
    "error": "error_message",
    "latency_ms": "trace.info.execution_duration_ms",
    "input": "inputs",
    "expected": "expectations",
    "scores": "assessment",
}
