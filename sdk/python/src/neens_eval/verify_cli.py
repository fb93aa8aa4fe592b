"""`neens verify DIR [--key PUBKEY]`: check an evidence bundle (docs/evidence.md).

1. With `manifest.dsse.json` in the bundle: its in-toto Statement must list exactly the
   bundle's files with their sha256; with --key, a signature must verify with that Ed25519
   public key. --key on an unsigned bundle fails. Signatures need the `cryptography` package
   (it comes with the `neens` server package); without it, --key is a usage error.
2. The manifest's hashes and every number of the decision, by the verifier of this installed
   neens-eval (the same code as the bundle's verify.py, run in this process rather than
   running code the bundle brought along); when the bundle's own verify.py differs from it,
   that is said, and the installed one decides.

Exit codes: 0 everything holds; 1 a file, a number or the signature does not match (each
named on standard error); 2 usage error, or the bundle cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from neens_eval import __version__
from neens_eval.errors import EXIT_USAGE, ConfigError
from neens_eval.evidence import SIGNATURE, VERIFY_SCRIPT
from neens_eval.evidence_sign import check_envelope, load_public_key, statement_problems
from neens_eval.evidence_verify import Unreadable, verify

if TYPE_CHECKING:
    from neens_eval.cli import Subparsers

EXIT_MISMATCH: Final = 1

EXIT_CODES_HELP: Final = """\
exit codes:
  0  the files, every number of the decision and (with --key) the signature hold
  1  a file, a number or the signature does not match (each one named on stderr)
  2  usage error (a bad --key), or the bundle cannot be read
"""


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="check an evidence bundle offline: hashes, every number, the signature",
        description=(
            "Check an evidence bundle written by `neens sweep export` or `neens exp export`: "
            "the signed Statement (with --key, the signature too), the sha256 of every file, "
            "and every number of the decision, recomputed from the per-answer rows."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("bundle", metavar="DIR", type=Path, help="the bundle's directory")
    parser.add_argument(
        "--key",
        type=Path,
        metavar="PUBKEY",
        help="the Ed25519 public key (PEM) the bundle must be signed with",
    )
    parser.set_defaults(func=verify_command)


def verify_command(args: argparse.Namespace) -> int:
    root: Path = args.bundle
    if not root.is_dir():
        raise ConfigError(f"{root}: not a directory (give the bundle's directory)")
    public_key = None
    if args.key is not None:
        public_key = load_public_key(args.key)
    problems: list[str] = []
    envelope_path = root / SIGNATURE
    signed = envelope_path.is_file()
    if signed:
        try:
            envelope = json.loads(envelope_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            envelope = None
        if public_key is None:
            problems += statement_problems(root, envelope)
        else:
            problems += check_envelope(root, envelope, public_key)
    elif public_key is not None:
        problems.append(f"the bundle is not signed (no {SIGNATURE}), and --key was given")
    own = root / "verify.py"
    if own.is_file() and own.read_bytes() != VERIFY_SCRIPT.read_bytes():
        sys.stderr.write(
            f"neens: note: the bundle's verify.py differs from the one in neens-eval "
            f"{__version__}; the installed one checks it\n"
        )
    try:
        checks = verify(root)
    except Unreadable as error:
        sys.stderr.write(f"neens: error: cannot read the bundle: {error}\n")
        return EXIT_USAGE
    problems += checks.mismatches
    for problem in problems:
        sys.stderr.write(f"mismatch: {problem}\n")
    if problems:
        sys.stderr.write(f"neens: {root}: FAILED ({len(problems)} problems)\n")
        return EXIT_MISMATCH
    if signed and public_key is not None:
        how = "signature verified"
    elif signed:
        how = "signed, signature not checked: give --key PUBKEY to check it"
    else:
        how = "not signed"
    sys.stdout.write(f"{root}: OK: {checks.count} checks, every file and number matches; {how}\n")
    return 0
