"""The one row every importer produces: a case-trial of another tool's evaluation run.

Each importer (`neens.imports.inspect`, `.promptfoo`, `.mlflow`, `.openai_evals`) reads its
tool's file into an `ImportedRun` of `Trial`s, and `neens.imports.store` saves that as an
experiment of the bench, so `neens exp compare` pairs runs of different tools by case key.

What a format cannot express is None, and the run says why in `unknown` (field name → reason):
a tool that records no cost leaves `cost_usd` None, never 0; a tool without repeats gives every
case trial 0 and says so. Nothing is guessed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import rfc8785

from neens.domain.storable import unstorable_text_reason
from neens.imports.errors import ImportFormatError

ErrorKind = Literal["model", "grader", "harness"]
"""Who failed: the model (its call failed or hit a limit), the grader, or the tool running the
evaluation."""
CaseKeyKind = Literal[
    "sample_id", "metadata_id", "content_sha256", "request_id", "item_id", "dataset_case_id"
]
"""Where a case key came from: an id the case carries (`sample_id`, `metadata_id`,
`request_id`, `item_id`), the SHA-256 of the case's canonical JSON (`content_sha256`), or the
id its sample has in the dataset file `neens import openai-evals --dataset` writes
(`dataset_case_id`)."""
MAX_CASE_KEY_CHARS: Final = 500


@dataclass(frozen=True, slots=True)
class Score:
    """One scorer's finding on one case-trial."""

    scorer: str
    version: str | None
    """The scorer's version when the tool records one (or a hash of its definition), else None."""
    score: float | None
    """The value as a number from 0 to 1 where the tool defines one, else None."""
    passed: bool | None
    """None when the scorer gave no pass/fail verdict (a numeric score with no threshold)."""
    raw: Any
    """The value exactly as the tool stored it."""
    reason: str | None = None
    error: str | None = None
    """Why the scorer produced no value, when it failed."""


@dataclass(frozen=True, slots=True)
class Trial:
    """One case-trial: the row every importer produces."""

    case_key: str
    """Stable across runs of the same cases: what pairs two runs."""
    case_key_kind: CaseKeyKind
    trial_idx: int
    """The repeat index, from 0. Repeats of a case are never independent cases."""
    passed: bool | None
    """Every verdict-giving scorer passed; None when none gave a verdict or the trial errored."""
    scores: tuple[Score, ...]
    error: str | None
    error_kind: ErrorKind | None
    model: str | None
    cost_usd: float | None
    """None when the tool did not record a cost: unknown, never free."""
    latency_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    output: str | None
    input: Any = None
    """The case's input as the tool recorded it (for the experiment's cases)."""
    expected: Any = None

    @property
    def score(self) -> float | None:
        """The first scorer's score: the one number a single-scorer run has."""
        return self.scores[0].score if self.scores else None


@dataclass(frozen=True, slots=True)
class ImportedRun:
    """A whole run of another tool, as read from its file."""

    tool: str
    """"inspect_ai", "promptfoo", "mlflow" or "openai_evals"."""
    tool_version: str | None
    run_id: str | None
    task: str | None
    model: str | None
    """The arm: the model (and prompt) the run evaluated; None when it was not recorded."""
    trials: list[Trial]
    repeats: int
    """The most case-trials of any case."""
    unknown: dict[str, str] = field(default_factory=dict)
    """Fields this format cannot express, each with the reason."""
    warnings: list[str] = field(default_factory=list)
    created_at: str | None = None
    """When the tool ran it (ISO 8601 text, as recorded)."""


def content_key(value: Any, where: str = "a case") -> str:
    """SHA-256 of `value` as RFC 8785 canonical JSON (JCS): the same case always has the same
    key, whatever order its keys were written in. A value that cannot be stored (or hashed) is
    an ImportFormatError naming `where` (the file, record and field)."""
    check_storable(value, where)
    try:
        text = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise ImportFormatError(f"{where}: cannot be canonicalised for its key: {exc}") from None
    return "sha256:" + hashlib.sha256(text).hexdigest()


def passed_of(scores: Sequence[Score]) -> bool | None:
    """Passed when every scorer that gave a verdict passed; None when none gave one."""
    verdicts = [s.passed for s in scores if s.passed is not None]
    return all(verdicts) if verdicts else None


def check_case_key(key: str, where: str) -> str:
    if not key or len(key) > MAX_CASE_KEY_CHARS:
        raise ImportFormatError(
            f"{where}: a case key must be 1 to {MAX_CASE_KEY_CHARS} characters, not {len(key)}"
        )
    return key


def repeats_of(trials: Sequence[Trial]) -> int:
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.case_key] = counts.get(t.case_key, 0) + 1
    return max(counts.values(), default=0)


