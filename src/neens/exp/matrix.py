"""A matrix spec: one spec, and the cells made from it by setting parts of it.

    {"name": "shout-matrix", "dataset": "qa", "task": {...}, "graders": [...],
     "matrix": {
       "model": {"path": "/task/env/MODEL",
                 "values": [{"small": "stub-small"}, {"big": "stub-big"}]},
       "prompt": {"path": "/task/env/PROMPT",
                  "values": [{"plain": "plain.md"}, {"shout": "shout.md"}]}},
     "baseline": {"model": "small", "prompt": "plain"}}

`matrix` makes every combination of its axes' values; each axis is a JSON Pointer (RFC 6901)
into the spec and a list of named values (`{"name": value}`, or a bare string, number or
boolean, named by its text). Cells are named `axis=value,axis=value` in axis order, the last
axis changing fastest. `variants` names the cells by hand instead: `{"name": {pointer: value,
...}, ...}`. `baseline` names the cell the others are compared with (an object of axis → value
name, a cell name, or a variant's name); without it, the first cell is the baseline.

A cell may change only what runs on each case, `/task/…`, and how often, `/trials`. The
dataset, the graders and the name are the matrix's own: a cell that changed them would not be
comparable with the baseline. Any other pointer is refused before anything runs, naming it,
and every cell's spec is read as strictly as a spec file (`exp/spec.py`).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any, Final, TypeVar

from neens_eval.errors import ConfigError

from neens.exp.jsonread import loads
from neens.exp.spec import Spec, parse_spec

Unit = TypeVar("Unit")
"""What `interleaved` orders: a case, or a recorded call."""

MATRIX_KEYS: Final = ("matrix", "variants", "baseline")
AXIS_KEYS: Final = ("path", "values")
MAX_CELLS: Final = 100
MAX_NAME: Final = 200
MAX_CELL_NAME: Final = 190
"""A cell's experiment is named NAME[CELL], at most 500 characters with a name of 300."""
ALLOWED: Final = "a cell may change only /task/… and /trials"


@dataclass(frozen=True, slots=True)
class Change:
    pointer: str
    value: Any

    def text(self, limit: int = 60) -> str:
        shown = json.dumps(self.value, ensure_ascii=False)
        if len(shown) > limit:
            shown = shown[: limit - 1] + "…"
        return f"{self.pointer} = {shown}"


@dataclass(frozen=True, slots=True)
class Cell:
    position: int
    name: str
    changes: tuple[Change, ...]
    spec: Spec
    """The cell's own spec: the matrix spec with its changes made."""
    baseline: bool


@dataclass(frozen=True, slots=True)
class MatrixSpec:
    name: str
    raw: dict[str, Any]
    """The spec as written, matrix keys included."""
    cells: tuple[Cell, ...]
    axes: tuple[str, ...]
    """The axes' names in order; empty for `variants`."""

    @property
    def baseline(self) -> Cell:
        return next(c for c in self.cells if c.baseline)

    def cell(self, name: str) -> Cell | None:
        return next((c for c in self.cells if c.name == name), None)


def is_matrix(raw: Any) -> bool:
    """Whether parsed JSON is a matrix spec (it has `matrix`, `variants` or `baseline`)."""
    return isinstance(raw, dict) and any(key in raw for key in MATRIX_KEYS)


def read_raw(path: Path) -> Any:
    """The JSON in the spec file, or None when it cannot be read as JSON (`read_spec` then
    says why)."""
    try:
        return loads(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ConfigError):
        return None


def pointer_tokens(pointer: str, where: str, label: str) -> list[str]:
    """The reference tokens of a JSON Pointer (RFC 6901): `~1` is `/`, `~0` is `~`."""
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise ConfigError(
            f"{where}: {label}: {pointer!r}: not a JSON Pointer (one starts with /, as in "
            "/task/env/MODEL)"
        )
    tokens = []
    for raw in pointer[1:].split("/"):
        bad = raw.replace("~0", "").replace("~1", "")
        if "~" in bad:
            raise ConfigError(
                f"{where}: {label}: {pointer}: ~ must be followed by 0 or 1 in a JSON Pointer"
            )
        tokens.append(raw.replace("~1", "/").replace("~0", "~"))
    return tokens


def check_allowed(pointer: str, tokens: Sequence[str], where: str, label: str) -> None:
    if (tokens[0] == "task" and len(tokens) >= 2) or list(tokens) == ["trials"]:
        return
    raise ConfigError(f"{where}: {label}: {pointer}: {ALLOWED}")


