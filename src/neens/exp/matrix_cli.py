"""`neens exp run matrix.json`: every cell of a matrix spec (`neens.exp.matrix`) run
interleaved, each compared with the baseline cell, Holm-adjusted over the cells.

Each cell is an experiment of its own (kind "run", named `NAME[CELL]`), so `exp compare`,
`exp list` and `exp regrade` work on it as on any run; the matrix (`mx_…`) links them. The
case-trials run case by case across the cells (`matrix.interleaved`), and each is saved as it
finishes, as `exp run` saves them: `--resume [MX]` makes the same list again and runs only what
no cell saved, refusing, naming what changed, when a cell's dataset, graders, task, agent
script or trials did.

`--reuse baseline|all` copies into the new cells' experiments the finished case-trials of
earlier runs with the identical config (dataset, task, agent scripts, graders and their
versions, --seq) that started within `--reuse-max-age` (default 7d); only what is left runs.
The output says what was copied, from where, and that it did not run next to the rest.

Exit codes: 0 for the report (and for --plan); 2 for bad input, nothing run or stored; 130
when interrupted (the finished case-trials are kept).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError
from ulid import ULID

from neens.domain.baseline import parse_range
from neens.domain.exp_compare import Side, compare
from neens.domain.exp_matrix import HOLM_METHOD, CellResult, judge_cells
from neens.exp.claims import claimed
from neens.exp.compare import load_side, pp_text, rate_text
from neens.exp.matrix import Cell, MatrixSpec, interleaved, is_matrix, read_matrix, read_raw
from neens.exp.matrix_args import DEFAULT_REUSE_MAX_AGE
from neens.exp.plan import Plan, make_plan, resume_problems
from neens.exp.progress import RunProgress
from neens.exp.run_command import new_experiment_id, selection_of, task_headers
from neens.exp.runner import Caller, RunLimits, run_trials
from neens.exp.store import find_by_id, open_store
from neens.exp.table import table
from neens.exp.tasks import TaskContext
from neens.store.db import Database
from neens.store.experiment_matrices import (
    MatrixCellRow,
    MatrixRow,
    create_matrix,
    finish_matrix,
    finished_trials_since,
    get_matrix,
    latest_unfinished_matrix,
    matrix_ids_starting_with,
    same_config_runs,
    set_reused,
)
from neens.store.experiments import (
    ExperimentRow,
    TrialRow,
    finish_experiment,
    get_experiment,
    save_trials,
    tally,
    trials_of,
)
from neens.store.types import utcnow

ORDER_SEED: Final = 0
"""The seed of the order of the cells within each case-trial; stored with the matrix."""


def is_matrix_file(path: Path) -> bool:
    return is_matrix(read_raw(path))


def _check_flags(args: argparse.Namespace) -> timedelta:
    """Flags that cannot go with a matrix, or without the one they need; the reuse age."""
    refused = (
        ("--watch", args.watch, "run the matrix, then watch a cell's own spec"),
        ("--series", args.series is not None, "a round of a series is one run"),
        ("--failing", args.failing is not None, "regression to the mean would favour every cell"),
    )
    for flag, given, why in refused:
        if given:
            raise ConfigError(f"{flag}: not with a matrix spec ({why})")
    for flag in ("eps", "delta", "gate"):
        if getattr(args, flag) is not None:
            raise ConfigError(f"--{flag}: only with --series NAME, which a matrix does not take")
    if args.retry_errors and args.resume is None:
        raise ConfigError(
            "--retry-errors: only with --resume (it runs a stored run's errors again)"
        )
    if args.seed is not None and args.sample is None:
        raise ConfigError("--seed: only with --sample N (it seeds the sample)")
    if args.feedback is not None and args.seq < 2:
        raise ConfigError("--feedback: only with --seq N of 2 or more (the attempts it feeds)")
    if args.reuse_max_age is not None and args.reuse is None:
        raise ConfigError("--reuse-max-age: only with --reuse baseline|all")
    if args.reuse is not None and args.resume is not None:
        raise ConfigError(
            "--reuse: not with --resume (a resumed matrix keeps what it copied when it started)"
        )
    try:
        return parse_range(args.reuse_max_age or DEFAULT_REUSE_MAX_AGE)
    except ValueError as exc:
        raise ConfigError(f"--reuse-max-age {args.reuse_max_age}: {exc}") from None


def chosen_cells(matrix: MatrixSpec, wanted: list[str]) -> list[Cell]:
    """The cells --cell names, and the baseline, in matrix order (every cell without --cell)."""
    if not wanted:
        return list(matrix.cells)
    for name in wanted:
        if matrix.cell(name) is None:
            known = ", ".join(c.name for c in matrix.cells[:10])
            more = ", …" if len(matrix.cells) > 10 else ""
            raise ConfigError(f"--cell {name}: no such cell (the cells: {known}{more})")
    names = set(wanted)
    return [c for c in matrix.cells if c.baseline or c.name in names]


async def _cell_plans(
    db: Database, args: argparse.Namespace, cwd: Path, cells: list[Cell]
) -> list[Plan]:
    selection = selection_of(args)
    plans = []
    for cell in cells:
        try:
            plan = await make_plan(
                db,
                cell.spec,
                cwd=cwd,
                dataset=args.dataset,
                cli_graders=args.grader,
                trials=None,
                selection=selection,
                failing_id=None,
                seq=args.seq,
            )
        except ConfigError as exc:
            raise ConfigError(f"cell {cell.name}: {exc}") from None
        plans.append(plan)
    return plans


@dataclass(frozen=True, slots=True)
class Reusable:
    trials: list[TrialRow]
    sources: list[str]

    def summary(self) -> dict[str, Any]:
        oldest = min((t.started_at for t in self.trials), default=None)
        return {
            "trials": len(self.trials),
            "from": self.sources,
            "oldestStartedAt": None if oldest is None else oldest.isoformat(),
        }


async def reusable(db: Database, plan: Plan, since: datetime, exclude: set[str]) -> Reusable:
    """The finished case-trials of earlier runs with this cell's exact config (dataset, task,
    agent scripts, graders and their versions, --seq) that started at `since` or later, newest
    run first, one for each of the plan's case-trials at most."""
    wanted = {(case.id, trial) for case in plan.cases for trial in range(plan.trials)}
    graders = {g["name"]: g["version"] for g in plan.graders_json()}
    taken: dict[tuple[str, int], TrialRow] = {}
    sources: list[str] = []
    for row in await same_config_runs(
        db, dataset_hash=plan.dataset.digest, task_hash=plan.task_hash, exclude=exclude
    ):
        if (
            row.agent_files != plan.agent_files
            or {g["name"]: g["version"] for g in row.graders} != graders
            or row.spec.get("seq") != plan.seq_json()
        ):
            continue
        found = 0
        for trial in await finished_trials_since(db, row.id, since):
            key = (trial.case_id, trial.trial)
            if key in wanted and key not in taken:
                taken[key] = trial
                found += 1
        if found:
            sources.append(row.id)
        if len(taken) == len(wanted):
            break
    return Reusable(list(taken.values()), sources)


