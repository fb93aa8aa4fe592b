"""The command line of `neens eval run` and `neens eval push`: the flags, their types, and the
checks on which flags go together. Turning the flags into a gate policy happens here too.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from neens_eval.arg_types import count, fraction, number, positive_int, seconds
from neens_eval.client import RETRY_WINDOW_VAR, parse_window
from neens_eval.errors import ConfigError
from neens_eval.gate_policy import (
    POLICY_ENV_VAR,
    GatePolicy,
    check_server_gate,
    flag_rule,
    load_policy,
    with_flag_rules,
)

if TYPE_CHECKING:
    from neens_eval.cli import Subparsers


DEFAULT_TIMEOUT_S: Final = 600.0


DEFAULT_ITEM_TIMEOUT_S: Final = 300.0


WINDOW_UNITS_S: Final = {"m": 60, "h": 3600, "d": 86400}
MAX_WINDOW_S: Final = 366 * 86400
_WINDOW = re.compile(r"([1-9][0-9]{0,3})([mhd])")


def window_seconds(text: str) -> int | None:
    """The seconds a baseline window such as 7d, 24h or 30m spans, or None when `text` is not
    one or is longer than 366 days. The server reads a run's `range` by the same rules, and
    tests/shared/baseline_ranges.json holds both to them, so a window this accepts is never
    refused by the server."""
    match = _WINDOW.fullmatch(text)
    if match is None:
        return None
    seconds = int(match[1]) * WINDOW_UNITS_S[match[2]]
    return seconds if seconds <= MAX_WINDOW_S else None


EXIT_CODES_HELP: Final = """\
exit codes:
  0  the gate passed (or --no-gate, whatever the verdict or its absence)
  1  the gate failed: the server gate, a `block` rule, or items whose command failed
  2  usage or configuration error: a bad flag or policy file, a missing NEENS_BASE_URL or
     NEENS_API_KEY, a refused key, a dataset without a golden version
  3  no verdict: the server could not be reached for the whole retry window, or --timeout
     ran out
