"""Inspect AI logs: `.eval` (a ZIP archive) and `.json` (the whole `EvalLog` as one object).

The sample's `id` is the case key (stable across runs of the same dataset) and its `epoch` the
repeat (trial 0 is epoch 1). Scores follow Inspect's own `value_to_float`: "C" 1, "P" 0.5, "I" 0,
"N" 0, numeric strings parsed, yes/true 1, no/false 0. A value passes when it is "C", true,
"yes" or exactly 1; "I", "P", "N", false, "no" and 0 fail; any other number is a score without a
verdict (Inspect gives it no threshold). A dict value is one scorer per key (`scorer/key`); a
list value is kept raw, with no score. Per-epoch values are read, never the reductions (already
averaged across epochs).

A sample with an `error` is an errored case-trial (`error_kind` "harness": Inspect records the
exception, not whose it was); one that hit a `limit` (tokens, time, messages) keeps its scores
and says so in its error with `error_kind` "model". A log whose status is not "success" or that
is `invalidated` is refused unless `allow_partial`.

Reading `.eval`: Inspect's own reader (`inspect_ai.log`) when it is installed; otherwise the
archive is read here. Since Inspect 0.3.206 its members are Zstandard-compressed (ZIP method 93),
which Python's `zipfile` cannot decompress before 3.14, so such members are decompressed with
`zstandard`. Both sample layouts are read: one `samples/{id}_epoch_{n}.json` per sample, and the
chunked one, `samples/{id}_epoch_{n}/sample.json` beside its `messages/`, `events/` chunks.
Without samples (a log written with samples left out) `summaries.json` carries the scores.
"""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from neens.imports.errors import ImportFormatError
from neens.imports.trial import (
    ImportedRun,
    Score,
    Trial,
    check_case_key,
    check_unique,
    checked,
    loads,
    mapping,
    number_at,
    passed_of,
    repeats_of,
    text_of,
    whole,
    whole_at,
)

ZIP_ZSTANDARD: Final = 93
_LOCAL_HEADER: Final = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_MAGIC: Final = b"PK\x03\x04"
_SAMPLE_ENTRY: Final = re.compile(r"^samples/(?P<name>[^/]+)\.json$")
_CHUNKED_ENTRY: Final = re.compile(r"^samples/(?P<name>[^/]+)/sample\.json$")
_TRUE_WORDS: Final = frozenset({"yes", "true"})
_FALSE_WORDS: Final = frozenset({"no", "false"})
_LETTERS: Final = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}


def read_inspect(path: Path, *, allow_partial: bool = False) -> ImportedRun:
    """The run in an Inspect AI `.eval` or `.json` log."""
    where = str(path)
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise ImportFormatError(f"{where}: cannot be read: {exc.strerror or exc}") from None
    if head == _LOCAL_MAGIC:
        header, samples = _read_eval(path)
    else:
        try:
            body = loads(path.read_bytes(), where)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ImportFormatError(
                f"{where}: neither an .eval archive nor a JSON log: {exc}"
            ) from None
        header = dict(mapping(body, where))
        listed = header.pop("samples", None)
        samples = [mapping(s, f"{where}: samples[{i}]") for i, s in enumerate(listed or [])]
    return run_of(header, samples, where, allow_partial=allow_partial)


def _read_eval(path: Path) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
    """Inspect's own reader when installed; Neens' when it is not, or when Inspect's cannot
    read the file (inspect_ai 0.3.285's `read_eval_log` refuses the chunked layout its own
    `inspect log convert-chunked` writes)."""
    if importlib.util.find_spec("inspect_ai") is not None:
        try:
            return _with_inspect(path)
        except ImportFormatError:
            pass
    return read_eval_archive(path)


def _with_inspect(path: Path) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
    """Header and samples through Inspect's own reader, as plain JSON objects."""
    from inspect_ai.log import (  # type: ignore[import-not-found, unused-ignore]
        read_eval_log,
        read_eval_log_sample_summaries,
    )

    try:
        log = read_eval_log(str(path), resolve_attachments=True)
    except Exception as exc:  # Inspect raises many kinds for a damaged log; one line for each
        raise ImportFormatError(f"{path}: Inspect cannot read this log: {exc}") from None
    body = log.model_dump(mode="json", exclude_none=False)
    samples = body.pop("samples", None)
    if not samples:
        body["summaries"] = [
            s.model_dump(mode="json") for s in read_eval_log_sample_summaries(str(path))
        ]
        samples = []
    return body, list(samples)


