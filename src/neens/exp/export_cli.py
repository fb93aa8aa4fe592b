"""The flags of `neens exp export` (the command is `neens.exp.export`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neens.exp.flags import named


def register_export(commands: Any, handler: Callable[[argparse.Namespace], int]) -> None:
    export = commands.add_parser(
        "export",
        help="write an experiment (and its comparison) as an evidence bundle anyone can verify",
        description=(
            "Write an evidence bundle: the experiment's numbers (pass rate, cost, the strict "
            "case rate with its Wilson interval, the unbiased pass^k) and, with --against A, "
            "the paired comparison `exp compare A EXP --json` prints; every case-trial "
            "(items.jsonl, and items.parquet when pyarrow is installed); the cases; a manifest "
            "with the sha256 of every file; and verify.py, which recomputes every number with "
            "the Python standard library alone. Exits 0 when written, 2 on bad input."
        ),
    )
    export.add_argument(
        "experiment", type=named, metavar="EXP", help="the experiment (its id or its start)"
    )
    export.add_argument(
        "--against",
        type=named,
        metavar="A",
        help="also compare EXP with the baseline experiment A, as `exp compare A EXP` does",
    )
    export.add_argument(
        "--out",
        required=True,
        type=named,
        metavar="DIR",
        help="the directory to write; new or empty",
    )
    export.add_argument(
        "--sign",
        type=Path,
        metavar="KEYFILE",
        help="sign the bundle with this Ed25519 private key (PEM, PKCS#8)",
    )
    export.add_argument(
        "--database-url",
        type=named,
        metavar="URL",
        help="store to use (default: $NEENS_DATABASE_URL, else SQLite at .neens/neens.db)",
    )
    export.set_defaults(func=handler)
