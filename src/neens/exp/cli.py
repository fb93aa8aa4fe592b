"""The `neens exp` command group: run, compare, regrade, aa, list, status.

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

from neens.exp.metrics_cli import register_metrics
from neens.exp.plateau_cli import add_series_options, register_plateau


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(
            f"must be a fraction from 0 to 1 (0.03 is 3pp), not {text}"
        )
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="store to use (default: $NEENS_DATABASE_URL, else SQLite at .neens/neens.db)",
    )


def _run(args: argparse.Namespace) -> int:
    from neens.exp.run_command import run_command

    holder: dict[str, Any] = {}
    try:
        return asyncio.run(run_command(args, holder))
    except KeyboardInterrupt:
        experiment_id = holder.get("id")
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
                f"neens: interrupted: the A/A runs {ids[0]} and {ids[1]} are partial and give "
                "no flip rate; run exp aa again",
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
            "errored case-trials included (they are counted)."
        ),
    )
    run.add_argument("spec", metavar="SPEC", help="the experiment spec (spec.json)")
    run.add_argument(
        "-d",
        "--dataset",
        metavar="NAME",
        help="datasets/NAME.jsonl, a path to a .jsonl file, or a Neens dataset (ds_…, dsv_…)",
    )
    run.add_argument(
        "-g",
        "--grader",
        metavar="JSON",
        action="append",
        default=[],
        help='add a grader, e.g. -g \'{"kind": "exact"}\' (repeatable)',
    )
    run.add_argument("--trials", type=_positive_int, help="runs of each case (default: the spec's)")
    run.add_argument(
        "--concurrency",
        type=_positive_int,
        default=8,
        help="case-trials in flight at once (default 8)",
    )
    part = run.add_argument_group("partial runs")
    part.add_argument(
        "--failing", metavar="EXP", help="only the cases with a failed case-trial in EXP"
    )
    part.add_argument(
        "--case", metavar="ID", action="append", default=[], help="only this case (repeatable)"
    )
    part.add_argument("--first-n", type=_positive_int, metavar="N", help="only the first N cases")
    part.add_argument("--sample", type=_positive_int, metavar="N", help="N cases at random")
    part.add_argument("--seed", type=int, metavar="S", help="the seed of --sample (default 0)")
    seq = run.add_argument_group("retry with feedback")
    seq.add_argument(
        "--seq",
        type=_positive_int,
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
    resume = run.add_argument_group("resume and retries")
    resume.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="EXP",
        help="run only what is left of EXP (default: the newest unfinished run of this spec)",
    )
    resume.add_argument(
        "--retry-errors",
        action="store_true",
        help="with --resume: also run the errored case-trials again",
    )
    resume.add_argument(
        "--retries",
        type=_count,
        default=3,
        help="retries of rate limits, 5xx and network errors (default 3); task failures are "
        "never retried",
    )
    resume.add_argument(
        "--trial-timeout",
        type=_seconds,
        metavar="SEC",
        help="cap each case-trial's task at SEC seconds, retries included",
    )
    add_series_options(run)
    _common(run)
    run.set_defaults(func=_run)

    compare = commands.add_parser(
        "compare",
        help="compare two runs case by case: B − A, its interval, McNemar, the regressions",
        description=(
            "Pair two runs by case and print B − A with a 95%% paired bootstrap interval, exact "
            "McNemar on the cases that flipped, the verdict and the cases that regressed. The "
            "interval decides: inconclusive when it includes 0."
        ),
    )
    compare.add_argument("a", metavar="A", help="the baseline experiment")
    compare.add_argument("b", metavar="B", help="the candidate experiment")
    compare.add_argument(
        "--gate",
        action="store_true",
        help='print "Ship it" and exit 0 only when B is better and nothing holds it; else '
        "print why it holds and exit 1",
    )
    compare.add_argument(
        "--margin",
        type=_fraction,
        metavar="M",
        help="non-inferiority: exit 1 unless the interval's lower end is above −M (0.03 = 3pp)",
    )
    compare.add_argument(
        "--cluster",
        metavar="FIELD",
        help="resample groups of related cases (the cases' group, kind, or a field of their "
        "input) instead of single cases; warns below 10 groups",
    )
    compare.add_argument(
        "--matrix", action="store_true", help="the cases by passes out of k in A and in B"
    )
    compare.add_argument(
        "--pairwise",
        metavar="JUDGE_JSON",
        action="append",
        default=[],
        help="an LLM judge that sees both answers, in both orders (repeat to ask several)",
    )
    compare.add_argument(
        "--labels-a",
        metavar="FILE",
        help='people\'s labels of A\'s answers, JSONL {"id", "passed"}: corrects each LLM '
        "judge's B − A (PPI++); with --labels-b",
    )
    compare.add_argument(
        "--labels-b", metavar="FILE", help="people's labels of B's answers; with --labels-a"
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
        type=int,
        help="seed of the bootstrap (default: derived from the paired outcomes)",
    )
    _common(compare)
    compare.set_defaults(func=_compare)

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
    aa.add_argument("spec", metavar="SPEC", help="the experiment spec (spec.json)")
    aa.add_argument("-d", "--dataset", metavar="NAME", help="as for exp run")
    aa.add_argument(
        "-g", "--grader", metavar="JSON", action="append", default=[], help="as for exp run"
    )
    aa.add_argument("--trials", type=_positive_int, help="runs of each case in each run")
    aa.add_argument(
        "--concurrency", type=_positive_int, default=8, help="case-trials in flight (default 8)"
    )
    aa.add_argument("--retries", type=_count, default=3, help="as for exp run (default 3)")
    aa.add_argument("--trial-timeout", type=_seconds, metavar="SEC", help="as for exp run")
    aa.add_argument(
        "--seed", type=int, default=0, help="seed of the order within each pair (default 0)"
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
    regrade.add_argument("experiment", metavar="EXP", help="the experiment to grade again")
    regrade.add_argument("spec", metavar="SPEC", help="the spec whose graders to use")
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
        type=_positive_int,
        default=8,
        help="case-trials graded at once (default 8)",
    )
    _common(regrade)
    regrade.set_defaults(func=_regrade)

    list_ = commands.add_parser("list", help="the experiments in this store, newest first")
    list_.add_argument(
        "--limit", type=_positive_int, default=50, help="show at most this many (default 50)"
    )
    _common(list_)
    list_.set_defaults(func=_list)

    status = commands.add_parser(
        "status", help="progress, time left and cost so far of unfinished runs"
    )
    status.add_argument(
        "experiment", nargs="?", metavar="EXP", help="this experiment (default: unfinished ones)"
    )
    _common(status)
    status.set_defaults(func=_status)

    register_plateau(commands, _common)
    register_metrics(commands)