def _member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, raw: Any) -> bytes:
    """A member's bytes; Zstandard members are decompressed here (Python < 3.14 cannot)."""
    if info.compress_type != ZIP_ZSTANDARD:
        return archive.read(info)
    import zstandard

    raw.seek(info.header_offset)
    fields = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
    if fields[0] != _LOCAL_MAGIC:
        raise ImportFormatError(f"{info.filename}: damaged ZIP entry (no local header)")
    raw.seek(info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10])
    compressed = raw.read(info.compress_size)
    reader = zstandard.ZstdDecompressor().stream_reader(compressed)
    data = reader.read(info.file_size + 1) if info.file_size else reader.readall()
    if info.file_size and len(data) != info.file_size:
        raise ImportFormatError(f"{info.filename}: decompressed to an unexpected size")
    return bytes(data)


def read_eval_archive(path: Path) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
    """Header and samples of a `.eval` archive, without Inspect installed."""
    where = str(path)
    try:
        with path.open("rb") as raw, zipfile.ZipFile(raw) as archive:
            infos = {info.filename: info for info in archive.infolist()}

            def load(name: str) -> Any:
                try:
                    data = _member(archive, infos[name], raw)
                    return loads(data, f"{where}: {name}")
                except (zipfile.BadZipFile, OSError, ValueError) as exc:
                    raise ImportFormatError(f"{where}: {name}: cannot be read: {exc}") from None

            if "header.json" in infos:
                header = dict(mapping(load("header.json"), f"{where}: header.json"))
            elif "_journal/start.json" in infos:
                header = dict(mapping(load("_journal/start.json"), f"{where}: start.json"))
                header.setdefault("status", "started")
            else:
                raise ImportFormatError(f"{where}: not an Inspect log (no header.json)")
            names = sorted(
                name for name in infos if _SAMPLE_ENTRY.match(name) or _CHUNKED_ENTRY.match(name)
            )
            samples = [mapping(load(name), f"{where}: {name}") for name in names]
            if not samples and "summaries.json" in infos:
                listed = load("summaries.json")
                header["summaries"] = listed if isinstance(listed, list) else []
    except zipfile.BadZipFile as exc:
        raise ImportFormatError(f"{where}: not a readable .eval archive: {exc}") from None
    return header, samples


def score_value(value: Any) -> tuple[float | None, bool | None]:
    """Inspect's `value_to_float` of one scalar value, and whether it passed."""
    if isinstance(value, bool):
        return (1.0 if value else 0.0), value
    if isinstance(value, int | float):
        as_float = float(value)
        return as_float, (True if as_float == 1 else False if as_float == 0 else None)
    if isinstance(value, str):
        if value in _LETTERS:
            return _LETTERS[value], value == "C"
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return 1.0, True
        if word in _FALSE_WORDS:
            return 0.0, False
        try:
            as_float = float(value)
        except ValueError:
            return None, None
        return as_float, (True if as_float == 1 else False if as_float == 0 else None)
    return None, None


def _scores(raw_scores: Any, versions: Mapping[str, str | None]) -> tuple[Score, ...]:
    if not isinstance(raw_scores, Mapping):
        return ()
    found = []
    for name, score in raw_scores.items():
        if not isinstance(score, Mapping):
            score = {"value": score}
        value = score.get("value")
        version = versions.get(name)
        reason = text_of(score.get("explanation"))
        if isinstance(value, Mapping):
            for key, item in value.items():
                number_, passed = score_value(item)
                found.append(Score(f"{name}/{key}", version, number_, passed, item, reason))
            continue
        number_, passed = score_value(value)
        found.append(Score(str(name), version, number_, passed, value, reason))
    return tuple(found)


def _scorer_versions(spec: Mapping[str, Any]) -> dict[str, str | None]:
    """Each scorer's version: a hash of its name and options from the log's `eval.scorers`."""
    from neens.imports.trial import content_key

    versions: dict[str, str | None] = {}
    for scorer in spec.get("scorers") or []:
        if isinstance(scorer, Mapping) and isinstance(scorer.get("name"), str):
            body = {"name": scorer["name"], "options": scorer.get("options") or {}}
            try:
                versions[scorer["name"]] = content_key(body).removeprefix("sha256:")[:16]
            except ImportFormatError:
                versions[scorer["name"]] = None
    return versions


def _usage(sample: Mapping[str, Any], at: str) -> tuple[int | None, int | None, float | None, bool]:
    """Input and output tokens, and the cost with whether every model's cost was recorded."""
    usage = sample.get("model_usage")
    if not isinstance(usage, Mapping) or not usage:
        return None, None, None, False
    tokens_in = tokens_out = 0
    cost = 0.0
    priced = True
    for name, one in usage.items():
        if not isinstance(one, Mapping):
            continue
        where = f"{at}: model_usage[{json.dumps(name)}]"
        tokens_in += whole_at(one.get("input_tokens"), f"{where}.input_tokens") or 0
        tokens_out += whole_at(one.get("output_tokens"), f"{where}.output_tokens") or 0
        one_cost = number_at(one.get("total_cost"), f"{where}.total_cost")
        if one_cost is None:
            priced = False
        else:
            cost += one_cost
    return tokens_in, tokens_out, (cost if priced else None), priced