def _reused_cells(cells: list[Cell], policy: str | None) -> set[int]:
    if policy is None:
        return set()
    return {c.position for c in cells if policy == "all" or c.baseline}


async def matrix_command(args: argparse.Namespace, holder: dict[str, Any]) -> int:
    max_age = _check_flags(args)
    cwd = Path.cwd()
    matrix = read_matrix(Path(args.spec), trials=args.trials)
    async with open_store(args.database_url) as db:
        stored: MatrixRow | None = None
        wanted = list(args.cell)
        if args.resume is not None:
            stored = await _find_matrix(db, args.resume, matrix)
            if not wanted:
                # A chosen cell no longer in the spec is named by the resume check.
                chosen = stored.spec.get("chosen") or []
                wanted = [name for name in chosen if matrix.cell(name) is not None]
        cells = chosen_cells(matrix, wanted)
        plans = await _cell_plans(db, args, cwd, cells)
        since = utcnow() - max_age
        if args.plan:
            reusable_counts = None
            if args.reuse is not None:
                reusable_counts = {
                    cell.position: len((await reusable(db, plan, since, set())).trials)
                    for cell, plan in zip(cells, plans, strict=True)
                    if cell.position in _reused_cells(cells, args.reuse)
                }
            _print_plan(matrix, cells, plans, reusable_counts, args)
            return 0
        headers = [task_headers(plan) for plan in plans]
        if stored is not None:
            rows = await _check_resume(db, stored, matrix, cells, plans, args)
            matrix_id = stored.id
            seed = int(stored.spec.get("seed", ORDER_SEED))
            reused_info = {c.position: c.reused for c in stored.cells if c.reused}
        else:
            matrix_id = f"mx_{ULID()}"
            seed = ORDER_SEED
            rows = await _create(db, matrix_id, matrix, cells, plans, args)
            holder["matrix"] = matrix_id
            reused_info = await _copy_reused(db, matrix_id, cells, plans, rows, args.reuse, since)
        holder["matrix"] = matrix_id
        # What is left is read only once every cell's run is ours: another process resuming the
        # matrix at the same time would otherwise run the same case-trials.
        async with claimed(db, [row.id for row in rows], resuming=stored is not None):
            kept: list[set[tuple[str, int]]] = []
            for row in rows:
                kept.append(
                    {
                        (t.case_id, t.trial)
                        for t in await trials_of(db, row.id, grades=False)
                        if not (args.retry_errors and t.status == "error")
                    }
                )
            todo = [
                (index, case, trial)
                for index, case, trial in interleaved(
                    [p.trials for p in plans], plans[0].cases, seed
                )
                if (case.id, trial) not in kept[index]
            ]
            callers = [
                Caller(plan, TaskContext(experiment_id=row.id, name=plan.spec.name, cwd=cwd), head)
                for plan, row, head in zip(plans, rows, headers, strict=True)
            ]
            limits = RunLimits(
                concurrency=args.concurrency,
                retries=args.retries,
                trial_timeout_s=args.trial_timeout,
            )
            total = sum(p.planned for p in plans)
            with RunProgress(total=total, done=total - len(todo), label=matrix_id) as progress:
                await run_trials(db, plans[0], callers, todo, limits, progress)
            counts = await tally(db, [row.id for row in rows])
            finished = True
            for row in rows:
                if counts[row.id].done >= row.planned:
                    await finish_experiment(db, row.id)
                else:
                    finished = False
            if finished:
                await finish_matrix(db, matrix_id)
        sides = []
        for row in rows:
            fresh = await get_experiment(db, row.id)
            assert fresh is not None
            sides.append(await load_side(db, fresh))
    holder.pop("matrix", None)
    base_index = next(i for i, c in enumerate(cells) if c.baseline)
    comparisons = [
        (cell.name, compare(sides[base_index], side))
        for i, (cell, side) in enumerate(zip(cells, sides, strict=True))
        if i != base_index
    ]
    results = judge_cells(comparisons)
    report = Report(
        matrix_id=matrix_id,
        matrix=matrix,
        cells=cells,
        rows=rows,
        sides=sides,
        results=results,
        reused=reused_info,
        ran=len(todo),
        resumed=stored is not None,
        finished=finished,
        narrowed=len(cells) < len(matrix.cells),
    )
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, allow_nan=False))
    else:
        print("\n".join(report.lines()))
    return 0


