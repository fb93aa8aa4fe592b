"""Evidence bundles: a decision and everything it was computed from, in one directory anyone
can check offline (docs/evidence.md).

    DIR/
      manifest.json       format, kind, what it is about, and the sha256 and size of every file
      decision.json       the decision exactly as Neens served (or, for an experiment, printed) it
      items.jsonl         the per-answer results the decision adds up, one JSON object a line
      items.parquet       the same rows, when pyarrow is installed where the bundle was written
      cases.jsonl         the frozen cases (inputs and expected outputs)
      sweep.json          (sweeps) the sweep's status and each arm's k and runs
      verify.py           recomputes every number of decision.json from the rows (stdlib only)
      manifest.dsse.json  (with --sign) a DSSE envelope over an in-toto Statement of the files

`write_bundle` writes it into a fresh directory beside DIR and renames it into place, so a
failure never leaves a half-written bundle behind. The writer needs nothing beyond the standard
library; Parquet and signing use pyarrow and cryptography when asked and installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from neens_eval import __version__
from neens_eval.errors import ConfigError

FORMAT: Final = "neens-evidence/1"
MANIFEST: Final = "manifest.json"
SIGNATURE: Final = "manifest.dsse.json"
VERIFY_SCRIPT: Final = Path(__file__).with_name("evidence_verify.py")


def json_bytes(document: Any) -> bytes:
    """A JSON document as the bundle stores it: UTF-8, indented, one trailing newline."""
    return (json.dumps(document, ensure_ascii=False, indent=2, allow_nan=False) + "\n").encode()


def jsonl_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """One compact JSON object a line, in the order given."""
    return b"".join(
        (
            json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"
        ).encode()
        for row in rows
    )


def parquet_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes | None:
    """The rows as a Parquet file, or None when pyarrow is not installed (or there is no row)."""
    try:  # optional, so looked up by name
        pa = importlib.import_module("pyarrow")
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError:
        return None
    if not rows:
        return None
    table = pa.Table.from_pylist([dict(row) for row in rows])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def manifest_of(
    kind: str, subject: Mapping[str, Any], files: Mapping[str, bytes]
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "kind": kind,
        "subject": dict(subject),
        "createdAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "generator": f"neens-eval {__version__}",
        "files": [
            {"path": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            for name, data in sorted(files.items())
        ],
    }


def check_out_dir(out: Path) -> None:
    """Refuse, before anything is read or written, a --out that would overwrite something."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out}: already exists and is not an empty directory")
    if not out.parent.exists():
        raise ConfigError(f"--out {out}: the directory {out.parent} does not exist")


def write_bundle(
    out: Path,
    *,
    kind: str,
    subject: Mapping[str, Any],
    files: Mapping[str, bytes],
    sign_key: Path | None = None,
) -> dict[str, Any]:
    """Write the bundle: `files` plus verify.py and the manifest (and the signature with
    `sign_key`), all or nothing. Returns the manifest."""
    check_out_dir(out)
    everything = dict(files)
    everything["verify.py"] = VERIFY_SCRIPT.read_bytes()
    manifest = manifest_of(kind, subject, everything)
    manifest_data = json_bytes(manifest)
    envelope = None
    if sign_key is not None:
        from neens_eval.evidence_sign import sign_statement

        envelope = sign_statement({**everything, MANIFEST: manifest_data}, manifest, sign_key)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as exc:  # a directory that cannot be written (read-only, /proc, no space)
        raise ConfigError(f"--out {out}: cannot write in {out.parent}: {exc.strerror}") from None
    try:
        for name, data in everything.items():
            (staging / name).write_bytes(data)
        (staging / MANIFEST).write_bytes(manifest_data)
        if envelope is not None:
            (staging / SIGNATURE).write_bytes(json_bytes(envelope))
        os.chmod(staging, 0o755)
        if out.exists():
            out.rmdir()  # empty, checked above
        staging.rename(out)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
        raise
    return manifest
