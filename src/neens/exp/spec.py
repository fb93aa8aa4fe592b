"""Reading an experiment spec (spec.json) and the graders given with -g, strictly.

    {"name": "smoke", "dataset": "qa", "trials": 1,
     "task": {"kind": "command", "command": "node agent.mjs", "env": {"MODEL": "small"}},
     "graders": [{"kind": "exact"}, {"kind": "regex", "pattern": "^[A-Z]+$"}]}

Every object is checked for unknown keys, which are refused naming the field
(`graders[1].patern`): a misspelt option silently ignored would run a different experiment
than the one written. Every problem is a `ConfigError` (exit 2) whose one line names the file
and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from neens_eval.errors import ConfigError

from neens.domain.storable import name_problem
from neens.exp.jsonread import finite, loads

TaskKind = Literal["command", "http"]
GraderKind = Literal["exact", "contains", "regex", "json_field", "command", "llm"]
GRADER_KINDS: Final[tuple[str, ...]] = (
    "exact",
    "contains",
    "regex",
    "json_field",
    "command",
    "llm",
)

SPEC_KEYS: Final = ("name", "dataset", "task", "graders", "trials")
COMMAND_TASK_KEYS: Final = ("kind", "command", "env", "timeout")
HTTP_TASK_KEYS: Final = ("kind", "url", "format", "model", "headers", "answer_path", "timeout")
_COMMON_GRADER_KEYS: Final = ("kind", "name", "threshold")
GRADER_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "exact": ("case_sensitive", "strip"),
    "contains": ("value", "case_sensitive"),
    "regex": ("pattern",),
    "json_field": ("path", "value"),
    "command": ("command", "env", "timeout"),
    "llm": ("base_url", "model", "prompt", "prompt_file", "api_key_env", "timeout", "max_tokens"),
}
DEFAULT_COMMAND_TIMEOUT_S: Final = 300.0
DEFAULT_HTTP_TIMEOUT_S: Final = 60.0
DEFAULT_GRADER_TIMEOUT_S: Final = 60.0
MAX_TRIALS: Final = 100
_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class CommandTask:
    """A shell command run once per case-trial: the input on stdin and in $NEENS_ITEM_INPUT,
    the answer on stdout."""

    command: str
    env: dict[str, str]
    timeout_s: float
    kind: Literal["command"] = "command"


@dataclass(frozen=True, slots=True)
class HttpTask:
    """An agent endpoint, called as agent connections call it: the "neens" request format
    (`{"input": ...}` answered by `{"output": ...}`) or "chat" (OpenAI-style messages)."""

    url: str
    request_format: Literal["neens", "chat"]
    model: str | None
    headers: dict[str, str]
    """Values may name environment variables as ${NAME}, read when the run starts."""
    answer_path: str | None
    timeout_s: float
    kind: Literal["http"] = "http"


Task = CommandTask | HttpTask


@dataclass(frozen=True, slots=True)
class GraderDef:
    """One grader: its kind, its name (how runs are matched up) and its options as written."""

    name: str
    kind: str
    options: dict[str, Any]
    """The definition as written, without `name` (which does not change what it does)."""
    threshold: float | None


@dataclass(frozen=True, slots=True)
class Spec:
    name: str
    dataset: str | None
    task: Task
    graders: list[GraderDef]
    trials: int
    raw: dict[str, Any] = field(repr=False)
    """The spec's own JSON, as read."""


def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


def _check_keys(obj: Mapping[str, Any], allowed: tuple[str, ...], where: str, prefix: str) -> None:
    for key in obj:
        if key not in allowed:
            known = ", ".join(allowed)
            raise _fail(where, f"{prefix}{key}: unknown key (known keys: {known})")


def _string(value: Any, where: str, name: str, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"{name}: must be a non-empty string")
    return value


def _seconds(value: Any, default: float, where: str, name: str) -> float:
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not finite(value)
        or value <= 0
    ):
        raise _fail(where, f"{name}: must be a number of seconds above 0")
    return float(value)