def _output(sample: Mapping[str, Any]) -> str | None:
    output = sample.get("output")
    if isinstance(output, Mapping):
        completion = output.get("completion")
        if isinstance(completion, str):
            return completion
    return None


def _error(sample: Mapping[str, Any]) -> str | None:
    error = sample.get("error")
    if isinstance(error, Mapping):
        return text_of(error.get("message")) or "Inspect recorded an error without a message"
    if isinstance(error, str) and error:
        return error
    return None


_FIELDS: Final = {
    "case_key": "id",
    "output": "output.completion",
    "model": "eval.model",
    "cost_usd": "model_usage.total_cost",
    "latency_ms": "total_time",
    "expected": "target",
}


def _trials(
    samples: Sequence[Mapping[str, Any]], spec: Mapping[str, Any], where: str
) -> Iterator[Trial]:
    versions = _scorer_versions(spec)
    model = text_of(spec.get("model"))
    for index, sample in enumerate(samples):
        at = f"{where}: sample {index}"
        sample_id = sample.get("id")
        epoch = whole(sample.get("epoch"))
        if sample_id is None or isinstance(sample_id, bool | dict | list):
            raise ImportFormatError(f"{at}: id: a sample needs an id (a number or a string)")
        if epoch is None or epoch < 1:
            raise ImportFormatError(f"{at}: epoch: must be a whole number from 1")
        key = check_case_key(str(sample_id), at)
        error = _error(sample)
        limit = sample.get("limit")
        error_kind = None
        if error is not None:
            error_kind = "harness"
        elif isinstance(limit, Mapping) and limit.get("type"):
            error = f"hit the {limit.get('type')} limit ({limit.get('limit')})"
            error_kind = "model"
        scores = () if error_kind == "harness" else _scores(sample.get("scores"), versions)
        tokens_in, tokens_out, cost, _ = _usage(sample, at)
        seconds = number_at(sample.get("total_time"), f"{at}: total_time")
        trial = Trial(
            case_key=key,
            case_key_kind="sample_id",
            trial_idx=epoch - 1,
            passed=None if error_kind == "harness" else passed_of(scores),
            scores=scores,
            error=error,
            error_kind=error_kind,  # type: ignore[arg-type]
            model=model,
            cost_usd=cost,
            latency_ms=None if seconds is None else seconds * 1000,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            output=None if error_kind == "harness" else _output(sample),
            input=sample.get("input"),
            expected=sample.get("target"),
        )
        yield checked(trial, at, _FIELDS)


def run_of(
    header: Mapping[str, Any],
    samples: Sequence[Mapping[str, Any]],
    where: str,
    *,
    allow_partial: bool = False,
) -> ImportedRun:
    """The run of a log read as JSON: its header (everything but the samples) and its samples
    (or, without them, the `summaries` in the header)."""
    spec = mapping(header.get("eval"), f"{where}: eval")
    status = header.get("status")
    if not allow_partial and status != "success":
        raise ImportFormatError(
            f"{where}: the log's status is {status!r}, not 'success': its samples are not all "
            "there; import it anyway with --allow-partial"
        )
    if not allow_partial and header.get("invalidated") is True:
        raise ImportFormatError(
            f"{where}: the log is marked invalidated; import it anyway with --allow-partial"
        )
    source = samples
    if not source:
        summaries = header.get("summaries")
        source = [s for s in summaries or [] if isinstance(s, Mapping)]
    if not source:
        raise ImportFormatError(f"{where}: the log has no samples")
    trials = list(_trials(source, spec, where))
    check_unique(trials, where)
    unknown: dict[str, str] = {}
    if all(t.cost_usd is None for t in trials):
        unknown["cost_usd"] = "the log records no cost for its model calls (model_usage.total_cost)"
    if all(t.output is None for t in trials):
        unknown["output"] = "the log holds no model outputs (samples left out, summaries only)"
    warnings = []
    if status != "success":
        warnings.append(f"the log's status is {status!r}: it may be missing samples")
    packages = spec.get("packages")
    version = packages.get("inspect_ai") if isinstance(packages, Mapping) else None
    return ImportedRun(
        tool="inspect_ai",
        tool_version=text_of(version),
        run_id=text_of(spec.get("run_id")),
        task=text_of(spec.get("task")),
        model=text_of(spec.get("model")),
        trials=trials,
        repeats=repeats_of(trials),
        unknown=unknown,
        warnings=warnings,
        created_at=text_of(spec.get("created")),
    )