"""


CREATE_ONLY = (
    ("dataset", "--dataset"),
    ("version_label", "--version-label"),
    ("name", "--name"),
    ("dataset_version", "--dataset-version"),
    ("baseline", "--baseline"),
    ("min_pass_rate", "--min-pass-rate"),
    ("max_regressions", "--max-regressions"),
    ("judges", "--judge"),
    ("agent_connection", "--agent-connection"),
)


def add_commands(
    subparsers: Subparsers,
    *,
    run: Callable[[argparse.Namespace], int],
    push: Callable[[argparse.Namespace], int],
) -> None:
    """Add the `eval` group with its `run` and `push` commands, carried out by `run` and `push`."""
    group = subparsers.add_parser(
        "eval",
        help="run a pre-prod evaluation and gate on its verdict",
        description=(
            "Run a candidate version of your agent over a golden dataset, wait for Neens's "
            "verdict, and exit with it (0 passed, 1 failed, 2 usage error, 3 no verdict)."
        ),
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND")

    run_parser = commands.add_parser(
        "run",
        help="run your agent command once per golden prompt, then gate",
        description=(
            "Invoke COMMAND once per frozen prompt still pending in the run, with the prompt on "
            "stdin and in $NEENS_ITEM_INPUT, and the correlation attributes (neens.eval_run_id, "
            "neens.dataset_item_id, neens.version_label) in OTEL_RESOURCE_ATTRIBUTES; then wait "
            "for the verdict and exit with it."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage=(
            "neens eval run (--create --dataset NAME|ID --version-label LABEL | --run-id ID) "
            "[options] -- COMMAND [ARG ...]"
        ),
    )
    which = run_parser.add_argument_group("which run")
    which.add_argument("--create", action="store_true", help="create a new run and drive it")
    which.add_argument(
        "--run-id",
        metavar="ID",
        help="drive an existing run (ppr_…): run its pending items, or just wait for a push run",
    )
    _add_create_options(run_parser)
    invoking = run_parser.add_argument_group("running the agent")
    invoking.add_argument(
        "--concurrency",
        type=positive_int,
        default=1,
        metavar="N",
        help="items run at the same time (default 1); each is tagged with its own item id",
    )
    invoking.add_argument(
        "--item-timeout",
        type=seconds,
        default=DEFAULT_ITEM_TIMEOUT_S,
        metavar="SECONDS",
        help=f"kill one item's command after this long (default {DEFAULT_ITEM_TIMEOUT_S:g})",
    )
    _add_gate_options(run_parser)
    run_parser.add_argument(
        "command", nargs="*", metavar="COMMAND", help="the agent command, after --"
    )
    run_parser.set_defaults(func=run)

    push_parser = commands.add_parser(
        "push",
        help="have Neens call your agent endpoint once per golden prompt, then gate",
        description=(
            "Create a push-mode run: Neens calls the agent connection with every golden prompt "
            "and scores the answers. Wait for the verdict and exit with it. With --run-id, "
            "follow an existing run (push or runner mode) instead, and gate on it."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage=(
            "neens eval push (--dataset NAME|ID --version-label LABEL --agent-connection ID | "
            "--run-id ID) [options]"
        ),
    )
    push_parser.add_argument(
        "--agent-connection",
        metavar="ID",
        help="the agent connection Neens calls (conn_…), see POST /agent-connections",
    )
    push_parser.add_argument(
        "--run-id",
        metavar="ID",
        help="follow an existing run (ppr_…) to its verdict instead of creating one",
    )
    _add_create_options(push_parser)
    _add_gate_options(push_parser)
    push_parser.set_defaults(func=push)


def _add_create_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("creating the run")
    group.add_argument(
        "--dataset",
        metavar="NAME|ID",
        help="the golden dataset: its name, or its id (ds_…)",
    )
    group.add_argument(
        "--version-label", metavar="LABEL", help="what is evaluated: a git SHA, pr-482, …"
    )
    group.add_argument("--name", help="a name for the run (default: the version label)")
    group.add_argument(
        "--dataset-version",
        metavar="ID",
        help="pin a dataset version (dsv_…) instead of the dataset's golden version",
    )
    group.add_argument(
        "--baseline",
        type=_baseline,
        metavar="prod:WINDOW|run:ID",
        help="compare with production over a window (prod:7d, prod:24h) or an earlier run "
        "(run:ppr_…)",
    )
    group.add_argument(
        "--judge",
        dest="judges",
        action="extend",
        nargs="+",
        metavar="ID",
        help="judges that score the run (jdg_…; repeatable); default: the Primary Score",
    )
    group.add_argument(
        "--project-id",
        metavar="ID",
        help="not supported: the API key decides the project (see docs/cli.md)",
    )


def _add_gate_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the gate")
    group.add_argument(
        "--min-pass-rate",
        type=fraction,
        metavar="X",
        help="server gate: the least share of items that must pass (0..1)",
    )
    group.add_argument(
        "--max-regressions",
        type=count,
        metavar="N",
        help="server gate: the most items that may regress against the baseline",
    )
    group.add_argument(
        "--gate-policy",
        type=Path,
        metavar="PATH",
        help=f"a gate policy file, JSON or YAML (default: ${POLICY_ENV_VAR})",
    )
    group.add_argument(
        "--max-cost-delta-pct",
        type=_pct,
        metavar="PCT",
        help="block rule: cost may grow at most PCT%% over the baseline (negative: must shrink)",
    )
    group.add_argument(
        "--max-latency-delta-pct",
        type=_pct,
        metavar="PCT",
        help="block rule: latency may grow at most PCT%% over the baseline",
    )
    group.add_argument(
        "--min-avg-score",
        type=fraction,
        metavar="X",
        help="block rule: the mean item score must be at least X (0..1)",
    )
    group.add_argument(
        "--max-abs-failures",
        type=count,
        metavar="N",
        help="block rule: at most N items may fail or error",
    )
    output = parser.add_argument_group("waiting and output")
    output.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for the verdict (default {DEFAULT_TIMEOUT_S:g}); then exit 3",
    )
    output.add_argument(
        "--retry-window",
        type=_window,
        metavar="SECONDS",
        help=f"how long to keep retrying while Neens does not answer, then exit 3 (default: "
        f"${RETRY_WINDOW_VAR}, else 60)",
    )
    output.add_argument(
        "--no-gate",
        action="store_true",
        help="print the gate but exit 0 when it fails (usage errors still exit 2)",
    )
    output.add_argument(
        "--json",
        action="store_true",
        dest="as_json",
        help="write one JSON result to stdout (the summary goes to stderr)",
    )
    output.add_argument(
        "--summary-md",
        type=Path,
        metavar="FILE",
        help="also write the result as markdown to FILE, for a CI step to post on the pull request",
    )


def server_gate(policy: GatePolicy, args: argparse.Namespace) -> dict[str, Any]:
    """The gate sent at create: the policy's `gate` block, with the flags' thresholds on top."""
    gate = dict(policy.gate or {})
    if args.min_pass_rate is not None:
        gate["min_pass_rate"] = args.min_pass_rate
    if args.max_regressions is not None:
        gate["max_regressions"] = args.max_regressions
    return gate


def policy_from_args(args: argparse.Namespace) -> GatePolicy:
    path: Path | None = args.gate_policy
    if path is None and os.environ.get(POLICY_ENV_VAR, "").strip():
        path = Path(os.environ[POLICY_ENV_VAR].strip())
    policy = load_policy(path) if path is not None else GatePolicy()
    flags = [
        ("--max-cost-delta-pct", "cost", "max_delta_pct", args.max_cost_delta_pct),
        ("--max-latency-delta-pct", "latency", "max_delta_pct", args.max_latency_delta_pct),
        ("--min-avg-score", "min_avg_score", "min_avg_score", args.min_avg_score),
        ("--max-abs-failures", "max_abs_failures", "max_abs_failures", args.max_abs_failures),
    ]
    policy = with_flag_rules(
        policy,
        [
            flag_rule(flag, dimension, budget, float(value))
            for flag, dimension, budget, value in flags
            if value is not None
        ],
    )
    for note in policy.notes:
        sys.stderr.write(f"neens: note: {note}\n")
    if policy.gate is not None:
        check_server_gate(policy.gate, f"gate policy {policy.source}: gate")
    return policy


def refuse_create_flags(args: argparse.Namespace, instead: str) -> None:
    given = [flag for attr, flag in CREATE_ONLY if getattr(args, attr, None) is not None]
    if given:
        several = len(given) > 1
        raise ConfigError(
            f"{', '.join(given)} {'are' if several else 'is'} only for creating a run: with "
            f"{instead} the run keeps the dataset, baseline, judges and server gate it was "
            f"created with; drop {'them' if several else 'it'} (client-side rules such as "
            f"--min-avg-score or --gate-policy still apply)"
        )


def require_create_fields(args: argparse.Namespace) -> None:
    missing = [flag for attr, flag in CREATE_ONLY[:2] if not (getattr(args, attr) or "").strip()]
    if missing:
        raise ConfigError(
            f"{' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} required to create "
            f'a run, for example: --dataset support-golden --version-label "$GIT_SHA"'
        )


def refuse_project_id(args: argparse.Namespace) -> None:
    if args.project_id is not None:
        raise ConfigError(
            "--project-id is not supported: the API key decides the project of the run; drop "
            "--project-id and set NEENS_API_KEY to a key of the project you want"
        )


def _baseline(text: str) -> dict[str, str]:
    kind, _, value = text.partition(":")
    if kind == "prod" and window_seconds(value) is not None:
        return {"kind": "prod_window", "range": value}
    if kind == "run" and value.strip():
        return {"kind": "preprod_run", "value": value.strip()}
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a baseline; use prod:WINDOW (prod:7d, prod:24h, prod:30m; at most "
        f"366 days) or run:RUN_ID (run:ppr_…)"
    )


def _pct(text: str) -> float:
    value = number(text)
    if value < -100:
        raise argparse.ArgumentTypeError(f"{text} is below -100 (cheaper than free)")
    return value


def _window(text: str) -> float:
    try:
        return parse_window(text, "--retry-window")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--retry-window: ")) from None
