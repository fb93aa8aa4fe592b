"""`pip install ./sdk` from a source checkout, as the spec says: the SDK's project file is
sdk/pyproject.toml, and it installs the `neens` command and nothing but the `neens_eval` package
(no TypeScript, no tests) into a fresh virtual environment.

The checkout's sdk/ folder is copied first (without node_modules and dist), so the build's
by-products never land in the working tree and parallel tests do not share them.
"""

from __future__ import annotations

import shutil
import subprocess
import venv
from pathlib import Path

SDK = Path(__file__).resolve().parents[2]


def test_pip_install_of_the_sdk_folder_installs_the_neens_command(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout" / "sdk"
    shutil.copytree(
        SDK,
        checkout,
        ignore=shutil.ignore_patterns("node_modules", "dist", "*.egg-info", "__pycache__"),
    )
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"

    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "./sdk"],
        cwd=checkout.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    version = subprocess.run(
        [str(environment / "bin" / "neens"), "--version"], capture_output=True, text=True
    )
    assert version.stdout.strip() == "neens-eval 0.1.0", version.stderr
    files = subprocess.run(
        [str(python), "-m", "pip", "show", "--files", "neens-eval"], capture_output=True, text=True
    ).stdout
    listed = [line.strip() for line in files.split("Files:", 1)[1].splitlines() if line.strip()]
    packages = {Path(name).parts[0] for name in listed if not name.startswith("..")}
    assert packages == {"neens_eval", "neens_eval-0.1.0.dist-info"}, listed
    assert "neens_eval/py.typed" in listed
    assert not any("typescript" in name or "tests" in name for name in listed)