async def _find_matrix(db: Database, given: str, matrix: MatrixSpec) -> MatrixRow:
    if given:
        return await find_by_id(
            given,
            lambda id_: get_matrix(db, id_),
            lambda prefix: matrix_ids_starting_with(db, prefix),
            flag="--resume",
            what="matrix",
            hint=" (a matrix id starts with mx_)",
        )
    latest = await latest_unfinished_matrix(db, matrix.name)
    if latest is None:
        raise ConfigError(
            f"--resume: no unfinished matrix named {matrix.name!r} in this store; name one "
            "with --resume MX"
        )
    found = await get_matrix(db, latest)
    assert found is not None
    return found


async def _check_resume(
    db: Database,
    stored: MatrixRow,
    matrix: MatrixSpec,
    cells: list[Cell],
    plans: list[Plan],
    args: argparse.Namespace,
) -> list[ExperimentRow]:
    """The stored cells' experiments, in the order of `cells`; ConfigError naming every change
    when the matrix may not be resumed."""
    problems: list[str] = []
    if stored.name != matrix.name:
        problems.append(f"it is the matrix {stored.name!r}, not {matrix.name!r}")
    stored_chosen = list(stored.spec.get("chosen") or [])
    if args.cell and sorted(args.cell) != sorted(stored_chosen):
        before = ", ".join(stored_chosen) or "every cell"
        problems.append(f"the chosen cells changed (--cell; it ran {before})")
    by_name = {c.cell: c for c in stored.cells}
    baseline = next((c.cell for c in stored.cells if c.baseline), None)
    if baseline != matrix.baseline.name:
        problems.append(f"the baseline changed ({baseline} → {matrix.baseline.name})")
    names = [c.name for c in cells]
    for name in by_name.keys() - set(names):
        problems.append(f"the cell {name} is no longer in the matrix")
    for name in set(names) - by_name.keys():
        problems.append(f"the cell {name} is new")
    rows: list[ExperimentRow] = []
    for cell, plan in zip(cells, plans, strict=True):
        if cell.name not in by_name:
            continue
        row = await get_experiment(db, by_name[cell.name].experiment_id)
        if row is None:
            problems.append(f"the cell {cell.name}'s experiment is no longer in this store")
            continue
        problems.extend(f"{cell.name}: {p}" for p in resume_problems(row, plan))
        rows.append(row)
    if problems:
        raise ConfigError(
            f"cannot resume {stored.id}: {'; '.join(problems)}. Undo the change, or start a new "
            "matrix without --resume"
        )
    return rows