def _env(value: Any, where: str, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(where, f"{name}: must be an object of names to strings")
    for key, item in value.items():
        if not _ENV_NAME.match(key):
            raise _fail(where, f"{name}.{key}: not a valid environment variable name")
        if not isinstance(item, str):
            raise _fail(where, f"{name}.{key}: must be a string")
    return dict(value)


def parse_task(value: Any, where: str) -> Task:
    if not isinstance(value, dict):
        raise _fail(where, 'task: must be an object such as {"kind": "command", "command": "..."}')
    kind = value.get("kind")
    if kind == "command":
        _check_keys(value, COMMAND_TASK_KEYS, where, "task.")
        command = _string(value.get("command"), where, "task.command")
        assert command is not None
        return CommandTask(
            command=command,
            env=_env(value.get("env"), where, "task.env"),
            timeout_s=_seconds(
                value.get("timeout"), DEFAULT_COMMAND_TIMEOUT_S, where, "task.timeout"
            ),
        )
    if kind == "http":
        _check_keys(value, HTTP_TASK_KEYS, where, "task.")
        url = _string(value.get("url"), where, "task.url")
        assert url is not None
        if not url.startswith(("http://", "https://")):
            raise _fail(where, "task.url: must be an http:// or https:// URL")
        request_format = value.get("format", "neens")
        if request_format not in ("neens", "chat"):
            raise _fail(where, 'task.format: must be "neens" or "chat"')
        headers = value.get("headers") or {}
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise _fail(where, "task.headers: must be an object of header names to strings")
        answer_path = _string(value.get("answer_path"), where, "task.answer_path", required=False)
        if answer_path is not None:
            from neens.domain.json_path import parse_path
            from neens.errors import Unprocessable

            try:
                parse_path(answer_path, field="task.answer_path")
            except Unprocessable as exc:
                raise _fail(where, f"task.answer_path: {exc.message}") from None
        return HttpTask(
            url=url,
            request_format=request_format,
            model=_string(value.get("model"), where, "task.model", required=False),
            headers=dict(headers),
            answer_path=answer_path,
            timeout_s=_seconds(value.get("timeout"), DEFAULT_HTTP_TIMEOUT_S, where, "task.timeout"),
        )
    raise _fail(where, 'task.kind: must be "command" or "http"')


def parse_grader(value: Any, where: str, label: str, position: int) -> GraderDef:
    """One grader definition; `label` names it in errors (`graders[1]`, `-g`)."""
    if not isinstance(value, dict):
        raise _fail(where, f'{label}: must be an object such as {{"kind": "exact"}}')
    _storable(value, where, f"{label}: ")
    kind = value.get("kind")
    if kind not in GRADER_KINDS:
        raise _fail(where, f"{label}.kind: must be one of {', '.join(GRADER_KINDS)}")
    _check_keys(value, _COMMON_GRADER_KEYS + GRADER_KEYS[kind], where, f"{label}.")
    name = value.get("name", f"{kind}-{position + 1}")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise _fail(where, f"{label}.name: must be a non-empty string of at most 200 characters")
    if (problem := name_problem(name)) is not None:
        raise _fail(where, f"{label}.name: {problem}")
    threshold = value.get("threshold")
    if threshold is not None and (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not 0 <= threshold <= 1
    ):
        raise _fail(where, f"{label}.threshold: must be a number from 0 to 1")
    options = {k: v for k, v in value.items() if k != "name"}
    from neens.exp.graders import validate_grader

    validate_grader(kind, options, where, label)
    return GraderDef(
        name=name,
        kind=kind,
        options=options,
        threshold=None if threshold is None else float(threshold),
    )


def _storable(raw: Any, where: str, label: str) -> None:
    """Refuse text no store can hold (a NUL, a lone surrogate) anywhere in `raw`, naming
    where it sits: it would be stored in the experiment's spec, and a NUL cannot even be
    passed to a command."""
    from neens.domain.storable import unstorable_text_reason

    if (problem := unstorable_text_reason(raw)) is not None:
        raise _fail(where, f"{label}cannot be stored: {problem}")


def parse_spec(raw: Any, where: str, *, default_name: str) -> Spec:
    """The spec in `raw` (parsed JSON); `where` names the file in errors."""
    if not isinstance(raw, dict):
        raise _fail(where, "the spec must be a JSON object")
    _check_keys(raw, SPEC_KEYS, where, "")
    _storable(raw, where, "")
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name.strip() or len(name) > 500:
        raise _fail(where, "name: must be a non-empty string of at most 500 characters")
    if (problem := name_problem(name)) is not None:
        raise _fail(where, f"name: {problem}")
    dataset = raw.get("dataset")
    if dataset is not None and (not isinstance(dataset, str) or not dataset.strip()):
        raise _fail(where, "dataset: must be a dataset name, a path or a Neens dataset id")
    if "task" not in raw:
        raise _fail(where, "task: missing (the command or endpoint to run on each case)")
    task = parse_task(raw["task"], where)
    graders_raw = raw.get("graders", [])
    if not isinstance(graders_raw, list):
        raise _fail(where, "graders: must be a list of grader objects")
    graders = [parse_grader(g, where, f"graders[{i}]", i) for i, g in enumerate(graders_raw)]
    return Spec(
        name=name,
        dataset=dataset,
        task=task,
        graders=graders,
        trials=parse_trials(raw.get("trials", 1), where, "trials"),
        raw=raw,
    )


def parse_trials(value: Any, where: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TRIALS:
        raise _fail(where, f"{name}: must be a whole number from 1 to {MAX_TRIALS}")
    return value


def read_spec(path: Path) -> Spec:
    """The spec in the file at `path`; its name defaults to the file's stem."""
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such spec file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot be read: {exc}") from None
    try:
        raw = loads(text, where)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not JSON: {exc}") from None
    return parse_spec(raw, where, default_name=path.stem)


def parse_cli_grader(text: str, position: int) -> GraderDef:
    """A grader given on the command line with -g '{"kind": "exact"}'."""
    try:
        raw = loads(text, f"-g {text}")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"-g {text}: not JSON: {exc}") from None
    return parse_grader(raw, "-g", f"-g {text}", position)


def with_graders(spec: Spec, extra: list[GraderDef]) -> list[GraderDef]:
    """The spec's graders followed by `extra`; two graders of one name are refused."""
    graders = [*spec.graders, *extra]
    seen: set[str] = set()
    for grader in graders:
        if grader.name in seen:
            raise ConfigError(
                f'two graders are named {grader.name!r}: give one of them another "name"'
            )
        seen.add(grader.name)
    return graders
