"""`neens sweep export`: a finished sweep's decision and the evidence behind it, as a bundle
anyone can check offline (`neens_eval.evidence`, docs/evidence.md).

    neens sweep export msw-… --out evidence/
    neens sweep export msw-… --out evidence/ --bar 0.9 --baseline-arm msa-… --sign signing.pem

The decision (`GET /model-sweeps/{id}/comparison`, with the same --bar and --baseline-arm as
`neens sweep decide`) is stored exactly as served, beside every answer it was computed from
(`GET /model-sweeps/{id}/evidence`) and a verify.py that recomputes it. The two are read until
they describe the sweep in the same state, and only a finished sweep is exported: the evidence
of a running one changes between the two reads. A void sweep is exported with its void (no
ranking, no winner: as served) and exits 4, as every sweep command does for a void sweep.

Exit codes: 0 written; 2 usage, configuration or a refused request (nothing written); 3 the
server could not be reached, or the sweep has not finished (nothing written); 4 written, and the
sweep is void, failed or cancelled (the reason on standard error).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from neens_eval.arg_types import fraction
from neens_eval.client import Client, expect_object
from neens_eval.errors import EXIT_UNREACHABLE, EXIT_UNTRUSTED, ApiError, Unreachable
from neens_eval.eval_args import _window
from neens_eval.evidence import (
    check_out_dir,
    json_bytes,
    jsonl_bytes,
    parquet_bytes,
    write_bundle,
)
from neens_eval.sweep import make_client, sweep_path
from neens_eval.sweep_args import DECIDE_FIELD_FLAGS, decide_request, refused_as_usage
from neens_eval.sweep_render import SWEEP_TERMINAL
from neens_eval.waiting import Board

if TYPE_CHECKING:
    import argparse as _argparse

READS: Final = 3
"""How many times the comparison and the evidence are read to find them in the same state."""
UNTRUSTED: Final = frozenset({"void", "failed", "cancelled"})

EXIT_CODES_HELP: Final = """\
exit codes:
  0  the bundle was written
  2  usage or configuration error, --out is not empty, or the server refused the request
     (nothing written)
  3  the server could not be reached, or the sweep has not finished (nothing written)
  4  the bundle was written, and the sweep is void (its void, never a ranking), failed or
     cancelled
