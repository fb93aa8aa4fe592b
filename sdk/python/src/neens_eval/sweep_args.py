"""The command line of `neens sweep preview|start|get|cancel|decide`: the flags, their types, the
checks on which flags go together, and the request (body or query) the flags describe.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from neens_eval.arg_types import count, fraction, positive_int, seconds
from neens_eval.errors import ApiError, ConfigError
from neens_eval.eval_args import _window

if TYPE_CHECKING:
    from neens_eval.cli import Subparsers

DEFAULT_SWEEP_TIMEOUT_S: Final = 3600.0
"""A sweep runs every arm k times over the dataset: it takes longer than one eval run."""

EXIT_CODES_HELP: Final = """\
exit codes:
  0  done: the sweep was previewed, started, read, cancelled or decided; a finished sweep whose
     arms did not all pass, or in which no arm clears the bar, still exits 0 (a sweep is
     informational)
  1  --require-all-arms, and an arm did not pass pass^k; or `decide --require-winner`, and the
     verdict recommends no arm
  2  usage or configuration error, or the server refused the request (a 4xx answer)
  3  no verdict: the server could not be reached for the whole retry window, or --timeout ran
     out while waiting (or --require-all-arms or --require-winner on a sweep that has not
     finished)
  4  the evidence cannot be trusted or does not exist: the sweep is void (always, with the
     reason), or failed, or was cancelled (with the reason)
"""

DECIDE_EXIT_CODES_HELP: Final = """\
exit codes:
  0  the verdict was read, whatever it says (a sweep is informational), and also while the
     sweep is still running when neither --wait nor --require-winner was given
  1  --require-winner, and the verdict of the finished sweep recommends no arm
  2  usage or configuration error (such as a --bar outside 0..1), or the server refused the
     request (such as a --baseline-arm that is not an arm of the sweep)
  3  no verdict: the server could not be reached for the whole retry window, --timeout ran out
     while waiting, or --require-winner on a sweep that has not finished
  4  the sweep is void (always, with the reason, --json too), failed or cancelled