async def _create(
    db: Database,
    matrix_id: str,
    matrix: MatrixSpec,
    cells: list[Cell],
    plans: list[Plan],
    args: argparse.Namespace,
) -> list[ExperimentRow]:
    created = utcnow()
    pairs: list[tuple[MatrixCellRow, ExperimentRow]] = []
    for cell, plan in zip(cells, plans, strict=True):
        row = plan.row(new_experiment_id(), args.concurrency, created)
        pairs.append((MatrixCellRow(cell.position, cell.name, cell.baseline, row.id), row))
    spec = {
        "spec": matrix.raw,
        "cells": [
            {
                "name": c.name,
                "changes": _changes_json(c),
            }
            for c in matrix.cells
        ],
        "baseline": matrix.baseline.name,
        "chosen": list(dict.fromkeys(args.cell)),
        "seed": ORDER_SEED,
        "reuse": None
        if args.reuse is None
        else {"cells": args.reuse, "maxAge": args.reuse_max_age or DEFAULT_REUSE_MAX_AGE},
    }
    await create_matrix(db, matrix_id, matrix.name, spec, pairs, created)
    return [row for _, row in pairs]


async def _copy_reused(
    db: Database,
    matrix_id: str,
    cells: list[Cell],
    plans: list[Plan],
    rows: list[ExperimentRow],
    policy: str | None,
    since: datetime,
) -> dict[int, dict[str, Any]]:
    """Copy each reused cell's earlier case-trials into its experiment (one transaction per
    cell); what was copied, by cell position."""
    copied: dict[int, dict[str, Any]] = {}
    own = {row.id for row in rows}
    positions = _reused_cells(cells, policy)
    for cell, plan, row in zip(cells, plans, rows, strict=True):
        if cell.position not in positions:
            continue
        found = await reusable(db, plan, since, own)
        await save_trials(db, [(row.id, t) for t in found.trials])
        summary = found.summary()
        await set_reused(db, matrix_id, cell.position, summary)
        copied[cell.position] = summary
    return copied


