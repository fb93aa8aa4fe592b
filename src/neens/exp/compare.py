"""`neens exp compare A B`: reads both runs, compares them (`neens.domain.exp_compare`) and
prints the result. The report goes to stdout, warnings to stderr (one line each, "warning: …").

Exit codes: 0 for a report; with --gate or --margin, 0 only when nothing holds (the gate's
"Ship it"), else 1; 2 for bad input (an unknown experiment).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Final

from neens_eval.errors import ConfigError

from neens.domain.exp_compare import (
    AaFloor,
    Comparison,
    JudgeCorrection,
    PairwiseSummary,
    Side,
    TrialOutcome,
    compare,
    flips,
    judge_corrections,
    p_text,
    pairwise_summary,
)
from neens.domain.paired import ALPHA
from neens.exp.datasets import CASE_KEYS, Case
from neens.exp.labels import read_labels
from neens.exp.pairwise import judge_pairs, read_judge
from neens.exp.store import find_experiment, open_store
from neens.exp.table import shown, table
from neens.store.db import Database
from neens.store.experiments import (
    ExperimentRow,
    get_experiment,
    latest_aa_pair,
    tally,
    trials_of,
)

REGRESSIONS_SHOWN: Final = 50


async def judge_rates(db: Database, row: ExperimentRow) -> dict[str, dict[str, float]]:
    """Each LLM judge's pass rate per case in this run, over the case-trials it gave a
    verdict on."""
    verdicts: dict[str, dict[str, list[bool]]] = {}
    for trial in await trials_of(db, row.id):
        for grade in trial.grades:
            if grade.kind == "llm" and grade.passed is not None:
                verdicts.setdefault(grade.grader, {}).setdefault(trial.case_id, []).append(
                    grade.passed
                )
    return {
        grader: {case: sum(v) / len(v) for case, v in cases.items()}
        for grader, cases in verdicts.items()
    }


async def load_side(db: Database, row: ExperimentRow) -> Side:
    trials = await trials_of(db, row.id, grades=False)
    counts = (await tally(db, [row.id]))[row.id]
    return Side(
        id=row.id,
        name=row.name,
        trials=row.trials,
        outcomes=[
            TrialOutcome(
                t.case_id,
                t.passed,
                t.error_kind,
                seq_passed=None if t.passed is None else t.seq_passed_at is not None,
            )
            for t in trials
        ],
        graders={g["name"]: g["version"] for g in row.graders},
        # When its outputs were produced: a regrade keeps its source's times.
        started_at=counts.first_started_at or row.created_at,
        ended_at=counts.last_finished_at,
        planned=row.planned,
        finished=row.finished_at is not None,
        failing_of=row.failing_of,
    )


async def compare_command(args: argparse.Namespace) -> int:
    if (args.labels_a is None) != (args.labels_b is None):
        missing = "--labels-b" if args.labels_b is None else "--labels-a"
        raise ConfigError(f"{missing}: give people's labels of both runs (--labels-a and -b)")
    judges = [read_judge(Path(path), i) for i, path in enumerate(args.pairwise)]
    labels = None
    if args.labels_a is not None:
        labels = (
            read_labels(Path(args.labels_a), "--labels-a"),
            read_labels(Path(args.labels_b), "--labels-b"),
        )
    async with open_store(args.database_url) as db:
        row_a = await find_experiment(db, args.a, flag="A")
        row_b = await find_experiment(db, args.b, flag="B")
        if (problem := dataset_problem(row_a, row_b)) is not None:
            raise ConfigError(problem)
        side_a = await load_side(db, row_a)
        side_b = await load_side(db, row_b)
        aa = await aa_floor(db, row_a)
        preferences = [
            pairwise_summary(judge.name, await judge_pairs(judge, await _pairs(db, row_a, row_b)))
            for judge in judges
        ]
        corrections = None
        if labels is not None:
            corrections = judge_corrections(
                await judge_rates(db, row_a), await judge_rates(db, row_b), *labels
            )
    seq_attempts = None
    if args.verdict == "seq":
        seq_a, seq_b = row_a.spec.get("seq"), row_b.spec.get("seq")
        if seq_a is None or seq_a != seq_b:
            raise ConfigError(
                "--verdict seq: A and B must both have run with the same --seq and --feedback "
                f"(A: {_seq_flags(seq_a)}, B: {_seq_flags(seq_b)})"
            )
        seq_attempts = int(seq_a["attempts"])
    groups = None
    if args.cluster is not None:
        groups = case_groups(row_a, args.cluster) | case_groups(row_b, args.cluster)
    result = compare(
        side_a,
        side_b,
        seed=args.seed,
        margin=args.margin,
        with_matrix=args.matrix,
        cluster_field=args.cluster,
        groups=groups,
        aa=aa,
        kinds=case_groups(row_a, "kind") | case_groups(row_b, "kind") or None,
        seq_attempts=seq_attempts,
    )
    if corrections is not None and not corrections:
        result.warnings.append(
            "--labels-a/--labels-b: no LLM judge graded both runs, so there is nothing to correct"
        )
    if args.json:
        body = to_json(result, gate=args.gate)
        if corrections is not None:
            body["judgeCorrections"] = [_correction_json(c) for c in corrections]
        if judges:
            body["pairwise"] = [_pairwise_json(p) for p in preferences]
        print(json.dumps(body, ensure_ascii=False, allow_nan=False))
    else:
        for warning in result.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        print(render(result, gate=args.gate, corrections=corrections, pairwise=preferences))
    if args.gate or args.margin is not None:
        return 0 if result.ship else 1
    return 0


def dataset_problem(a: ExperimentRow, b: ExperimentRow) -> str | None:
    """Why A and B cannot be compared case by case, or None. Both must have run on one version
    of one dataset (any part of it: --case, --failing, --first-n, …). A case with the same id
    but another input or expected answer, or a dataset edited between the two runs, would credit
    the change of data to the agent.

    A run imported from another tool (`neens import`) is let through: it pairs by the case keys
    its importer gives (docs/import.md, docs/migrate.md), and its cases record what that tool
    stored, never a Neens dataset, so there is nothing of the same kind to check."""
    if "import" in (a.kind, b.kind):  # neens.imports.store.KIND
        return None
    cases_a = {case["id"]: case for case in a.cases}
    cases_b = {case["id"]: case for case in b.cases}
    changed = [i for i in cases_a if i in cases_b and cases_a[i] != cases_b[i]]
    if not changed and a.dataset_hash == b.dataset_hash:
        return None
    runs = (
        f"A {a.name} ({a.id}, {shown(a.dataset_ref)}) and "
        f"B {b.name} ({b.id}, {shown(b.dataset_ref)})"
    )
    if changed:
        first = cases_a[changed[0]], cases_b[changed[0]]
        keys = " and ".join(k for k in CASE_KEYS if first[0].get(k) != first[1].get(k))
        what = (
            f"{len(changed)} of the {len(cases_a.keys() & cases_b.keys())} cases both ran "
            f"differ (case {shown(changed[0])}: its {keys})"
        )
    elif a.dataset_ref == b.dataset_ref:
        what = "the dataset changed between them"
    else:
        what = "they ran on different datasets"
    return f"{runs} cannot be compared: {what}; compare two runs of the same dataset"


def _seq_flags(seq: Any) -> str:
    if not seq:
        return "without --seq"
    return f"--seq {seq['attempts']} --feedback {seq['feedback']}"


async def aa_floor(db: Database, row: ExperimentRow) -> AaFloor | None:
    """The flip rate of the newest finished A/A pair (`exp aa`) on A's dataset, if any."""
    pair = await latest_aa_pair(db, row.dataset_hash)
    if pair is None:
        return None
    first = await get_experiment(db, pair[0])
    second = await get_experiment(db, pair[1])
    if first is None or second is None or None in (first.finished_at, second.finished_at):
        return None
    flipped, paired = flips(await load_side(db, first), await load_side(db, second))
    return AaFloor(first.id, second.id, flipped, paired) if paired else None