"""


@dataclass(frozen=True, slots=True)
class Arm:
    """One `--arm LABEL=CONNECTION_ID`, as given (`text`) and as sent."""

    label: str
    connection_id: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"label": self.label, "agentConnectionId": self.connection_id}


def parse_arm(text: str) -> Arm:
    """`sonnet=conn_…` as an arm. The label is everything before the last `=`, so a label may
    hold one; a connection id never does."""
    label, equals, connection = text.rpartition("=")
    label, connection = label.strip(), connection.strip()
    if not equals or not label or not connection:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not LABEL=CONNECTION_ID; write one arm per flag, such as "
            f"--arm sonnet=conn_01J…"
        )
    if any(char.isspace() for char in connection):
        raise argparse.ArgumentTypeError(
            f"{text!r}: the connection id {connection!r} contains whitespace; write "
            f"LABEL=CONNECTION_ID, such as --arm sonnet=conn_01J…"
        )
    if label.startswith("conn_") and not connection.startswith("conn_"):
        raise argparse.ArgumentTypeError(
            f"{text!r} looks reversed: write LABEL=CONNECTION_ID, such as "
            f"--arm {connection}={label}"
        )
    return Arm(label, connection, text)


def add_commands(
    subparsers: Subparsers,
    *,
    preview: Callable[[argparse.Namespace], int],
    start: Callable[[argparse.Namespace], int],
    get: Callable[[argparse.Namespace], int],
    cancel: Callable[[argparse.Namespace], int],
    decide: Callable[[argparse.Namespace], int],
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Add the `sweep` group and its five commands, carried out by the given handlers; returns
    the group's commands, for the commands other modules add."""
    group = subparsers.add_parser(
        "sweep",
        help="compare models: one golden dataset against several agent endpoints, k runs each",
        description=(
            "Run a model sweep: replay one frozen golden dataset against several arms (one "
            "model behind one agent connection each) under identical conditions; an arm passes "
            "only when all k of its runs are green. Preview the cost first, then start it, then "
            "read the server's decision."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND")

    preview_parser = commands.add_parser(
        "preview",
        help="what a sweep would call and cost; writes nothing, spends nothing",
        description=(
            "Ask Neens what the sweep would cost: per arm its model, its calls (k x items), the "
            "estimated USD or 'unpriced', and what the estimate rests on; the totals; and "
            "whether starting it would be refused on --budget-usd. Nothing is created."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="neens sweep preview (--dataset-id ID | --dataset-version-id ID) "
        "--arm LABEL=CONN_ID --arm LABEL=CONN_ID ... [options]",
    )
    _add_definition(preview_parser, creating=False)
    _add_output(preview_parser, waits=False)
    preview_parser.set_defaults(func=preview)

    start_parser = commands.add_parser(
        "start",
        help="start a sweep, and with --wait follow every arm to the end",
        description=(
            "Create the sweep and launch its arms. With --wait, show each arm's state live on "
            "standard error until the sweep is finished, then print the result."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="neens sweep start (--dataset-id ID | --dataset-version-id ID) "
        "--version-label LABEL --arm LABEL=CONN_ID --arm LABEL=CONN_ID ... [options]",
    )
    _add_definition(start_parser, creating=True)
    _add_output(start_parser, waits=True)
    start_parser.set_defaults(func=start)

    get_parser = commands.add_parser(
        "get",
        help="print a sweep, and with --wait follow it to the end",
        description="Read a sweep and print it; with --wait, follow it until it is finished.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="neens sweep get SWEEP_ID [--wait] [--timeout SECONDS] [--require-all-arms] "
        "[--retry-window SECONDS] [--json]",
    )
    get_parser.add_argument("sweep_id", metavar="SWEEP_ID", help="the sweep (msw-…)")
    _add_output(get_parser, waits=True)
    get_parser.set_defaults(func=get)

    cancel_parser = commands.add_parser(
        "cancel",
        help="cancel a sweep and its runs in flight",
        description=(
            "Cancel an unfinished sweep: its runs in flight are cancelled and no new call is "
            "made. A finished sweep is printed as it is. Exits 0 once the sweep is cancelled."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="neens sweep cancel SWEEP_ID [--retry-window SECONDS] [--json]",
    )
    cancel_parser.add_argument("sweep_id", metavar="SWEEP_ID", help="the sweep (msw-…)")
    _add_output(cancel_parser, waits=False)
    cancel_parser.set_defaults(func=cancel)

    decide_parser = commands.add_parser(
        "decide",
        help="read the server's verdict: which arm to ship, at what bar and cost, per agent",
        description=(
            "Read the comparison of a sweep's arms and print the server's verdict: the sentence, "
            "the bar and where it came from, the leaderboard as the server ranked it (each "
            "arm's rate with n and its 95% Wilson interval, flaky items, cost per case, "
            "regressions and new passes against the baseline arm), then the verdict per agent. "
            "Nothing is ranked here: the order is the server's. With --wait, follow the sweep "
            "until it is finished first."
        ),
        epilog=DECIDE_EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="neens sweep decide (--sweep-id ID | SWEEP_ID) [--bar X] [--baseline-arm ARM_ID] "
        "[--wait] [--timeout SECONDS] [--require-winner] [--retry-window SECONDS] [--json]",
    )
    decide_parser.add_argument(
        "sweep_id",
        nargs="?",
        metavar="SWEEP_ID",
        help="the sweep (msw-…), as with `neens sweep get`; the same as --sweep-id",
    )
    decision = decide_parser.add_argument_group("the decision")
    decision.add_argument(
        "--sweep-id", dest="sweep_id_flag", metavar="ID", help="the sweep to decide (msw-…)"
    )
    decision.add_argument(
        "--bar",
        type=fraction,
        metavar="X",
        help="the pass rate an arm must clear, 0..1 (0.9 is 90%%); default: the sweep's pinned "
        "gate min_pass_rate, else the server's default, 0.9",
    )
    decision.add_argument(
        "--baseline-arm",
        metavar="ARM_ID",
        help="the arm (msa-…) savings, regressions and new passes are measured against; "
        "default: the first arm of the sweep, never the best performer",
    )
    _add_output(decide_parser, waits=True, require="winner")
    decide_parser.set_defaults(func=decide)
    return commands


def _add_definition(parser: argparse.ArgumentParser, *, creating: bool) -> None:
    group = parser.add_argument_group("the sweep")
    group.add_argument("--dataset-id", metavar="ID", help="the golden dataset (ds_…)")
    group.add_argument(
        "--dataset-version-id",
        metavar="ID",
        help="pin a dataset version (dsv_…) instead of the dataset's golden version",
    )
    group.add_argument(
        "--arm",
        dest="arms",
        action="append",
        type=parse_arm,
        default=[],
        metavar="LABEL=CONN_ID",
        help="one arm: a label and the agent connection it calls (repeat, at least twice)",
    )
    group.add_argument(
        "--pass-k",
        type=positive_int,
        metavar="K",
        help="runs per arm; an arm passes only when all K are green (default: the server's, 3)",
    )
    group.add_argument(
        "--version-label",
        metavar="LABEL",
        help="what is evaluated: a git SHA, a date" + (" (required)" if creating else ""),
    )
    group.add_argument("--name", help="a name for the sweep (default: the version label)")
    group.add_argument(
        "--budget-usd",
        type=_usd,
        metavar="USD",
        help="refuse to start when the estimate is over USD, and stop the sweep when its "
        "spend crosses it",
    )
    group.add_argument(
        "--judge-id",
        dest="judge_ids",
        action="append",
        metavar="ID",
        help="a judge that scores every run (jdg_…; repeat); default: the Primary Score",
    )
    group.add_argument(
        "--min-pass-rate",
        type=fraction,
        metavar="X",
        help="the gate every run is held to: the least share of items that must pass (0..1)",
    )
    group.add_argument(
        "--max-regressions",
        type=count,
        metavar="N",
        help="the gate every run is held to: the most items that may regress",
    )


def _add_output(
    parser: argparse.ArgumentParser,
    *,
    waits: bool,
    require: Literal["all-arms", "winner"] = "all-arms",
) -> None:
    group = parser.add_argument_group("waiting and output")
    if waits:
        group.add_argument(
            "--wait",
            action="store_true",
            help="follow the sweep until it is finished, each arm's state live on stderr",
        )
        group.add_argument(
            "--timeout",
            type=seconds,
            default=DEFAULT_SWEEP_TIMEOUT_S,
            metavar="SECONDS",
            help=f"with --wait: how long to wait (default {DEFAULT_SWEEP_TIMEOUT_S:g}); then "
            f"exit 3",
        )
        if require == "winner":
            group.add_argument(
                "--require-winner",
                action="store_true",
                help="exit 1 unless the verdict recommends an arm (one clears the bar), 3 while "
                "the sweep has not finished (default: the verdict is informational)",
            )
        else:
            group.add_argument(
                "--require-all-arms",
                action="store_true",
                help="exit 1 unless every arm passed pass^k (default: a sweep is informational)",
            )
    group.add_argument(
        "--retry-window",
        type=_window,
        metavar="SECONDS",
        help="how long to keep retrying while Neens does not answer, then exit 3 (default: "
        "$NEENS_RETRY_WINDOW, else 60)",
    )
    group.add_argument(
        "--json",
        action="store_true",
        dest="as_json",
        help="write the server's JSON answer to stdout (the summary goes to stderr)",
    )


def sweep_body(args: argparse.Namespace, *, creating: bool) -> dict[str, Any]:
    """The request body of POST /model-sweeps (or its preview) the flags describe."""
    dataset_id = _given(args.dataset_id)
    version_id = _given(args.dataset_version_id)
    if dataset_id is None and version_id is None:
        raise ConfigError(
            "give the golden dataset with --dataset-id ds_…, or pin a version with "
            "--dataset-version-id dsv_…"
        )
    label = _given(args.version_label)
    if creating and label is None:
        raise ConfigError(
            '--version-label is required to start a sweep, for example: --version-label "$GIT_SHA"'
        )
    if creating and args.require_all_arms and not args.wait:
        raise ConfigError(
            "--require-all-arms needs --wait: a sweep that was just started has no verdict yet; "
            "add --wait, or check it later with `neens sweep get SWEEP_ID --require-all-arms`"
        )
    if not args.arms:
        raise ConfigError(
            "give the arms to compare, one --arm LABEL=CONNECTION_ID each, at least two: "
            "--arm sonnet=conn_… --arm mini=conn_…"
        )
    body: dict[str, Any] = {}
    if args.name is not None:
        body["name"] = args.name
    if label is not None:
        body["versionLabel"] = label
    if dataset_id is not None:
        body["datasetId"] = dataset_id
    if version_id is not None:
        body["datasetVersionId"] = version_id
    if args.pass_k is not None:
        body["passK"] = args.pass_k
    if args.budget_usd is not None:
        body["budgetUsd"] = args.budget_usd
    if args.judge_ids:
        body["judgeDeploymentIds"] = list(args.judge_ids)
    gate: dict[str, Any] = {}
    if args.min_pass_rate is not None:
        gate["min_pass_rate"] = args.min_pass_rate
    if args.max_regressions is not None:
        gate["max_regressions"] = args.max_regressions
    if gate:
        body["gate"] = gate
    body["arms"] = [arm.to_json() for arm in args.arms]
    return body


@dataclass(frozen=True, slots=True)
class DecideRequest:
    """What `neens sweep decide` asks: the sweep, and the query of its comparison."""

    sweep_id: str
    bar: float | None
    baseline_arm: str | None

    def params(self) -> dict[str, str | None]:
        """The query of GET /model-sweeps/{id}/comparison (None values are left out); the bar
        as `repr` writes it, so it reaches the server with every digit it was given."""
        bar = None if self.bar is None else repr(self.bar)
        return {"bar": bar, "baselineArm": self.baseline_arm}


def decide_request(args: argparse.Namespace) -> DecideRequest:
    """The sweep and the query `neens sweep decide`'s flags describe; a `ConfigError` when the
    sweep is missing, given twice differently, or --baseline-arm is empty."""
    positional, flag = _given(args.sweep_id), _given(args.sweep_id_flag)
    if positional is not None and flag is not None and positional != flag:
        raise ConfigError(
            f"two different sweeps were given ({positional} and --sweep-id {flag}); give one, "
            f"with --sweep-id msw-…"
        )
    sweep_id = flag or positional
    if sweep_id is None:
        raise ConfigError("give the sweep to decide with --sweep-id msw-…")
    baseline = args.baseline_arm
    if baseline is not None and _given(baseline) is None:
        raise ConfigError(
            "--baseline-arm is empty; give the arm id (msa-…) to compare against, or leave the "
            "flag out to compare against the first arm"
        )
    return DecideRequest(sweep_id, args.bar, _given(baseline))


FIELD_FLAGS: Final = {
    "name": "--name",
    "versionLabel": "--version-label",
    "datasetId": "--dataset-id",
    "datasetVersionId": "--dataset-version-id",
    "passK": "--pass-k",
    "budgetUsd": "--budget-usd",
    "judgeDeploymentIds": "--judge-id",
    "gate": "--min-pass-rate/--max-regressions",
    "arms": "--arm",
}
DECIDE_FIELD_FLAGS: Final = {
    "bar": "--bar",
    "baselineArm": "--baseline-arm",
    "sweep_id": "--sweep-id",
}
"""The query fields (and the path's sweep id) of GET /model-sweeps/{id}/comparison, by flag."""
_ARM_FIELD = re.compile(r"arms\[(\d+)\]")


def refused_as_usage(
    error: ApiError, arms: Sequence[Arm] = (), flags: Mapping[str, str] = FIELD_FLAGS
) -> ConfigError | None:
    """A 4xx refusal of the request, said in terms of the flag that carried the field
    (`arms[1].label` is the second `--arm`, quoted as it was given); None when the error names
    no field of the request. `flags` maps the fields to their flags."""
    if not 400 <= error.status < 500 or not error.field:
        return None
    match = _ARM_FIELD.match(error.field)
    if match is not None and int(match[1]) < len(arms):
        index = int(match[1])
        return ConfigError(f"--arm {arms[index].text!r} (arm {index + 1}): {error}")
    flag = flags.get(error.field.split(".", 1)[0].split("[", 1)[0])
    if flag is None:
        return None
    return ConfigError(f"{flag}: {error}")


def _given(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    return value.strip()


def _usd(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount in USD, such as 10") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not an amount in USD (0 or more), such as 10")
    return value