def set_pointer(doc: Any, tokens: Sequence[str], value: Any, pointer: str, where: str) -> None:
    """Set the place `tokens` names in `doc` to `value`, as JSON Patch's "add" does: the place's
    parent must exist; a missing key of an object is added."""
    target = doc
    for depth, token in enumerate(tokens[:-1]):
        if isinstance(target, dict) and token in target:
            target = target[token]
        elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
            target = target[int(token)]
        else:
            parent = "/" + "/".join(tokens[: depth + 1])
            raise ConfigError(f"{where}: {pointer}: the spec has no {parent} to set it in")
    last = tokens[-1]
    if isinstance(target, dict):
        target[last] = value
    elif isinstance(target, list) and (
        last == "-" or (last.isdigit() and (last == "0" or not last.startswith("0")))
    ):
        if last == "-" or int(last) == len(target):
            target.append(value)
        elif int(last) < len(target):
            target[int(last)] = value
        else:
            raise ConfigError(f"{where}: {pointer}: index {last} is past the list's end")
    else:
        raise ConfigError(f"{where}: {pointer}: its parent is not an object or a list")


def _name(value: Any, where: str, label: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
        raise ConfigError(
            f"{where}: {label}: must be a non-empty name of at most {MAX_NAME} characters"
        )
    return value


def _axis_name(value: str, where: str, label: str) -> str:
    _name(value, where, label)
    if "=" in value or "," in value:
        raise ConfigError(
            f"{where}: {label}: {value!r}: a name in a matrix may not hold = or , (cells are "
            "named axis=value,axis=value)"
        )
    return value


def _values(axis: str, raw: Any, where: str) -> list[tuple[str, Any]]:
    label = f"matrix.{axis}.values"
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            f'{where}: {label}: must be a non-empty list of named values, e.g. [{{"small": '
            '"stub-small"}, {"big": "stub-big"}]'
        )
    values: list[tuple[str, Any]] = []
    for index, item in enumerate(raw):
        where_item = f"{label}[{index}]"
        if isinstance(item, dict):
            if len(item) != 1:
                raise ConfigError(
                    f'{where}: {where_item}: must name one value, as {{"name": value}}'
                )
            name, value = next(iter(item.items()))
        elif isinstance(item, str | int | float | bool):
            name, value = (item if isinstance(item, str) else json.dumps(item)), item
        else:
            raise ConfigError(
                f'{where}: {where_item}: must be {{"name": value}}, or a string or number'
            )
        _axis_name(name, where, where_item)
        if any(name == seen for seen, _ in values):
            raise ConfigError(f"{where}: {where_item}: two values of {axis} are named {name!r}")
        values.append((name, value))
    return values


def _matrix_cells(raw: Any, where: str) -> tuple[list[str], list[tuple[str, list[Change]]]]:
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(
            f'{where}: matrix: must be an object of axes, e.g. {{"model": {{"path": '
            '"/task/env/MODEL", "values": [...]}}'
        )
    axes: list[tuple[str, str, list[str], list[tuple[str, Any]]]] = []
    for axis, body in raw.items():
        _axis_name(axis, where, f"matrix.{axis}")
        if not isinstance(body, dict):
            raise ConfigError(f'{where}: matrix.{axis}: must be {{"path": ..., "values": [...]}}')
        for key in body:
            if key not in AXIS_KEYS:
                raise ConfigError(
                    f"{where}: matrix.{axis}.{key}: unknown key (known keys: path, values)"
                )
        if "path" not in body:
            raise ConfigError(f"{where}: matrix.{axis}.path: missing (a JSON Pointer)")
        pointer = body["path"]
        tokens = pointer_tokens(pointer, where, f"matrix.{axis}.path")
        check_allowed(pointer, tokens, where, f"matrix.{axis}.path")
        for other, other_pointer, other_tokens, _ in axes:
            shorter, longer = sorted((tokens, other_tokens), key=len)
            if longer[: len(shorter)] == shorter:
                raise ConfigError(
                    f"{where}: matrix.{axis}.path: {pointer} overlaps matrix.{other}.path "
                    f"{other_pointer}: give each axis a place of its own"
                )
        axes.append((axis, pointer, tokens, _values(axis, body.get("values"), where)))
    count = 1
    for _, _, _, values in axes:
        count *= len(values)
    if count > MAX_CELLS:
        raise ConfigError(f"{where}: matrix: {count} cells; at most {MAX_CELLS} may run together")
    cells = []
    for combination in product(*(values for _, _, _, values in axes)):
        name = ",".join(
            f"{axis}={value_name}"
            for (axis, _, _, _), (value_name, _) in zip(axes, combination, strict=True)
        )
        changes = [
            Change(pointer, value)
            for (_, pointer, _, _), (_, value) in zip(axes, combination, strict=True)
        ]
        cells.append((name, changes))
    return [axis for axis, _, _, _ in axes], cells


