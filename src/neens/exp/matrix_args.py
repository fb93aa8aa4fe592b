"""`neens exp run`'s flags for matrix specs, kept apart from the matrix runner
(`neens.exp.matrix_cli`) so that building the `neens` command's parser imports no database or
statistics code: the parser is built on every `neens` call, `--help` and client commands too.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from neens_eval.errors import ConfigError

from neens.exp.matrix import read_raw

DEFAULT_REUSE_MAX_AGE: Final = "7d"


def add_matrix_options(parser: argparse.ArgumentParser) -> None:
    """`exp run`'s flags for a matrix spec."""
    group = parser.add_argument_group("matrix specs (a spec with matrix or variants)")
    group.add_argument(
        "--plan",
        action="store_true",
        help="print the cells and what each changes, and run nothing",
    )
    group.add_argument(
        "--cell",
        metavar="NAME",
        action="append",
        default=[],
        help="run only this cell (repeatable); the baseline always runs",
    )
    group.add_argument(
        "--reuse",
        choices=["baseline", "all"],
        help="copy the finished case-trials of earlier runs of the identical config (the "
        "baseline's, or every cell's) instead of running them again",
    )
    group.add_argument(
        "--reuse-max-age",
        metavar="AGE",
        help=f"with --reuse: copy only case-trials that started within AGE (30m, 24h, 7d; "
        f"default {DEFAULT_REUSE_MAX_AGE})",
    )


def refuse_matrix_flags(args: argparse.Namespace, *, with_arms: bool = False) -> None:
    """The matrix flags on a spec that is not a matrix, or with --arm: exit 2, naming the flag.
    A spec that cannot be read is left to `read_spec`, which says why."""
    if not with_arms and read_raw(Path(args.spec)) is None:
        return
    where = "not with --arm" if with_arms else f"{args.spec} has no matrix or variants"
    for flag, given in (
        ("--plan", args.plan),
        ("--cell", bool(args.cell)),
        ("--reuse", args.reuse is not None),
        ("--reuse-max-age", args.reuse_max_age is not None),
    ):
        if given:
            raise ConfigError(f"{flag}: only with a matrix spec ({where})")