def case_groups(row: ExperimentRow, field: str) -> dict[str, str]:
    """Each case's group for --cluster FIELD: its `group` or `kind` when FIELD names one of
    those, else the value of FIELD in its input when the input is an object. Cases without it
    are left out (each is then a group of its own)."""
    found: dict[str, str] = {}
    for case in row.cases:
        if field in ("group", "kind"):
            value = case.get(field)
        else:
            source = case.get("input")
            value = source.get(field) if isinstance(source, dict) else None
        if value is not None and not isinstance(value, dict | list):
            found[case["id"]] = str(value)
    return found


def pp_text(value: float, *, decimals: int = 1) -> str:
    """Percentage points with a sign, except for zero: "+2.5pp", "-50.0pp", "0.0pp"."""
    text = f"{value * 100:+.{decimals}f}"
    if float(text) == 0:
        text = text.lstrip("+-")
    return f"{text}pp"


def pass_text(passed: int, graded: int) -> str:
    """ "pass 75.0% (3/4)", or "pass no data" when nothing was graded."""
    if graded == 0:
        return "pass no data"
    return f"pass {passed / graded * 100:.1f}% ({passed}/{graded})"


def rate_text(value: float | None) -> str:
    return "no data" if value is None else f"{value * 100:.1f}%"


def _correction_json(c: JudgeCorrection) -> dict[str, Any]:
    return {
        "grader": c.grader,
        "labeled": c.labeled,
        "unlabeled": c.unlabeled,
        "judgeDiff": c.judge_diff,
        "corrected": None
        if c.corrected is None
        else {
            "estimate": c.corrected.estimate,
            "interval": {"low": c.corrected.interval.low, "high": c.corrected.interval.high},
            "p": c.corrected.p_value,
            "method": "PPI++ (ppi_py), 95%",
        },
        "problem": c.problem,
    }