"""


def add_export(commands: _argparse._SubParsersAction[_argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "export",
        help="write the decision and its evidence to a directory anyone can verify offline",
        description=(
            "Write an evidence bundle: the sweep's decision as the server serves it, every "
            "answer of every arm (items.jsonl, and items.parquet when pyarrow is installed), "
            "the frozen cases, a manifest with the sha256 of every file, and verify.py, which "
            "recomputes every number of the decision with the Python standard library alone "
            "(python3 DIR/verify.py). With --sign, a DSSE envelope over an in-toto Statement "
            "of the files, signed with an Ed25519 key; check it with `neens verify DIR --key`."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="neens sweep export SWEEP_ID --out DIR [--bar X] [--baseline-arm ARM_ID] "
        "[--sign KEYFILE] [--retry-window SECONDS]",
    )
    parser.add_argument("sweep_id", nargs="?", metavar="SWEEP_ID", help="the sweep (msw-…)")
    parser.add_argument(
        "--sweep-id", dest="sweep_id_flag", metavar="ID", help="the same as SWEEP_ID"
    )
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="the directory to write; new or empty"
    )
    parser.add_argument(
        "--bar",
        type=fraction,
        metavar="X",
        help="the pass rate an arm must clear, 0..1, as with `neens sweep decide`; default: "
        "the sweep's pinned gate min_pass_rate, else 0.9",
    )
    parser.add_argument(
        "--baseline-arm",
        metavar="ARM_ID",
        help="the arm (msa-…) costs, regressions and new passes are measured against; "
        "default: the first arm",
    )
    parser.add_argument(
        "--sign",
        type=Path,
        metavar="KEYFILE",
        help="sign the bundle with this Ed25519 private key (PEM, PKCS#8); needs the "
        "cryptography package",
    )
    parser.add_argument(
        "--retry-window",
        type=_window,
        metavar="SECONDS",
        help="how long to keep retrying while Neens does not answer, then exit 3 (default: "
        "$NEENS_RETRY_WINDOW, else 60)",
    )
    parser.set_defaults(func=export_command)


def export_command(args: argparse.Namespace) -> int:
    request = decide_request(args)
    out = Path(args.out)
    check_out_dir(out)
    if args.sign is not None:
        from neens_eval.evidence_sign import load_private_key

        load_private_key(args.sign)  # a bad key is a usage error before anything is read
    board = Board(sys.stderr)
    client = make_client(args, board)
    comparison, evidence = _read_both(client, request.sweep_id, request.params())
    status = str(comparison.get("status"))
    if status not in SWEEP_TERMINAL:
        sys.stderr.write(
            f"neens: sweep {request.sweep_id} is {status}: only a finished sweep is exported "
            f"(its evidence is still changing); wait for it with `neens sweep get "
            f"{request.sweep_id} --wait`, then export it\n"
        )
        return EXIT_UNREACHABLE
    files = _files(comparison, evidence)
    subject = {
        "sweepId": comparison.get("sweepId"),
        "status": status,
        "bar": comparison.get("bar"),
        "baselineArmId": comparison.get("baselineArmId"),
        "server": client.base_url,
    }
    write_bundle(out, kind="sweep", subject=subject, files=files, sign_key=args.sign)
    answers = evidence.get("answers") or []
    cases = evidence.get("cases") or []
    extra = " (with items.parquet)" if "items.parquet" in files else ""
    signed = ", signed" if args.sign is not None else ""
    sys.stdout.write(
        f"wrote {out}: the decision, {len(answers)} answers and {len(cases)} cases{extra}"
        f"{signed}; check it with: python3 {out / 'verify.py'}\n"
    )
    if status in UNTRUSTED:
        reason = comparison.get("voidReason") if status == "void" else None
        sys.stderr.write(
            f"neens: sweep {request.sweep_id} is {status}"
            + (f": {reason}" if reason else "")
            + ("; the bundle holds its void, no ranking\n" if status == "void" else "\n")
        )
        return EXIT_UNTRUSTED
    verdict = comparison.get("verdict") or {}
    if verdict.get("sentence"):
        sys.stdout.write(f"verdict: {verdict['sentence']}\n")
    return 0


def _read_both(
    client: Client, sweep_id: str, params: dict[str, str | None]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The comparison and the evidence, read until both describe the sweep in one state."""
    path = sweep_path(sweep_id)
    for _ in range(READS):
        try:
            comparison = expect_object(
                client.get(path + "/comparison", params), f"GET {path}/comparison"
            )
        except ApiError as exc:
            usage = refused_as_usage(exc, flags=DECIDE_FIELD_FLAGS)
            if usage is None:
                raise
            raise usage from exc
        evidence = expect_object(client.get(path + "/evidence"), f"GET {path}/evidence")
        again = expect_object(client.get(path + "/comparison", params), f"GET {path}/comparison")
        if (
            comparison.get("status") == evidence.get("status") == again.get("status")
            and comparison == again
        ):
            return comparison, evidence
    raise Unreachable(
        f"sweep {sweep_id} kept changing while it was read ({READS} times); export it again "
        "once it has finished"
    )


def _files(comparison: dict[str, Any], evidence: dict[str, Any]) -> dict[str, bytes]:
    answers = [dict(row) for row in evidence.get("answers") or []]
    files = {
        "decision.json": json_bytes(comparison),
        "sweep.json": json_bytes(
            {
                "sweepId": evidence.get("sweepId"),
                "status": evidence.get("status"),
                "datasetVersionId": evidence.get("datasetVersionId"),
                "arms": evidence.get("arms") or [],
            }
        ),
        "items.jsonl": jsonl_bytes(answers),
        "cases.jsonl": jsonl_bytes(evidence.get("cases") or []),
    }
    parquet = parquet_bytes(answers)
    if parquet is not None:
        files["items.parquet"] = parquet
    return files