def check_unique(trials: Sequence[Trial], where: str) -> None:
    """Refuse two rows for the same case-trial: pairing would silently keep one."""
    seen: set[tuple[str, int]] = set()
    for t in trials:
        if (t.case_key, t.trial_idx) in seen:
            raise ImportFormatError(
                f"{where}: case {t.case_key!r} has trial {t.trial_idx} twice; its case key is "
                "not unique in this run"
            )
        seen.add((t.case_key, t.trial_idx))


def number(value: Any) -> float | None:
    """A JSON number as a float (bools are not numbers here), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def number_at(value: Any, where: str) -> float | None:
    """A field that is a number when the format records it: null or absent is None (not
    recorded), a number is a float, and anything else is refused naming `where` rather than
    read as "not recorded" (a cost written as "0.5" is not an unknown cost)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ImportFormatError(f"{where}: expected a number, got {shown(value)}")
    return float(value)


def whole_at(value: Any, where: str) -> int | None:
    """As `number_at`, for a count: null or absent is None, a whole number is kept, anything
    else is refused naming `where`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ImportFormatError(f"{where}: expected a whole number, got {shown(value)}")
    return value


def whole(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def text_of(value: Any) -> str | None:
    """Text as it is; any other JSON value as its JSON text; None stays None."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def shown(value: Any, limit: int = 40) -> str:
    """`value` for an error message: its JSON type and text, cut at `limit` characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return f"{json_type(value)} {text if len(text) <= limit else text[:limit] + '…'}"


def json_type(value: Any) -> str:
    """The JSON word for `value`'s type: null, boolean, number, string, array or object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__


def mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ImportFormatError(f"{where}: expected a JSON object, found {json_type(value)}")
    return value


def check_storable(value: Any, where: str) -> None:
    """Refuse a value the store cannot hold as it is: a NUL or a lone surrogate in text, or a
    number JSON has no words for (NaN, Infinity, 1e999): ImportFormatError naming `where` and,
    inside a structure, the key or index. Nothing is altered to make it fit."""
    reason = unstorable_text_reason(value)
    if reason is not None:
        sep = "" if reason.startswith("[") else ": "
        raise ImportFormatError(f"{where}{sep}{reason}")


TRIAL_FIELDS: Final = (
    "case_key",
    "output",
    "error",
    "model",
    "cost_usd",
    "latency_ms",
    "input",
    "expected",
)


def checked(trial: Trial, at: str, names: Mapping[str, str] | None = None) -> Trial:
    """`trial`, once every value it carries is storable (`check_storable`) and its cost and
    latency, when recorded, are not negative; else ImportFormatError naming `at` (the file and
    record) and the field, by its name in the file when `names` gives it (trial field → the
    file's field)."""
    names = names or {}
    for field_ in TRIAL_FIELDS:
        check_storable(getattr(trial, field_), f"{at}: {names.get(field_, field_)}")
    for field_, what in (("cost_usd", "a cost"), ("latency_ms", "a latency")):
        value = getattr(trial, field_)
        if value is not None and value < 0:
            raise ImportFormatError(
                f"{at}: {names.get(field_, field_)}: {value!r} is negative, and {what} cannot be"
            )
    scores_at = names.get("scores", "scores")
    for s in trial.scores:
        check_storable(s.scorer, f"{at}: {scores_at}: scorer name")
        for part in ("version", "score", "raw", "reason", "error"):
            check_storable(getattr(s, part), f"{at}: {scores_at} {s.scorer!r}: {part}")
    return trial


def check_run(run: ImportedRun, where: str) -> ImportedRun:
    """`run`, once its own fields (run id, task, model…) are storable; `checked` covers the
    trials."""
    for field_ in ("tool_version", "run_id", "task", "model", "created_at"):
        check_storable(getattr(run, field_), f"{where}: {field_}")
    return run


def read_file(path: Path, where: str) -> bytes:
    """The file's bytes; ImportFormatError naming `where` when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"{where}: cannot be read: {exc.strerror or exc}") from None


def loads(raw: bytes | str, where: str) -> Any:
    """`json.loads`, except that a document nested too deeply for the parser is an
    ImportFormatError naming `where` rather than a RecursionError."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ImportFormatError(f"{where}: JSON nested too deeply to read") from None


def jsonl_objects(raw: bytes, where: str) -> Iterator[Mapping[str, Any]]:
    """The JSON objects of a JSON Lines file, in line order, blank lines skipped;
    ImportFormatError naming the line that is not JSON or not an object."""
    for number_, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        at = f"{where} line {number_}"
        try:
            body = loads(line, at)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ImportFormatError(f"{at}: not JSON: {exc}") from None
        yield mapping(body, at)