def _correction_lines(corrections: list[JudgeCorrection]) -> list[str]:
    lines = []
    for c in corrections:
        alone = "no data" if c.judge_diff is None else pp_text(c.judge_diff)
        if c.corrected is None:
            lines.append(f"PPI++ {c.grader}: not corrected: {c.problem} (the judge alone {alone})")
            continue
        low, high = c.corrected.interval
        lines.append(
            f"PPI++ {c.grader} B − A {pp_text(c.corrected.estimate)} "
            f"[{pp_text(low)}, {pp_text(high)}] "
            f"p={c.corrected.p_value:.3f} ({c.labeled} labeled, {c.unlabeled} judged only; "
            f"the judge alone {alone})"
        )
    return lines


async def _pairs(
    db: Database, row_a: ExperimentRow, row_b: ExperimentRow
) -> list[tuple[Case, int, str, str]]:
    """Every case-trial both runs answered, with both answers, in case and trial order."""
    cases = {body["id"]: Case.from_json(body) for body in row_a.cases}
    answers_a = {
        (t.case_id, t.trial): t.output
        for t in await trials_of(db, row_a.id, grades=False)
        if t.output is not None
    }
    pairs = []
    for t in await trials_of(db, row_b.id, grades=False):
        a = answers_a.get((t.case_id, t.trial))
        if a is not None and t.output is not None and t.case_id in cases:
            pairs.append((cases[t.case_id], t.trial, a, t.output))
    return pairs


def _pairwise_json(p: PairwiseSummary) -> dict[str, Any]:
    return {
        "judge": p.judge,
        "bWins": p.b_wins,
        "aWins": p.a_wins,
        "ties": p.ties,
        "orderDependent": p.order_dependent,
        "unjudged": p.unjudged,
        "signTestP": p.p_value,
        "bShare": p.b_share,
        "bShareInterval": None
        if p.b_share_interval is None
        else {"low": p.b_share_interval.low, "high": p.b_share_interval.high},
    }


def _pairwise_lines(preferences: list[PairwiseSummary]) -> list[str]:
    lines = []
    for p in preferences:
        total = p.b_wins + p.a_wins + p.ties + p.order_dependent + p.unjudged
        line = (
            f"pairwise {p.judge}: B preferred {p.b_wins}, A {p.a_wins}, tie {p.ties}, "
            f"order-dependent {p.order_dependent}"
            + (f", unjudged {p.unjudged}" if p.unjudged else "")
            + f" of {total} pairs (both orders)"
        )
        if p.b_share is not None and p.b_share_interval is not None:
            low, high = p.b_share_interval
            line += (
                f"; B's share {rate_text(p.b_share)} [{rate_text(low)}, {rate_text(high)}], "
                f"sign test p={p.p_value:.3f}"
            )
        lines.append(line)
    return lines


