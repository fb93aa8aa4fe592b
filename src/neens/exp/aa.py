"""`neens exp aa spec.json`: one config run twice, interleaved, to measure its A/A flip rate.

The two runs are experiments of kind "aa", each naming the other (`pair_id`). Their case-trials
run in pairs, the same case and trial in both runs one after the other, in a seeded random
order within each pair, so drift during the run (a provider's latency, a cache warming up) hits
both alike. The flip rate is the share of paired cases whose outcome differs between the two:
pure noise, since nothing differs but chance. `exp compare` then never reports a minimum
detectable effect below it, for runs on the same dataset.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from neens_eval.errors import ConfigError

from neens.domain.exp_compare import flips
from neens.exp.compare import load_side, pass_text
from neens.exp.plan import Selection, make_plan
from neens.exp.progress import RunProgress
from neens.exp.run_command import new_experiment_id
from neens.exp.runner import Caller, RunLimits, run_trials
from neens.exp.spec import HttpTask, read_spec
from neens.exp.store import open_store
from neens.exp.tasks import TaskContext, expand_headers
from neens.store.experiments import (
    create_experiment,
    finish_experiment,
    get_experiment,
    tally,
)
from neens.store.types import utcnow


async def aa_command(args: argparse.Namespace, holder: dict[str, Any]) -> int:
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
        headers: dict[str, str] = {}
        if isinstance(plan.spec.task, HttpTask):
            try:
                headers = expand_headers(plan.spec.task.headers)
            except ValueError as exc:
                raise ConfigError(f"task.headers: ${{{exc}}} is not set") from None
        first_id, second_id = new_experiment_id(), new_experiment_id()
        created = utcnow()
        rows = []
        for own, other in ((first_id, second_id), (second_id, first_id)):
            row = replace(plan.row(own, args.concurrency, created), kind="aa", pair_id=other)
            await create_experiment(db, row)
            rows.append(row)
        holder["ids"] = (first_id, second_id)
        order = random.Random(args.seed)
        todo: list[tuple[int, Any, int]] = []
        for trial in range(plan.trials):
            for case in plan.cases:
                pair = [0, 1]
                order.shuffle(pair)
                todo.extend((index, case, trial) for index in pair)
        callers = [
            Caller(plan, TaskContext(experiment_id=row.id, name=plan.spec.name, cwd=cwd), headers)
            for row in rows
        ]
        limits = RunLimits(
            concurrency=args.concurrency, retries=args.retries, trial_timeout_s=args.trial_timeout
        )
        label = f"{first_id} A/A"
        with RunProgress(total=2 * plan.planned, done=0, label=label) as progress:
            await run_trials(db, plan, callers, todo, limits, progress)
        for row in rows:
            await finish_experiment(db, row.id)
        sides = []
        for row in rows:
            stored = await get_experiment(db, row.id)
            assert stored is not None
            sides.append(await load_side(db, stored))
        counts = await tally(db, [first_id, second_id])
    flipped, paired = flips(sides[0], sides[1])
    rate = flipped / paired if paired else None
    if args.json:
        body = {
            "ids": [first_id, second_id],
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
