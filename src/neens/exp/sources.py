"""The files a run is made from: the spec, the agent's files, the graders' files and the dataset
file. A session keeps their content hashes with each run, to name what changed between two
runs; `exp run --watch` watches them, and tells a change to the graders alone (regrade) from
one to anything else (run again).

The agent's files are those its command names inside the project folder (as a resume checks
them) and those its `env` values name as relative paths there (`"PROMPT": "prompt.md"`). A
grader's files are the scripts its command names and its prompt file.

An `env` value may also name a file the agent writes (a log): `exp run --watch` tells those from
the files it reads by whether they change while a run is going (`neens.exp.watch`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from neens.exp.datasets import dataset_path, is_neens_dataset
from neens.exp.graders import command_files, grader_files
from neens.exp.spec import CommandTask, GraderDef, Spec

MISSING = "missing"
"""The hash recorded for a file that cannot be read."""


@dataclass(frozen=True, slots=True)
class Sources:
    """The files of one run, by role, each path absolute."""

    spec: Path
    agent: tuple[Path, ...]
    """The files the task's command names."""
    env: tuple[Path, ...]
    """The files the task's `env` values name (and the command does not)."""
    graders: tuple[Path, ...]
    dataset: Path | None

    def all(self) -> list[Path]:
        found: list[Path] = []
        for path in (self.spec, *self.agent, *self.env, *self.graders, self.dataset):
            if path is not None and path not in found:
                found.append(path)
        return found


def _inside(path: Path, root: Path) -> bool:
    return path.is_file() and path.is_relative_to(root)


def env_files(spec: Spec, cwd: Path) -> list[Path]:
    """The files inside the project folder that the command task's `env` values name as
    relative paths, other than those its command names."""
    if not isinstance(spec.task, CommandTask):
        return []
    named = command_files(spec.task.command, cwd)
    root = cwd.resolve()
    found: list[Path] = []
    for value in spec.task.env.values():
        if not value or "\n" in value or "\0" in value or Path(value).is_absolute():
            continue
        try:
            path = (cwd / value).resolve()
            inside = _inside(path, root)
        except (OSError, ValueError):
            continue
        if inside and path not in found and path not in named:
            found.append(path)
    return found


def sources_of(
    spec_path: Path, spec: Spec, graders: list[GraderDef], dataset: str | None, cwd: Path
) -> Sources:
    """The files a run of `spec` with these graders and dataset is made from."""
    grader_paths: list[Path] = []
    for grader in graders:
        for path in grader_files(grader, cwd):
            resolved = path.resolve()
            if resolved not in grader_paths:
                grader_paths.append(resolved)
    data = None
    if dataset is not None and not is_neens_dataset(dataset):
        data = dataset_path(dataset, cwd).resolve()
    agent = command_files(spec.task.command, cwd) if isinstance(spec.task, CommandTask) else []
    return Sources(
        spec=spec_path.resolve(),
        agent=tuple(agent),
        env=tuple(env_files(spec, cwd)),
        graders=tuple(grader_paths),
        dataset=data,
    )


def shown(path: Path, cwd: Path) -> str:
    """The path as a user names it: relative to the project folder when inside it."""
    root = cwd.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def hashes(paths: list[Path], cwd: Path) -> dict[str, str]:
    """Each file's shown path and the SHA-256 of its content (`missing` when unreadable)."""
    found: dict[str, str] = {}
    for path in paths:
        try:
            found[shown(path, cwd)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            found[shown(path, cwd)] = MISSING
    return found


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The files whose content differs, in path order; one that is new or no longer used is
    marked so."""
    names: list[str] = []
    for path in sorted(before.keys() | after.keys()):
        if path not in before:
            names.append(f"{path} (new)")
        elif path not in after:
            names.append(f"{path} (no longer used)")
        elif before[path] != after[path]:
            names.append(path)
    return names