def render(
    c: Comparison,
    *,
    gate: bool = False,
    corrections: list[JudgeCorrection] | None = None,
    pairwise: list[PairwiseSummary] | None = None,
) -> str:
    width = max(len(c.a.name), len(c.b.name))
    lines = [
        f"A {c.a.name:<{width}} {c.a.id}  pass {rate_text(c.a.pass_rate)}",
        f"B {c.b.name:<{width}} {c.b.id}  pass {rate_text(c.b.pass_rate)}",
        "",
    ]
    n = len(c.cases)
    if c.interval is None or c.diff is None:
        lines.append("B − A   no paired cases (no case was graded in both runs)")
        lines.append("mcnemar no paired cases")
    else:
        low, high = c.interval
        method = "95% paired bootstrap"
        if c.seq_attempts is not None:
            method += f", Seq@{c.seq_attempts}"
        if c.cluster is not None:
            method = f"{c.cluster.groups} groups of {c.cluster.field}, 95% cluster bootstrap"
        lines.append(
            f"B − A   {pp_text(c.diff)} [{pp_text(low)}, {pp_text(high)}] "
            f"({n} paired case{'s' if n != 1 else ''}, {method})"
        )
        lines.append(f"mcnemar p={c.mcnemar_p:.3f}  {c.n10} regressed, {c.n01} improved")
        if c.test is not None and not c.test.same_as_mcnemar:
            t = c.test
            lines.append(
                f"sign test {p_text(t.p)}  {t.up} {t.units} up, {t.down} down, "
                f"{t.unchanged} unchanged (exact, on B − A per {t.units[:-1]})"
            )
    lines.append(f"verdict {c.verdict} ({c.verdict_reason})")
    if c.disagreement is not None:
        lines.append(f"borderline: {c.disagreement}")
    lines.append("")
    lines.append(f"regressions {len(c.regressed)}")
    if c.regressed:
        shown = c.regressed[:REGRESSIONS_SHOWN]
        rows = [
            [
                r.case_id,
                f"{r.a_rate * 100:.0f}%",
                f"{r.b_rate * 100:.0f}%",
                pp_text(r.delta, decimals=0),
            ]
            for r in shown
        ]
        lines.append(table(["case", "A", "B", "Δ"], rows, right={1, 2, 3}))
        if len(c.regressed) > len(shown):
            lines.append(f"… and {len(c.regressed) - len(shown)} more (--json lists them all)")

    extras = _extras(c)
    if corrections:
        extras.extend(_correction_lines(corrections))
    if pairwise:
        extras.extend(_pairwise_lines(pairwise))
    if extras:
        lines.append("")
        lines.extend(extras)
    if c.margin is not None and c.score is not None:
        lines.append("")
        lines.append(_score_line(c))
    if gate:
        lines.append("")
        lines.append("Ship it" if c.ship else f"Hold: {'; '.join(c.holds)}")
    elif c.margin is not None:
        lines.append("")
        lines.append(_margin_line(c))
    return "\n".join(lines)


def _score_line(c: Comparison) -> str:
    """The score interval the margin rests on, e.g. "score   B − A [-65.8pp, +65.8pp] (95% Tango
    score interval, 2 paired cases: 0 down, 0 up)"."""
    assert c.score is not None
    s = c.score
    low, high = s.interval
    counts = f"{_count(s.down)} down, {_count(s.up)} up"
    return (
        f"score   B − A [{pp_text(low)}, {pp_text(high)}] (95% Tango score interval, {s.n} "
        f"paired case{'s' if s.n != 1 else ''}: {counts})"
    )


