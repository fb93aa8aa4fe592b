"""`neens exp aa spec.json`: one config run twice, interleaved, to measure its A/A flip rate.

The two runs are experiments of kind "aa", each naming the other (`pair_id`). Their case-trials
run in pairs, the same case and trial in both runs one after the other, in a seeded random
order within each pair, so drift during the run (a provider's latency, a cache warming up) hits
both alike. The flip rate is the share of paired cases whose outcome differs between the two:
pure noise, since nothing differs but chance. `exp compare` then never reports a minimum
detectable effect below it, for runs on the same dataset.

Like `exp run`, it saves each case-trial as it finishes. `--resume [EXP]` (either id of the pair)
makes the same interleaved list again from the pair's stored seed and runs only the case-trials
neither run saved, so the report equals an uninterrupted pair's; it refuses, naming what
changed, when the dataset, graders, task, agent script or trials did.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from neens_eval.errors import ConfigError

from neens.domain.exp_compare import flips
from neens.exp.claims import claimed
from neens.exp.compare import load_side, pass_text
from neens.exp.matrix import interleaved
from neens.exp.plan import Plan, Selection, make_plan, resume_problems
from neens.exp.progress import RunProgress
from neens.exp.resume import find_to_resume, kept_trials
from neens.exp.run_command import new_experiment_id, task_headers
from neens.exp.runner import Caller, RunLimits, run_trials
from neens.exp.spec import read_spec
from neens.exp.store import open_store
from neens.exp.tasks import TaskContext
from neens.store.db import Database
from neens.store.experiments import (
    ExperimentRow,
    create_experiment,
    finish_experiment,
    get_experiment,
    tally,
)
from neens.store.types import utcnow


async def aa_command(args: argparse.Namespace, holder: dict[str, Any]) -> int:
    if args.retry_errors and args.resume is None:
        raise ConfigError(
            "--retry-errors: only with --resume (it runs a stored pair's errors again)"
        )
    cwd = Path.cwd()
    spec = read_spec(Path(args.spec))
    async with open_store(args.database_url) as db:
        plan = await make_plan(
            db,
            spec,
            cwd=cwd,
            dataset=args.dataset,
            cli_graders=args.grader,
            trials=args.trials,
            selection=Selection(),
            failing_id=None,
        )
        headers = task_headers(plan)
        if args.resume is not None:
            rows = await _pair_to_resume(db, args.resume, plan, args.seed)
            seed = int(rows[0].spec["aa"]["seed"])
        else:
            seed = 0 if args.seed is None else args.seed
            rows = await _new_pair(db, plan, args.concurrency, seed)
        first_id, second_id = rows[0].id, rows[1].id
        holder["ids"] = (first_id, second_id)
        async with claimed(db, [first_id, second_id], resuming=args.resume is not None):
            kept: list[set[tuple[str, int]]] = [set(), set()]
            if args.resume is not None:
                kept = [
                    await kept_trials(db, row.id, retry_errors=args.retry_errors) for row in rows
                ]
            todo = [
                (index, case, trial)
                for index, case, trial in interleaved([plan.trials] * 2, plan.cases, seed)
                if (case.id, trial) not in kept[index]
            ]
            callers = [
                Caller(
                    plan, TaskContext(experiment_id=row.id, name=plan.spec.name, cwd=cwd), headers
                )
                for row in rows
            ]
            limits = RunLimits(
                concurrency=args.concurrency,
                retries=args.retries,
                trial_timeout_s=args.trial_timeout,
            )
            label = f"{first_id} A/A"
            already = 2 * plan.planned - len(todo)
            with RunProgress(total=2 * plan.planned, done=already, label=label) as progress:
                await run_trials(db, plan, callers, todo, limits, progress)
            counts = await tally(db, [first_id, second_id])
            for row in rows:
                if counts[row.id].done >= row.planned:
                    await finish_experiment(db, row.id)
        sides = []
        for row in rows:
            stored = await get_experiment(db, row.id)
            assert stored is not None
            sides.append(await load_side(db, stored))
    flipped, paired = flips(sides[0], sides[1])
    rate = flipped / paired if paired else None
    if args.json:
        body = {
            "ids": [first_id, second_id],
            "seed": seed,
            "ranNow": len(todo),
            "resumed": args.resume is not None,
            "name": plan.spec.name,
            "pairedCases": paired,
            "flipped": flipped,
            "flipRate": rate,
            "passRates": [
                counts[i].passed / counts[i].graded if counts[i].graded else None
                for i in (first_id, second_id)
            ],
            "errors": [
                {"infra": counts[i].infra_errors, "agent": counts[i].agent_errors}
                for i in (first_id, second_id)
            ],
        }
        print(json.dumps(body, ensure_ascii=False))
        return 0
    rate_text = "no data" if rate is None else f"{rate * 100:.1f}%"
    print(
        f"aa {first_id} {second_id} {plan.spec.name}  flip rate {rate_text} "
        f"({flipped} of {paired} paired cases)"
    )
    print(
        "pass "
        + " and ".join(
            pass_text(counts[i].passed, counts[i].graded).removeprefix("pass ")
            for i in (first_id, second_id)
        )
    )
    return 0


async def _new_pair(db: Database, plan: Plan, concurrency: int, seed: int) -> list[ExperimentRow]:
    first_id, second_id = new_experiment_id(), new_experiment_id()
    created = utcnow()
    rows = []
    for own, other in ((first_id, second_id), (second_id, first_id)):
        row = plan.row(own, concurrency, created)
        row = replace(row, kind="aa", pair_id=other, spec={**row.spec, "aa": {"seed": seed}})
        await create_experiment(db, row)
        rows.append(row)
    return rows


async def _pair_to_resume(
    db: Database, given: str, plan: Plan, seed: int | None
) -> list[ExperimentRow]:
    """Both runs of the A/A pair to resume, first-made first; ConfigError (exit 2) naming
    every change when they may not be resumed."""
    found = await find_to_resume(db, given, plan.spec.name, "aa")
    problems = resume_problems(found, plan, kind="aa")
    other = None
    if found.kind == "aa" and found.pair_id is not None:
        other = await get_experiment(db, found.pair_id)
        if other is None:
            problems.append(f"the other run of the pair, {found.pair_id}, is not in this store")
    stored_seed = (found.spec.get("aa") or {}).get("seed")
    if found.kind == "aa" and stored_seed is None:
        problems.append("it was made before A/A runs could be resumed (run exp aa again)")
    elif seed is not None and stored_seed is not None and seed != stored_seed:
        problems.append(f"--seed changed ({stored_seed} → {seed})")
    if problems:
        raise ConfigError(
            f"cannot resume {found.id}: {'; '.join(problems)}. Undo the change, or start a "
            "new A/A pair without --resume"
        )
    assert other is not None
    return sorted([found, other], key=lambda row: row.id)