def _print_plan(
    matrix: MatrixSpec,
    cells: list[Cell],
    plans: list[Plan],
    reusable_counts: dict[int, int] | None,
    args: argparse.Namespace,
) -> None:
    chosen = {c.position for c in cells}
    by_position = {c.position: p for c, p in zip(cells, plans, strict=True)}
    total = sum(p.planned for p in plans)
    cases = len(plans[0].cases)
    if args.json:
        body = {
            "name": matrix.name,
            "baseline": matrix.baseline.name,
            "dataset": plans[0].dataset.ref,
            "cases": cases,
            "cells": [
                {
                    "cell": c.name,
                    "baseline": c.baseline,
                    "runs": c.position in chosen,
                    "changes": _changes_json(c),
                    "trials": by_position[c.position].trials if c.position in chosen else None,
                    "caseTrials": by_position[c.position].planned if c.position in chosen else 0,
                    "reusable": None
                    if reusable_counts is None
                    else reusable_counts.get(c.position),
                }
                for c in matrix.cells
            ],
            "caseTrials": total,
            "ran": 0,
        }
        print(json.dumps(body, ensure_ascii=False))
        return
    print(
        f"matrix {matrix.name}  {len(matrix.cells)} cells, baseline {matrix.baseline.name}  "
        f"dataset {plans[0].dataset.ref}: {cases} case{'s' if cases != 1 else ''}"
    )
    header = ["cell", "runs", "trials", "changes"]
    if reusable_counts is not None:
        header.insert(3, "reusable")
    rows = []
    for c in matrix.cells:
        runs = "baseline" if c.baseline else ("yes" if c.position in chosen else "no (--cell)")
        plan = by_position.get(c.position)
        changes = ", ".join(ch.text() for ch in c.changes) or "nothing (the spec as written)"
        row = [c.name, runs, "" if plan is None else str(plan.trials), changes]
        if reusable_counts is not None:
            count = reusable_counts.get(c.position)
            row.insert(3, "" if count is None or plan is None else f"{count}/{plan.planned}")
        rows.append(row)
    right = {2, 3} if reusable_counts is not None else {2}
    print(table(header, rows, right=right))
    reuse = ""
    if reusable_counts is not None:
        copied = sum(reusable_counts.values())
        reuse = f", {copied} of them copied from earlier runs (--reuse {args.reuse})"
    print(f"{total} case-trials{reuse}; nothing ran (--plan)")