def _count(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


def _margin_line(c: Comparison) -> str:
    assert c.margin is not None
    bar = pp_text(-c.margin)
    if c.ship:
        assert c.interval is not None and c.score is not None
        return (
            f"non-inferior at {bar}: the lower ends of the score interval (Tango) "
            f"{pp_text(c.score.interval.low)} and of the bootstrap interval "
            f"{pp_text(c.interval.low)} are both above {bar}"
        )
    return f"not shown non-inferior at {bar}: {'; '.join(c.holds)}"


def _extras(c: Comparison) -> list[str]:
    lines: list[str] = []
    if c.prob_b_beats_a is not None:
        flips = c.n10 + c.n01
        lines.append(
            f"P(B>A) {c.prob_b_beats_a * 100:.1f}% (Beta(1,1) prior on the {flips} flipped "
            f"case{'s' if flips != 1 else ''}; below 100 paired cases)"
        )
    if c.aa is not None:
        lines.append(
            f"A/A flip rate {c.aa.flip_rate * 100:.1f}% ({c.aa.first} vs {c.aa.second}, "
            f"{c.aa.paired} paired cases): the MDE is never reported below it"
        )
    if c.power is not None:
        if c.power.mde is None:
            lines.append(
                f"no 80% power at this n (exact McNemar ceiling {c.power.ceiling * 100:.0f}%)"
            )
        else:
            lines.append(
                f"exact MDE {c.power.mde * 100:.1f}pp (80% power at this n, exact McNemar)"
            )
    if c.improved:
        lines.append(f"improved {len(c.improved)}: {_names([r.case_id for r in c.improved])}")
    if c.kinds is not None:
        rows = [
            [
                k.kind,
                str(k.cases),
                rate_text(k.a_rate),
                rate_text(k.b_rate),
                pp_text(k.b_rate - k.a_rate),
            ]
            for k in c.kinds.rows
        ]
        lines.append(table(["kind", "cases", "A", "B", "Δ"], rows, right={1, 2, 3, 4}))
        kinds = {k.kind for k in c.kinds.rows}
        if "bad" in kinds:
            lines.append(
                f"bad cases not showing the fix {len(c.kinds.not_fixed)}"
                + (f": {_names(c.kinds.not_fixed)}" if c.kinds.not_fixed else "")
            )
        for label, broken in (
            ("guards", c.kinds.broken_guards),
            ("controls", c.kinds.broken_controls),
        ):
            if label[:-1] in kinds:
                lines.append(
                    f"broken {label} {len(broken)}" + (f": {_names(broken)}" if broken else "")
                )
    if c.gained is not None and c.lost is not None:
        line = f"gained {len(c.gained)}, lost {len(c.lost)}"
        if c.lost:
            line += f" (lost coverage: {_names(c.lost)})"
        lines.append(line)
    errors_a = c.a.infra_errors + c.a.agent_errors
    errors_b = c.b.infra_errors + c.b.agent_errors
    if errors_a or errors_b:
        lines.append(
            f"errors A {errors_a} ({c.a.infra_errors} infra, {c.a.agent_errors} agent)  "
            f"B {errors_b} ({c.b.infra_errors} infra, {c.b.agent_errors} agent)"
        )
    left_out = []
    if c.only_a:
        left_out.append(f"{c.only_a} graded in A only")
    if c.only_b:
        left_out.append(f"{c.only_b} graded in B only")
    if left_out:
        lines.append(f"left out {', '.join(left_out)}")
    if c.cluster is not None and c.cluster.ungrouped:
        lines.append(
            f"{c.cluster.ungrouped} paired cases have no {c.cluster.field}: each is a group "
            "of its own"
        )
    if c.matrix is not None:
        m = c.matrix
        lines.append(f"matrix cases by passes out of {m.k_a} in A (rows) and {m.k_b} in B")
        header = ["A\\B", *(str(j) for j in range(m.k_b + 1))]
        rows = [[str(i), *(str(v) for v in row)] for i, row in enumerate(m.counts)]
        lines.append(table(header, rows, right=set(range(m.k_b + 2))))
        if m.left_out:
            lines.append(f"({m.left_out} paired cases without all their case-trials graded)")
    return lines


def _names(ids: list[str], limit: int = 10) -> str:
    listed = ", ".join(shown(i) for i in ids[:limit])
    return listed + (f", … ({len(ids) - limit} more)" if len(ids) > limit else "")


def _side_json(side: Any) -> dict[str, Any]:
    return {
        "id": side.id,
        "name": side.name,
        "trials": side.trials,
        "passRate": side.pass_rate,
        "passed": side.passed,
        "graded": side.graded,
        "errors": {"infra": side.infra_errors, "agent": side.agent_errors},
        "ungraded": side.ungraded,
        "done": side.done,
        "planned": side.planned,
        "finished": side.finished,
    }


def _case_json(r: Any) -> dict[str, Any]:
    return {
        "case": r.case_id,
        "a": {"passes": r.a_passes, "graded": r.a_graded, "rate": r.a_rate},
        "b": {"passes": r.b_passes, "graded": r.b_graded, "rate": r.b_rate},
        "delta": r.delta,
    }


def to_json(c: Comparison, *, gate: bool) -> dict[str, Any]:
    """Every number unrounded."""
    body: dict[str, Any] = {
        "a": _side_json(c.a),
        "b": _side_json(c.b),
        "pairedCases": len(c.cases),
        "diff": c.diff,
        "interval": None
        if c.interval is None
        else {"low": c.interval.low, "high": c.interval.high, "confidence": 0.95},
        "method": "paired percentile bootstrap, 10000 resamples"
        if c.cluster is None
        else "cluster percentile bootstrap, 10000 resamples",
        "cluster": None
        if c.cluster is None
        else {
            "field": c.cluster.field,
            "groups": c.cluster.groups,
            "ungrouped": c.cluster.ungrouped,
        },
        "seed": c.seed,
        "mcnemar": {
            "p": c.mcnemar_p,
            "n11": c.n11,
            "n10": c.n10,
            "n01": c.n01,
            "n00": c.n00,
            "regressed": c.n10,
            "improved": c.n01,
        },
        "signTest": None
        if c.test is None
        else {
            "p": c.test.p,
            "up": c.test.up,
            "down": c.test.down,
            "unchanged": c.test.unchanged,
            "units": c.test.units,
            "alpha": ALPHA,
            "sameAsMcnemar": c.test.same_as_mcnemar,
            "method": "exact two-sided sign test on the nonzero B − A (scipy binomtest)",
        },
        "verdict": c.verdict,
        "verdictFrom": "first attempt" if c.seq_attempts is None else f"Seq@{c.seq_attempts}",
        "verdictReason": c.verdict_reason,
        "intervalVerdict": c.interval_verdict,
        "disagreement": c.disagreement,
        "borderline": c.borderline,
        "probBBeatsA": c.prob_b_beats_a,
        "power": None
        if c.power is None
        else {
            "n": c.power.n,
            "discordance": c.power.discordance,
            "ceiling": c.power.ceiling,
            "mde": c.power.mde,
            "mdeBeforeAaFloor": c.power.raw_mde,
        },
        "aa": None
        if c.aa is None
        else {
            "ids": [c.aa.first, c.aa.second],
            "flipped": c.aa.flipped,
            "pairedCases": c.aa.paired,
            "flipRate": c.aa.flip_rate,
        },
        "regressions": [_case_json(r) for r in c.regressed],
        "improvements": [_case_json(r) for r in c.improved],
        "gained": c.gained,
        "lost": c.lost,
        "leftOut": {
            "gradedInAOnly": c.only_a,
            "gradedInBOnly": c.only_b,
            "ungradedInA": c.ungraded_a,
            "ungradedInB": c.ungraded_b,
        },
        "unevenErrors": c.uneven_errors,
        "ranOneAfterTheOther": c.ran_one_after_the_other,
        "regressionToTheMean": c.regression_to_the_mean,
        "graderChanges": c.grader_changes,
        "warnings": c.warnings,
        "margin": c.margin,
        "scoreInterval": None
        if c.score is None
        else {
            "low": c.score.interval.low,
            "high": c.score.interval.high,
            "confidence": 0.95,
            "down": c.score.down,
            "up": c.score.up,
            "n": c.score.n,
            "method": "Tango (1998) score interval for the paired difference B − A",
        },
        "marginHeldBy": c.margin_held_by,
        "marginDecidedBy": None if c.margin is None else ["score", "bootstrap"],
        "holds": c.holds,
        "ship": c.ship,
    }
    if c.kinds is not None:
        body["kinds"] = {
            "rows": [
                {"kind": k.kind, "cases": k.cases, "aRate": k.a_rate, "bRate": k.b_rate}
                for k in c.kinds.rows
            ],
            "badNotFixed": c.kinds.not_fixed,
            "brokenGuards": c.kinds.broken_guards,
            "brokenControls": c.kinds.broken_controls,
        }
    if c.matrix is not None:
        body["matrix"] = {
            "kA": c.matrix.k_a,
            "kB": c.matrix.k_b,
            "counts": c.matrix.counts,
            "leftOut": c.matrix.left_out,
        }
    if gate:
        body["gate"] = "Ship it" if c.ship else "Hold"
    return body
