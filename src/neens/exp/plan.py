"""What a run will do, worked out before anything runs: the spec with the command line's
additions, the dataset read and frozen, the cases chosen, and the fingerprints a resume is
checked against (the dataset, each grader's version, the task, the agent's scripts, the trials
and the chosen cases).

Partial runs choose their cases in this order, each from what the one before left:
`--failing EXP` (the cases with a failed trial in EXP), `--case ID` (these, in dataset order),
`--first-n N` (the first N), `--sample N --seed S` (N at random, seeded, kept in dataset order).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from neens_eval.errors import ConfigError

from neens.exp.datasets import (
    Case,
    LoadedDataset,
    dataset_path,
    digest,
    is_neens_dataset,
    parse_case,
    read_jsonl,
)
from neens.exp.graders import ReadyGrader, command_files, files_digest, prepare
from neens.exp.spec import CommandTask, GraderDef, Spec, parse_cli_grader, with_graders
from neens.store.db import Database
from neens.store.experiments import ExperimentRow, TrialRow, neens_dataset_items, trials_of


@dataclass(frozen=True, slots=True)
class Selection:
    failing: str | None = None
    cases: tuple[str, ...] = ()
    first_n: int | None = None
    sample: int | None = None
    seed: int | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.failing is not None:
            body["failing"] = self.failing
        if self.cases:
            body["cases"] = list(self.cases)
        if self.first_n is not None:
            body["firstN"] = self.first_n
        if self.sample is not None:
            body["sample"] = self.sample
            body["seed"] = self.seed
        return body


@dataclass(frozen=True, slots=True)
class Plan:
    spec: Spec
    graders: list[ReadyGrader]
    dataset: LoadedDataset
    cases: list[Case]
    """The chosen cases, in run order."""
    trials: int
    task_hash: str
    agent_files: dict[str, str]
    selection: Selection
    cwd: Path = field(repr=False)
    seq: int = 1
    """Attempts a failing case-trial gets (--seq); 1: no retry with feedback."""

    @property
    def planned(self) -> int:
        return len(self.cases) * self.trials

    def graders_json(self) -> list[dict[str, str]]:
        return [{"name": g.name, "kind": g.kind, "version": g.version} for g in self.graders]

    def spec_json(self) -> dict[str, Any]:
        return {
            "name": self.spec.name,
            "dataset": self.dataset.ref,
            "task": self.spec.raw["task"],
            "graders": [{"name": g.name, **g.definition.options} for g in self.graders],
            "trials": self.trials,
            "seq": self.seq_json(),
        }

    def seq_json(self) -> dict[str, Any] | None:
        return {"attempts": self.seq, "feedback": "reasons"} if self.seq > 1 else None

    def row(self, experiment_id: str, concurrency: int, created_at: datetime) -> ExperimentRow:
        return ExperimentRow(
            id=experiment_id,
            kind="run",
            name=self.spec.name,
            spec=self.spec_json(),
            dataset_ref=self.dataset.ref,
            dataset_version_id=self.dataset.version_id,
            dataset_hash=self.dataset.digest,
            task_hash=self.task_hash,
            agent_files=self.agent_files,
            graders=self.graders_json(),
            cases=[case.to_json() for case in self.cases],
            selection=self.selection.to_json(),
            failing_of=self.selection.failing,
            trials=self.trials,
            planned=self.planned,
            concurrency=concurrency,
            created_at=created_at,
        )


async def load_dataset(db: Database, ref: str, cwd: Path) -> LoadedDataset:
    if not is_neens_dataset(ref):
        path = dataset_path(ref, cwd)
        shown = str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)
        return LoadedDataset(ref=shown, cases=read_jsonl(path, ref))
    found = await neens_dataset_items(db, ref)
    if found is None:
        raise ConfigError(
            f"dataset {ref}: no such Neens dataset or version in this store, or it has no "
            "version yet (the server's Datasets page and GET /datasets list them)"
        )
    version_id, items = found
    cases: list[Case] = []
    seen: set[str] = set()
    for position, item in enumerate(items):
        metadata = item.metadata if isinstance(item.metadata, dict) else {}
        case_id = metadata.get("id") if isinstance(metadata.get("id"), str) else item.id
        body: dict[str, Any] = {"id": case_id, "input": item.input}
        if item.expected_output is not None:
            body["expected"] = item.expected_output
        for key in ("kind", "group"):
            if isinstance(metadata.get(key), str):
                body[key] = metadata[key]
        case = parse_case(body, f"dataset {ref} item {position}")
        if case.id in seen:
            raise ConfigError(f"dataset {ref} item {position}: duplicate case id {case.id!r}")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise ConfigError(f"dataset {ref}: version {version_id} has no items")
    return LoadedDataset(ref=ref, cases=cases, version_id=version_id)


def failing_cases(trials: list[TrialRow]) -> set[str]:
    """The cases with at least one graded case-trial that failed."""
    return {t.case_id for t in trials if t.passed is False}


async def choose(
    db: Database, cases: list[Case], selection: Selection, failing_id: str | None
) -> list[Case]:
    chosen = cases
    if failing_id is not None:
        failing = failing_cases(await trials_of(db, failing_id, grades=False))
        chosen = [case for case in chosen if case.id in failing]
    if selection.cases:
        known = {case.id for case in chosen}
        for wanted in selection.cases:
            if wanted not in known:
                where = "among the failing cases of --failing" if failing_id else "in the dataset"
                raise ConfigError(f"--case {wanted}: no such case {where}")
        wanted_ids = set(selection.cases)
        chosen = [case for case in chosen if case.id in wanted_ids]
    if selection.first_n is not None:
        chosen = chosen[: selection.first_n]
    if selection.sample is not None and selection.sample < len(chosen):
        picked = set(random.Random(selection.seed).sample(range(len(chosen)), selection.sample))
        chosen = [case for index, case in enumerate(chosen) if index in picked]
    if not chosen:
        raise ConfigError("no cases to run: the selection (--failing, --case, ...) left none")
    return chosen


async def make_plan(
    db: Database,
    spec: Spec,
    *,
    cwd: Path,
    dataset: str | None,
    cli_graders: list[str],
    trials: int | None,
    selection: Selection,
    failing_id: str | None,
    seq: int = 1,
) -> Plan:
    """Everything a run needs, checked; ConfigError for the first problem found."""
    ready = ready_graders(spec, cli_graders, cwd)
    ref = dataset or spec.dataset
    if ref is None:
        raise ConfigError('dataset: none given: add "dataset" to the spec or pass -d NAME')
    loaded = await load_dataset(db, ref, cwd)
    chosen = await choose(db, loaded.cases, selection, failing_id)
    agent_files: dict[str, str] = {}
    if isinstance(spec.task, CommandTask):
        try:
            agent_files = files_digest(command_files(spec.task.command, cwd), cwd)
        except OSError as exc:
            raise ConfigError(f"task.command: a file it names cannot be read: {exc}") from None
    return Plan(
        spec=spec,
        graders=ready,
        dataset=loaded,
        cases=chosen,
        trials=trials if trials is not None else spec.trials,
        task_hash=digest(spec.raw["task"]),
        agent_files=agent_files,
        selection=selection,
        cwd=cwd,
        seq=seq,
    )


def ready_graders(spec: Spec, cli_graders: list[str], cwd: Path) -> list[ReadyGrader]:
    """The spec's graders and those of -g, checked, read and versioned."""
    extra: list[GraderDef] = [
        parse_cli_grader(text, len(spec.graders) + i) for i, text in enumerate(cli_graders)
    ]
    definitions = with_graders(spec, extra)
    if not definitions:
        raise ConfigError(
            'no graders: add "graders" to the spec or give one with -g \'{"kind": "exact"}\''
        )
    return [
        prepare(g, cwd, "-g" if i >= len(spec.graders) else "spec", _label(g, i, spec))
        for i, g in enumerate(definitions)
    ]


