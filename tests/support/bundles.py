"""Evidence bundles (`neens exp export`, `neens sweep export`) checked as their reader would:
with the bundle's own verify.py, and after changes a forger would make."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path


def verify_py(bundle: Path) -> subprocess.CompletedProcess[str]:
    """The bundle's own verify.py, isolated from this environment (`python -I`)."""
    return subprocess.run(
        [sys.executable, "-I", str(bundle / "verify.py")],
        cwd=bundle,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def rehash(bundle: Path, name: str) -> None:
    """Make the manifest agree with a changed file, as a forger would."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == name:
            data = (bundle / name).read_bytes()
            entry["sha256"], entry["bytes"] = hashlib.sha256(data).hexdigest(), len(data)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
