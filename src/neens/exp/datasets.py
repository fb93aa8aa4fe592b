"""The cases of an experiment: a JSONL file, or a Neens dataset version frozen at the start.

A dataset is named the way `-d` takes it:

- `NAME` reads `datasets/NAME.jsonl` in the current folder;
- a path (anything with a `/`, or ending in `.jsonl`) reads that file;
- `ds_…` reads a Neens dataset's golden version (its newest version when none is golden), and
  `dsv_…` that exact version, from the same store the experiment is saved in.

Each JSONL line is one case, `{"id", "input", "expected"?, "kind"?, "group"?}`: `id` a
non-empty string, unique in the file; `input` and `expected` any JSON value (a string is passed
as it is, anything else as its JSON text). `id`, `kind` and `group`, printed in reports, hold no
control characters. Every problem names the file and line. A Neens dataset item's case id is its
metadata's `id` when that is a string, else the item's `dsi_` id; `kind` and `group` come from
its metadata too.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError

from neens.exp.jsonread import loads
from neens.exp.table import control_problem

CASE_KEYS: Final = ("id", "input", "expected", "kind", "group")
MAX_CASE_ID_CHARS: Final = 500


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    input: Any
    expected: Any = None
    """None when the case has no expected answer."""
    kind: str | None = None
    group: str | None = None

    @property
    def input_text(self) -> str:
        return _text(self.input)

    @property
    def expected_text(self) -> str | None:
        return None if self.expected is None else _text(self.expected)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.id, "input": self.input}
        for key in ("expected", "kind", "group"):
            if getattr(self, key) is not None:
                body[key] = getattr(self, key)
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Case:
        return cls(
            id=body["id"],
            input=body["input"],
            expected=body.get("expected"),
            kind=body.get("kind"),
            group=body.get("group"),
        )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class LoadedDataset:
    ref: str
    """The dataset as named (a path, or a Neens id)."""
    cases: list[Case]
    version_id: str | None = None
    """The Neens dataset version read, when it was one."""

    @property
    def digest(self) -> str:
        """SHA-256 of the cases' canonical JSON: a changed case changes it."""
        return digest([case.to_json() for case in self.cases])


def digest(value: Any) -> str:
    """SHA-256 of `value` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def is_neens_dataset(ref: str) -> bool:
    return ref.startswith(("ds_", "dsv_")) and "/" not in ref


def dataset_path(ref: str, cwd: Path) -> Path:
    """Where the JSONL file `ref` names."""
    if "/" in ref or ref.endswith(".jsonl"):
        return cwd / ref
    return cwd / "datasets" / f"{ref}.jsonl"


def read_jsonl(path: Path, where: str) -> list[Case]:
    """The cases of a JSONL file; ConfigError naming the line for any bad one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"dataset {where}: no such file {path}") from None
    except OSError as exc:
        raise ConfigError(f"dataset {where}: cannot be read: {exc}") from None
    cases: list[Case] = []
    first_line: dict[str, int] = {}
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        at = f"{path} line {number}"
        try:
            body = loads(raw, at)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{at}: not JSON: {exc}") from None
        case = parse_case(body, at)
        if case.id in first_line:
            raise ConfigError(
                f"{at}: duplicate case id {case.id!r} (first on line {first_line[case.id]})"
            )
        first_line[case.id] = number
        cases.append(case)
    if not cases:
        raise ConfigError(f"dataset {where}: {path} has no cases")
    return cases


def parse_case(body: Any, at: str) -> Case:
    if not isinstance(body, dict):
        raise ConfigError(f'{at}: a case must be a JSON object {{"id": ..., "input": ...}}')
    for key in body:
        if key not in CASE_KEYS:
            raise ConfigError(f"{at}: {key}: unknown key (known keys: {', '.join(CASE_KEYS)})")
    case_id = body.get("id")
    if case_id is None:
        raise ConfigError(f"{at}: id: the case has no id")
    if not isinstance(case_id, str) or not case_id.strip() or len(case_id) > MAX_CASE_ID_CHARS:
        raise ConfigError(
            f"{at}: id: must be a non-empty string of at most {MAX_CASE_ID_CHARS} characters"
        )
    # Ids, kinds and groups are printed in reports: a line break or a terminal's escape code
    # in one could forge the lines around it.
    if (problem := control_problem(case_id)) is not None:
        raise ConfigError(f"{at}: id: {problem}")
    if "input" not in body:
        raise ConfigError(f"{at}: input: case {case_id!r} has no input")
    for key in ("kind", "group"):
        if body.get(key) is not None and not isinstance(body[key], str):
            raise ConfigError(f"{at}: {key}: must be a string")
        if body.get(key) is not None and (problem := control_problem(body[key])) is not None:
            raise ConfigError(f"{at}: {key}: {problem}")
    from neens.domain.storable import unstorable_text_reason

    if (problem := unstorable_text_reason(body)) is not None:
        raise ConfigError(f"{at}: case {case_id!r} cannot be stored: {problem}")
    return Case(
        id=case_id,
        input=body["input"],
        expected=body.get("expected"),
        kind=body.get("kind"),
        group=body.get("group"),
    )