def _label(grader: GraderDef, index: int, spec: Spec) -> str:
    return f"graders[{index}]" if index < len(spec.graders) else f"-g {grader.name}"


KIND_NAMES = {"run": "a run", "aa": "an A/A run", "ab": "an A/B run", "regrade": "a regrade"}


def resume_problems(stored: ExperimentRow, plan: Plan, *, kind: str = "run") -> list[str]:
    """What changed between the stored experiment and this command, each named; empty when it
    may be resumed. `kind` is the kind of experiment the command makes ("run" or "aa")."""
    problems: list[str] = []
    if stored.kind != kind:
        wanted, found = KIND_NAMES.get(kind, kind), KIND_NAMES.get(stored.kind, stored.kind)
        problems.append(f"it is not {wanted} (it is {found})")
    if stored.dataset_hash != plan.dataset.digest or stored.dataset_ref != plan.dataset.ref:
        where = plan.dataset.ref
        if stored.dataset_ref != plan.dataset.ref:
            problems.append(f"the dataset changed ({stored.dataset_ref} → {where})")
        else:
            problems.append(f"the dataset {where} changed since the run started")
    before = {g["name"]: g for g in stored.graders}
    after = {g["name"]: g for g in plan.graders_json()}
    for name in before.keys() - after.keys():
        problems.append(f"the grader {name} was removed")
    for name in after.keys() - before.keys():
        problems.append(f"the grader {name} was added")
    for name in before.keys() & after.keys():
        if before[name]["version"] != after[name]["version"]:
            problems.append(
                f"the grader {name} changed (version {before[name]['version']} → "
                f"{after[name]['version']})"
            )
    if stored.task_hash != plan.task_hash:
        problems.append("the task changed")
    old_files, new_files = stored.agent_files, plan.agent_files
    for path in sorted(old_files.keys() | new_files.keys()):
        if old_files.get(path) != new_files.get(path):
            state = (
                "changed"
                if path in old_files and path in new_files
                else ("is new" if path in new_files else "is no longer named")
            )
            problems.append(f"the agent script {path} {state}")
    if stored.spec.get("seq") != plan.seq_json():
        before_seq = (stored.spec.get("seq") or {}).get("attempts", 1)
        problems.append(f"--seq changed ({before_seq} → {plan.seq})")
    if stored.trials != plan.trials:
        problems.append(f"the trials changed ({stored.trials} → {plan.trials})")
    stored_ids = [c["id"] for c in stored.cases]
    if stored_ids != [c.id for c in plan.cases] and stored.dataset_hash == plan.dataset.digest:
        problems.append("the chosen cases changed (--failing, --case, --first-n, --sample, --seed)")
    return sorted(set(problems), key=problems.index)