@dataclass(frozen=True, slots=True)
class Report:
    matrix_id: str
    matrix: MatrixSpec
    cells: list[Cell]
    rows: list[ExperimentRow]
    sides: list[Side]
    results: list[CellResult]
    reused: dict[int, dict[str, Any]]
    ran: int
    resumed: bool
    finished: bool
    narrowed: bool

    def _result(self, name: str) -> CellResult | None:
        return next((r for r in self.results if r.cell == name), None)

    def table_lines(self) -> list[str]:
        body = []
        for cell, side in zip(self.cells, self.sides, strict=True):
            result = self._result(cell.name)
            if result is None:
                body.append([cell.name, rate_text(pass_rate(side)), "baseline"])
                continue
            c = result.comparison
            body.append(
                [
                    cell.name,
                    rate_text(c.b.pass_rate),
                    "no data" if c.diff is None else pp_text(c.diff),
                    "" if c.mcnemar_p is None else f"{c.mcnemar_p:.3f}",
                    "" if result.p_holm is None else f"{result.p_holm:.3f}",
                    result.verdict,
                ]
            )
        header = ["cell", "pass", "B − A", "p", "p (Holm)", "verdict"]
        return table(header, body, right={1, 2, 3, 4}, rule=False).splitlines()

    def lines(self) -> list[str]:
        runs = sum(row.planned for row in self.rows)
        out = [
            f"matrix {self.matrix_id} {self.matrix.name}  {len(self.cells)} cells, "
            f"{runs} case runs" + ("" if self.finished else " (partial)"),
            *self.table_lines(),
            "",
        ]
        family = sum(r.p_holm is not None for r in self.results)
        out.append(
            f"Holm over {family} cell{'s' if family != 1 else ''} against the baseline "
            "(exact McNemar p); a verdict needs p (Holm) below 0.05"
        )
        if self.narrowed:
            others = len(self.matrix.cells) - 1
            out.append(
                f"note: Holm over the cells run (--cell), not all {others} of the matrix: run "
                "them together to have them adjusted together"
            )
        for cell in self.cells:
            info = self.reused.get(cell.position)
            if info is None:
                continue
            row = self.rows[self.cells.index(cell)]
            sources = ", ".join(info["from"]) or "no earlier run"
            out.append(
                f"reused {cell.name}: {info['trials']} of {row.planned} case-trials copied from "
                f"{sources}, not run again"
            )
        if any(info and info["trials"] for info in self.reused.values()):
            out.append(
                "note: copied case-trials ran before the rest, not next to them: drift since "
                "then (a provider, a cache) counts as a difference"
            )
        for cell, side in zip(self.cells, self.sides, strict=True):
            summary = _errors(side)
            if summary:
                out.append(f"errors {cell.name}: {summary}")
        base = self.rows[next(i for i, c in enumerate(self.cells) if c.baseline)]
        out.append(
            f"each cell is an experiment (NAME[CELL] in exp list); the baseline is {base.id}: "
            "neens exp compare it with a cell's for the full report"
        )
        if self.resumed:
            out.append(f"resumed: ran {self.ran} case-trials left")
        return out

    def to_json(self) -> dict[str, Any]:
        cells = []
        for cell, row, side in zip(self.cells, self.rows, self.sides, strict=True):
            result = self._result(cell.name)
            body: dict[str, Any] = {
                "cell": cell.name,
                "experiment": row.id,
                "baseline": cell.baseline,
                "changes": _changes_json(cell),
                "trials": row.trials,
                "planned": row.planned,
                "done": len(side.outcomes),
                "reused": self.reused.get(cell.position),
            }
            if result is None:
                body.update(passRate=pass_rate(side))
            else:
                c = result.comparison
                body.update(
                    passRate=c.b.pass_rate,
                    pairedCases=len(c.cases),
                    diff=c.diff,
                    interval=None
                    if c.interval is None
                    else {"low": c.interval.low, "high": c.interval.high, "confidence": 0.95},
                    regressed=c.n10,
                    improved=c.n01,
                    p=c.mcnemar_p,
                    pHolm=result.p_holm,
                    verdict=result.verdict,
                    verdictReason=result.reason,
                )
            cells.append(body)
        return {
            "matrix": self.matrix_id,
            "name": self.matrix.name,
            "status": "finished" if self.finished else "partial",
            "baseline": self.matrix.baseline.name,
            "method": HOLM_METHOD,
            "family": sum(r.p_holm is not None for r in self.results),
            "cells": cells,
            "ranNow": self.ran,
            "resumed": self.resumed,
        }


def pass_rate(side: Side) -> float | None:
    """The share of graded case-trials that passed; None when none was graded."""
    graded = [o.passed for o in side.outcomes if o.passed is not None]
    return sum(graded) / len(graded) if graded else None


def _errors(side: Side) -> str:
    infra = sum(o.error_kind == "infra" for o in side.outcomes)
    agent = sum(o.error_kind == "agent" for o in side.outcomes)
    if not infra + agent:
        return ""
    return f"{infra + agent} ({infra} infra, {agent} agent)"


def _changes_json(cell: Cell) -> list[dict[str, Any]]:
    return [{"path": change.pointer, "value": change.value} for change in cell.changes]
