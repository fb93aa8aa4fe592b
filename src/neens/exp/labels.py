"""People's labels of a run's answers, for `exp compare --labels-a/--labels-b`.

A JSONL file, one label a line: `{"id": "c3", "passed": true}`, optionally with `"trial"` (0,
1, …) when a case ran several times; a case's label is the mean over its labeled trials. Every
problem names the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from neens_eval.errors import ConfigError

from neens.exp.jsonread import loads

LABEL_KEYS: Final = ("id", "passed", "trial")


def read_labels(path: Path, flag: str) -> dict[str, float]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot be read: {exc}") from None
    per_case: dict[str, list[bool]] = {}
    seen: set[tuple[str, int]] = set()
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        at = f"{flag} {path} line {number}"
        try:
            body = loads(raw, at)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{at}: not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise ConfigError(f'{at}: a label must be an object {{"id": ..., "passed": ...}}')
        for key in body:
            if key not in LABEL_KEYS:
                raise ConfigError(f"{at}: {key}: unknown key (known keys: {', '.join(LABEL_KEYS)})")
        case_id, passed, trial = body.get("id"), body.get("passed"), body.get("trial", 0)
        if not isinstance(case_id, str) or not case_id:
            raise ConfigError(f"{at}: id: must be the case's id")
        if not isinstance(passed, bool):
            raise ConfigError(f"{at}: passed: must be true or false")
        if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
            raise ConfigError(f"{at}: trial: must be a whole number from 0")
        if (case_id, trial) in seen:
            raise ConfigError(f"{at}: case {case_id!r} trial {trial} is labeled twice")
        seen.add((case_id, trial))
        per_case.setdefault(case_id, []).append(passed)
    if not per_case:
        raise ConfigError(f"{flag} {path}: has no labels")
    return {case: sum(values) / len(values) for case, values in per_case.items()}