def _variant_cells(raw: Any, where: str) -> list[tuple[str, list[Change]]]:
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(
            f'{where}: variants: must be an object of cells, e.g. {{"plain": {{}}, "shout": '
            '{"/task/env/PROMPT": "shout.md"}}'
        )
    if len(raw) > MAX_CELLS:
        raise ConfigError(
            f"{where}: variants: {len(raw)} cells; at most {MAX_CELLS} may run together"
        )
    cells = []
    for name, body in raw.items():
        _name(name, where, f"variants.{name}")
        if not isinstance(body, dict):
            raise ConfigError(
                f"{where}: variants.{name}: must be an object of JSON Pointers to values"
            )
        changes = []
        for pointer, value in body.items():
            tokens = pointer_tokens(pointer, where, f"variants.{name}")
            check_allowed(pointer, tokens, where, f"variants.{name}")
            changes.append(Change(pointer, value))
        cells.append((name, changes))
    return cells


def _baseline(raw: Any, axes: list[str], names: list[str], where: str) -> str:
    if raw is None:
        return names[0]
    if isinstance(raw, dict) and axes:
        for axis in raw:
            if axis not in axes:
                raise ConfigError(f"{where}: baseline.{axis}: no such axis in matrix")
        missing = [axis for axis in axes if axis not in raw]
        if missing:
            raise ConfigError(f"{where}: baseline: give a value of every axis ({missing[0]})")
        if not all(isinstance(raw[axis], str) for axis in axes):
            raise ConfigError(f"{where}: baseline: each axis' value must be a value's name")
        name = ",".join(f"{axis}={raw[axis]}" for axis in axes)
    elif isinstance(raw, str):
        name = raw
    elif axes:
        raise ConfigError(
            f"{where}: baseline: must name a cell: an object of each axis' value name, e.g. "
            '{"model": "small"}, or the cell\'s name'
        )
    else:
        raise ConfigError(f"{where}: baseline: must be the name of one of the variants")
    if name not in names:
        raise ConfigError(f"{where}: baseline: no cell is named {name!r}")
    return name


def parse_matrix(raw: dict[str, Any], where: str, *, default_name: str) -> MatrixSpec:
    """The matrix in `raw` (parsed JSON, `is_matrix`), every cell's spec read and checked."""
    if "matrix" in raw and "variants" in raw:
        raise ConfigError(f"{where}: matrix and variants: give one or the other")
    axes: list[str] = []
    if "matrix" in raw:
        axes, made = _matrix_cells(raw["matrix"], where)
    elif "variants" in raw:
        made = _variant_cells(raw["variants"], where)
    else:
        raise ConfigError(
            f"{where}: baseline: only in a matrix spec, with matrix or variants to compare it with"
        )
    names = [name for name, _ in made]
    for cell_name in names:
        if len(cell_name) > MAX_CELL_NAME:
            raise ConfigError(
                f"{where}: cell {cell_name[:40]}…: its name is longer than {MAX_CELL_NAME} "
                "characters; give the axes, values or variants shorter names"
            )
    baseline = _baseline(raw.get("baseline"), axes, names, where)
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name.strip() or len(name) > 300:
        raise ConfigError(f"{where}: name: must be a non-empty string of at most 300 characters")
    base = {key: value for key, value in raw.items() if key not in MATRIX_KEYS}
    cells = []
    for position, (cell_name, changes) in enumerate(made):
        doc = copy.deepcopy(base)
        cell_where = f"{where}: cell {cell_name}"
        for change in changes:
            tokens = pointer_tokens(change.pointer, where, "path")
            set_pointer(doc, tokens, copy.deepcopy(change.value), change.pointer, cell_where)
        doc["name"] = f"{name}[{cell_name}]"
        spec = parse_spec(doc, cell_where, default_name=doc["name"])
        cells.append(Cell(position, cell_name, tuple(changes), spec, cell_name == baseline))
    return MatrixSpec(name=name, raw=raw, cells=tuple(cells), axes=tuple(axes))


def read_matrix(path: Path, *, trials: int | None = None) -> MatrixSpec:
    """The matrix spec in the file; `trials` (--trials) replaces the spec's own `trials`, and a
    cell that sets /trials keeps its own."""
    raw = read_raw(path)
    if not is_matrix(raw):
        raise ConfigError(f"{path}: not a matrix spec (it has no matrix or variants)")
    assert isinstance(raw, dict)
    if trials is not None:
        raw = {**raw, "trials": trials}
    return parse_matrix(raw, str(path), default_name=path.stem)


def interleaved(
    cell_trials: Sequence[int], cases: Sequence[Unit], seed: int
) -> list[tuple[int, Unit, int]]:
    """Every (cell index, case, trial) in run order: trial by trial, the cases in order, and for
    each case-trial every cell that runs it, next to each other in a seeded random order, so
    that drift during the run (a provider's latency, a cache warming) hits every cell alike. A
    resume makes the same list and leaves out what was saved. `exp aa` and `exp replay` order
    their two runs with it too (two cells, the same trials)."""
    order = random.Random(seed)
    todo: list[tuple[int, Unit, int]] = []
    for trial in range(max(cell_trials, default=0)):
        for case in cases:
            group = [index for index, count in enumerate(cell_trials) if trial < count]
            order.shuffle(group)
            todo.extend((index, case, trial) for index in group)
    return todo
