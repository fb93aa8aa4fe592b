"""The `neens exp` command group: run, compare, regrade, aa, list, status, session.

Registered through the `neens.cli` entry point `exp`. Human output goes to stdout, progress to
stderr when it is a terminal, and `--json` prints one JSON object instead (numbers unrounded).
Bad input exits 2 with one line on stderr naming the problem (a `ConfigError`, printed by
`neens`); Ctrl-C exits 130 and says how to resume.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from neens_eval.arg_types import count, number, positive_int, seconds

from neens.exp.ab_cli import add_ab_options, run_ab, uses_arms
from neens.exp.export_cli import register_export
from neens.exp.flags import concurrency, named, seed, trials
from neens.exp.matrix_args import add_matrix_options, refuse_matrix_flags
from neens.exp.metrics_cli import register_metrics
from neens.exp.plateau_cli import add_series_options, register_plateau
from neens.exp.replay_cli import register_replay
from neens.exp.sweep_cli import register as register_sweep


def _margin(text: str) -> float:
    value = number(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(
            f"must be a fraction from 0 to 1 (0.03 is 3pp), not {text}"
        )
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--database-url",
        type=named,
        metavar="URL",
        help="store to use (default: $NEENS_DATABASE_URL, else SQLite at .neens/neens.db)",
    )


def _add_run_options(
    parser: argparse.ArgumentParser,
    *,
    concurrency_help: str,
    resume_help: str,
    spec_nargs: str | None = None,
) -> None:
    """The options `exp run` and `exp aa` share: what to run, how much at once, and the
    resume and retries group."""
    parser.add_argument(
        "spec",
        metavar="SPEC",
        nargs=spec_nargs,
        type=named,
        help="the experiment spec (spec.json)",
    )
    parser.add_argument(
        "-d",
        "--dataset",
        type=named,
        metavar="NAME",
        help="datasets/NAME.jsonl, a path to a .jsonl file, or a Neens dataset (ds_…, dsv_…)",
    )
    parser.add_argument(
        "-g",
        "--grader",
        metavar="JSON",
        action="append",
        default=[],
        help='add a grader, e.g. -g \'{"kind": "exact"}\' (repeatable)',
    )
    parser.add_argument("--trials", type=trials, help="runs of each case (default: the spec's)")
    parser.add_argument("--concurrency", type=concurrency, default=8, help=concurrency_help)
    resume = parser.add_argument_group("resume and retries")
    resume.add_argument("--resume", nargs="?", const="", metavar="EXP", help=resume_help)
    resume.add_argument(
        "--retry-errors",
        action="store_true",
        help="with --resume: also run the errored case-trials again",
    )
    resume.add_argument(
        "--retries",
        type=count,
        default=3,
        help="retries of rate limits, 5xx and network errors (default 3); task failures are "
        "never retried",
    )
    resume.add_argument(
        "--trial-timeout",
        type=seconds,
        metavar="SEC",
        help="cap each case-trial's task at SEC seconds, retries included",
    )


def _run(args: argparse.Namespace) -> int:
    if uses_arms(args):
        refuse_matrix_flags(args, with_arms=True)
        return run_ab(args)
    from neens.exp.run_command import run_command

    holder: dict[str, Any] = {}
    try:
        return asyncio.run(run_command(args, holder))
    except KeyboardInterrupt:
        matrix_id = holder.get("matrix")
        if matrix_id is not None:
            print(
                f"neens: interrupted: the matrix {matrix_id} keeps every finished case-trial; run "
                f"the same command with --resume {matrix_id} to run only what is left",
                file=sys.stderr,
            )
            return 130
        experiment_id = holder.get("id")
        if experiment_id is None and args.watch:
            return 0  # Ctrl-C between runs ends a watch
        if experiment_id is None:
            print("neens: interrupted before the run started", file=sys.stderr)
        else:
            print(
                f"neens: interrupted: {experiment_id} keeps every finished case-trial; run the "
                f"same command with --resume {experiment_id} to run only what is left",
                file=sys.stderr,
            )
        return 130


def _aa(args: argparse.Namespace) -> int:
    from neens.exp.aa import aa_command

    holder: dict[str, Any] = {}
    try:
        return asyncio.run(aa_command(args, holder))
    except KeyboardInterrupt:
        ids = holder.get("ids")
        if ids is None:
            print("neens: interrupted before the runs started", file=sys.stderr)
        else:
            print(
                f"neens: interrupted: the A/A runs {ids[0]} and {ids[1]} keep every finished "
                f"case-trial; run the same command with --resume {ids[0]} to run only what is "
                "left",
                file=sys.stderr,
            )
        return 130


def _regrade(args: argparse.Namespace) -> int:
    from neens.exp.regrade import regrade_command

    return asyncio.run(regrade_command(args))


def _list(args: argparse.Namespace) -> int:
    from neens.exp.listing import list_command

    return asyncio.run(list_command(args))


def _status(args: argparse.Namespace) -> int:
    from neens.exp.listing import status_command

    return asyncio.run(status_command(args))


def _compare(args: argparse.Namespace) -> int:
    from neens.exp.compare import compare_command

    return asyncio.run(compare_command(args))


def _export(args: argparse.Namespace) -> int:
    from neens.exp.export import export_command

    return asyncio.run(export_command(args))


def _session_new(args: argparse.Namespace) -> int:
    from neens.exp.sessions import new_command

    return asyncio.run(new_command(args))


def _session_note(args: argparse.Namespace) -> int:
    from neens.exp.sessions import note_command

    return asyncio.run(note_command(args))


def _session_summary(args: argparse.Namespace) -> int:
    from neens.exp.sessions import summary_command

    return asyncio.run(summary_command(args))


def register(subparsers: Any) -> None:
    """Add `exp` and its commands to the `neens` command."""
    exp = subparsers.add_parser(
        "exp",
        help="the local experiment bench: run a task over a dataset, compare two runs",
        description=(
            "Run a task over a dataset and grade every answer (exp run), then compare two runs "
            "with paired statistics (exp compare). Works in a project folder with no server: "
            "experiments are saved in .neens/neens.db, or $NEENS_DATABASE_URL."
        ),
    )
    commands = exp.add_subparsers(dest="exp_command", metavar="COMMAND", required=True)

    run = commands.add_parser(
        "run",
        help="run and grade every case of a dataset, saving each case-trial as it finishes",
        description=(
            "Run the spec's task on every case of the dataset, TRIALS times each, grade every "
            "answer and save each case-trial as it finishes. Exits 0 when the run finished, "
            "errored case-trials included (they are counted). With --arm NAME=SPEC twice instead "
            "of SPEC: two configs as one A/B run, each case in both arms back to back."
        ),
    )
    _add_run_options(
        run,
        concurrency_help="case-trials in flight at once (default 8)",
        resume_help="run only what is left of EXP (default: the newest unfinished run of this "
        "spec's name; with --arm, either arm's id)",
        spec_nargs="?",
    )
    part = run.add_argument_group("partial runs")
    part.add_argument(
        "--failing",
        type=named,
        metavar="EXP",
        help="only the cases with a failed case-trial in EXP",
    )
    part.add_argument(
        "--case",
        type=named,
        metavar="ID",
        action="append",
        default=[],
        help="only this case (repeatable)",
    )
    part.add_argument("--first-n", type=positive_int, metavar="N", help="only the first N cases")
    part.add_argument("--sample", type=positive_int, metavar="N", help="N cases at random")
    part.add_argument(
        "--seed",
        type=seed,
        metavar="S",
        help="the seed of --sample, and with --arm of the arms' order (default 0)",
    )
    seq = run.add_argument_group("retry with feedback")
    seq.add_argument(
        "--seq",
        type=positive_int,
        metavar="N",
        default=1,
        help="try a failing case-trial again with feedback, up to N attempts in all; the pass "
        "rate stays the first attempt's and Seq@N is reported beside it",
    )
    seq.add_argument(
        "--feedback",
        choices=["reasons"],
        help="what a later attempt is told: the failing graders' reasons (the default with --seq)",
    )
    run.add_argument(
        "--watch",
        action="store_true",
        help="keep running: run again whenever the spec, the agent's files, a grader's files or "
        "the dataset change (only the graders: regrade the last outputs, no task calls); "
        "Enter runs again, q quits",
    )
    add_series_options(run)
    add_ab_options(run)
    add_matrix_options(run)
    _common(run)
    run.set_defaults(func=_run)

    compare = commands.add_parser(
        "compare",
        help="compare two runs case by case: B − A, its interval, McNemar, the regressions",
        description=(
            "Pair two runs by case and print B − A with a 95% paired bootstrap interval, exact "
            "McNemar on the cases that flipped, the verdict and the cases that regressed. The "
            "verdict is better or worse only when the interval excludes 0 and the exact sign "
            "test on the per-case differences agrees at 5%; inconclusive when the interval "
            "includes 0."
        ),
    )
    compare.add_argument("a", type=named, metavar="A", help="the baseline experiment")
    compare.add_argument("b", type=named, metavar="B", help="the candidate experiment")
    compare.add_argument(
        "--gate",
        action="store_true",
        help='print "Ship it" and exit 0 only when B is better and nothing holds it; else '
        "print why it holds and exit 1",
    )
    compare.add_argument(
        "--margin",
        type=_margin,
        metavar="M",
        help="non-inferiority: exit 1 unless the interval's lower end is above −M (0.03 = 3pp)",
    )
    compare.add_argument(
        "--cluster",
        type=named,
        metavar="FIELD",
        help="resample groups of related cases (the cases' group, kind, or a field of their "
        "input) instead of single cases; warns below 10 groups",
    )
    compare.add_argument(
        "--matrix", action="store_true", help="the cases by passes out of k in A and in B"
    )
    compare.add_argument(
        "--pairwise",
        type=named,
        metavar="JUDGE_JSON",
        action="append",
        default=[],
        help="an LLM judge that sees both answers, in both orders (repeat to ask several)",
    )
    compare.add_argument(
        "--labels-a",
        type=named,
        metavar="FILE",
        help='people\'s labels of A\'s answers, JSONL {"id", "passed"}: corrects each LLM '
        "judge's B − A (PPI++); with --labels-b",
    )
    compare.add_argument(
        "--labels-b",
        type=named,
        metavar="FILE",
        help="people's labels of B's answers; with --labels-a",
    )
    compare.add_argument(
        "--verdict",
        choices=["first", "seq"],
        default="first",
        help="seq: compare Seq@K outcomes, when both runs used the same --seq and --feedback "
        "(default: the first attempt's)",
    )
    compare.add_argument(
        "--seed",
        type=seed,
        help="seed of the bootstrap (default: derived from the paired outcomes)",
    )
    _common(compare)
    compare.set_defaults(func=_compare)

    register_export(commands, _export)

    aa = commands.add_parser(
        "aa",
        help="run one config twice, interleaved, and record its A/A flip rate",
        description=(
            "Run the spec twice as two experiments, each case-trial of one next to the same "
            "case-trial of the other, and print the A/A flip rate: the share of cases whose "
            "outcome differs by chance alone. exp compare never reports a minimum detectable "
            "effect below it for runs on the same dataset."
        ),
    )
    _add_run_options(
        aa,
        concurrency_help="case-trials in flight at once, shared by both runs (default 8)",
        resume_help="run only what is left of the A/A pair EXP (either of its ids; default: the "
        "newest unfinished pair of this spec's name)",
    )
    aa.add_argument(
        "--seed",
        type=seed,
        help="seed of the order within each pair (default 0; a resumed pair keeps its own)",
    )
    _common(aa)
    aa.set_defaults(func=_aa)

    regrade = commands.add_parser(
        "regrade",
        help="grade a stored experiment's outputs again with a spec's graders (no task calls)",
        description=(
            "Grade EXP's stored outputs again with SPEC's graders, without calling the task, and "
            "save the result as an experiment of its own linked to EXP. Prints the pass rate "
            "before and after and every case-trial whose outcome flipped."
        ),
    )
    regrade.add_argument(
        "experiment", type=named, metavar="EXP", help="the experiment to grade again"
    )
    regrade.add_argument("spec", type=named, metavar="SPEC", help="the spec whose graders to use")
    regrade.add_argument(
        "-g",
        "--grader",
        metavar="JSON",
        action="append",
        default=[],
        help="add a grader, as for exp run (repeatable)",
    )
    regrade.add_argument(
        "--concurrency",
        type=concurrency,
        default=8,
        help="case-trials graded at once (default 8)",
    )
    _common(regrade)
    regrade.set_defaults(func=_regrade)

    list_ = commands.add_parser("list", help="the experiments in this store, newest first")
    list_.add_argument(
        "--limit", type=positive_int, default=50, help="show at most this many (default 50)"
    )
    _common(list_)
    list_.set_defaults(func=_list)

    status = commands.add_parser(
        "status", help="progress, time left and cost so far of unfinished runs"
    )
    status.add_argument(
        "experiment",
        nargs="?",
        type=named,
        metavar="EXP",
        help="this experiment (default: unfinished ones)",
    )
    _common(status)
    status.set_defaults(func=_status)

    session = commands.add_parser(
        "session",
        help="a line of work in this folder: each run's delta against the previous one, notes",
        description=(
            "Start a session in the current folder (exp session new); each exp run made here "
            "then prints its delta against the session's previous run on the same dataset and "
            "names the files that changed. Take notes (exp session note) and read the "
            "timeline (exp session summary)."
        ),
    )
    session_commands = session.add_subparsers(
        dest="session_command", metavar="COMMAND", required=True
    )
    new = session_commands.add_parser(
        "new",
        help="start a session in this folder and make it the folder's current one",
    )
    new.add_argument("--name", required=True, metavar="TOPIC", help="what the session is about")
    _common(new)
    new.set_defaults(func=_session_new)
    note = session_commands.add_parser(
        "note", help="record a hypothesis or a reading in the current session"
    )
    note.add_argument("text", metavar="TEXT", help="the note")
    _common(note)
    note.set_defaults(func=_session_note)
    summary = session_commands.add_parser(
        "summary",
        help="the current session's timeline: runs with pass rate and delta, notes, in order",
    )
    _common(summary)
    summary.set_defaults(func=_session_summary)
    register_plateau(commands, _common)
    register_metrics(commands)
    register_replay(commands, _common)
    register_sweep(commands, _common)
