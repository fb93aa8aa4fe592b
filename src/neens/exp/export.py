"""`neens exp export EXP [--against A] --out DIR`: an experiment (and its comparison with A) as
an evidence bundle anyone can check offline (docs/evidence.md; the writer is the client's,
`neens_eval.evidence`, so a sweep's bundle and an experiment's are one format).

The decision is the experiment's numbers (`neens.domain.exp_summary`) and, with --against, the
paired comparison `neens exp compare A EXP --json` prints (same seed rule, same A/A floor and
case kinds; no --cluster, --pairwise or labels). items.jsonl holds every case-trial of the
experiments in it, with its grades; cases.jsonl the cases they ran.

Exit codes: 0 written; 2 bad input (an unknown experiment, a --out that is not empty, a bad
--sign key), nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from neens_eval.errors import ConfigError
from neens_eval.evidence import check_out_dir, json_bytes, jsonl_bytes, parquet_bytes, write_bundle

from neens.domain.exp_compare import compare
from neens.domain.exp_summary import ExperimentSummary, TrialFact, summarize
from neens.exp.compare import aa_floor, case_groups, load_side, to_json
from neens.exp.store import find_experiment, open_store
from neens.store.experiments import ExperimentRow, TrialRow, trials_of


def summary_json(row: ExperimentRow, s: ExperimentSummary) -> dict[str, Any]:
    """Every number unrounded, with the labels a reader needs."""
    return {
        "id": row.id,
        "name": row.name,
        "trials": s.trials,
        "finished": row.finished_at is not None,
        "done": s.done,
        "graded": s.graded,
        "passed": s.passed,
        "passRate": s.pass_rate,
        "errors": {"infra": s.infra_errors, "agent": s.agent_errors},
        "ungraded": s.ungraded,
        "pricedTrials": s.priced,
        "costUsd": s.cost_usd,
        "costOverflow": s.cost_overflow,
        "costPerTrialUsd": s.cost_per_trial_usd,
        "gradedCases": s.graded_cases,
        "casesPassedEveryTrial": s.cases_passed_every_trial,
        "strictRate": s.strict_rate,
        "strictWilson": None
        if s.strict_interval is None
        else {"low": s.strict_interval.low, "high": s.strict_interval.high},
        "passHatK": [
            {"k": p.k, "estimate": p.estimate, "cases": p.cases, "leftOut": p.left_out}
            for p in s.pass_hat_k
        ],
        "labels": {
            "passRate": "passed over graded case-trials",
            "strictRate": "cases that passed every graded trial, over the cases graded at "
            "least once (95% Wilson interval over cases)",
            "passHatK": "unbiased pass^k: mean over cases with at least k graded trials of "
            "C(c,k)/C(n,k), never (c/n)^k",
        },
    }


def _facts(trials: list[TrialRow]) -> list[TrialFact]:
    return [TrialFact(t.case_id, t.passed, t.error_kind, t.cost_usd) for t in trials]


def _trial_json(experiment_id: str, t: TrialRow) -> dict[str, Any]:
    return {
        "experimentId": experiment_id,
        "caseId": t.case_id,
        "trial": t.trial,
        "status": t.status,
        "errorKind": t.error_kind,
        "error": t.error,
        "passed": t.passed,
        "seqPassed": None if t.passed is None else t.seq_passed_at is not None,
        "attempts": t.attempts,
        "costUsd": t.cost_usd,
        "latencyMs": t.latency_ms,
        "output": t.output,
        "startedAt": t.started_at.isoformat(),
        "finishedAt": t.finished_at.isoformat(),
        "grades": [
            {
                "grader": g.grader,
                "kind": g.kind,
                "version": g.version,
                "score": g.score,
                "passed": g.passed,
                "unscored": g.unscored,
                "reason": g.reason,
            }
            for g in t.grades
        ],
    }


async def export_command(args: argparse.Namespace) -> int:
    out = Path(args.out)
    check_out_dir(out)
    if args.sign is not None:
        from neens_eval.evidence_sign import load_private_key

        load_private_key(args.sign)
    async with open_store(args.database_url) as db:
        row = await find_experiment(db, args.experiment, flag="EXP")
        rows = [row]
        if args.against is not None:
            base = await find_experiment(db, args.against, flag="--against")
            if base.id == row.id:
                raise ConfigError(f"--against {args.against}: the experiment itself")
            rows = [base, row]
        trials = {r.id: await trials_of(db, r.id) for r in rows}
        comparison = None
        if args.against is not None:
            side_a, side_b = await load_side(db, rows[0]), await load_side(db, rows[1])
            result = compare(
                side_a,
                side_b,
                aa=await aa_floor(db, rows[0]),
                kinds=case_groups(rows[0], "kind") | case_groups(rows[1], "kind") or None,
            )
            comparison = to_json(result, gate=False)
    decision = {
        "kind": "experiment",
        "experiments": [summary_json(r, summarize(r.trials, _facts(trials[r.id]))) for r in rows],
        "comparison": comparison,
    }
    items = [_trial_json(r.id, t) for r in rows for t in trials[r.id]]
    cases: dict[str, dict[str, Any]] = {}
    for r in rows:  # A, then EXP: a case both ran is kept as EXP ran it, as `exp compare` reads it
        for case in r.cases:
            ident = str(case.get("id"))
            ran = [*cases.get(ident, {}).get("experimentIds", []), r.id]
            cases[ident] = {**case, "experimentIds": ran}
    files = {
        "decision.json": json_bytes(decision),
        "items.jsonl": jsonl_bytes(items),
        "cases.jsonl": jsonl_bytes(list(cases.values())),
    }
    parquet = parquet_bytes([{**i, "grades": None} for i in items])
    if parquet is not None:
        files["items.parquet"] = parquet
    subject = {"experimentIds": [r.id for r in rows], "against": rows[0].id if comparison else None}
    write_bundle(out, kind="experiment", subject=subject, files=files, sign_key=args.sign)
    extra = " (with items.parquet)" if parquet is not None else ""
    signed = ", signed" if args.sign is not None else ""
    sys.stdout.write(
        f"wrote {out}: {len(rows)} experiment{'s' if len(rows) > 1 else ''}, {len(items)} "
        f"case-trials and {len(cases)} cases{extra}{signed}; check it with: "
        f"python3 {out / 'verify.py'}\n"
    )
    return 0
