"""The TypeScript SDK as its users get it: `npm pack` in sdk/typescript, then the tarball
installed into an empty folder. Used by the conformance table's tests and the live-server test.

`npm ci` is run first when sdk/typescript has no node_modules (its lockfile pins the compiler);
packing is serialised across test processes with a lock file, since it rebuilds dist/.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "typescript"


def node_tools() -> tuple[str, str] | None:
    """`node` and `npm` when both are on PATH and Node is 20 or later, else None (skip, or fail
    under NEENS_REQUIRE_NODE=1)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    problem = ""
    if node is None or npm is None:
        problem = "node and npm are not on PATH"
    else:
        version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
        if int(version.strip().lstrip("v").split(".")[0] or 0) < 20:
            problem = f"Node {version.strip()} is older than 20"
    if not problem:
        assert node is not None and npm is not None
        return node, npm
    if os.environ.get("NEENS_REQUIRE_NODE") == "1":
        pytest.fail(f"NEENS_REQUIRE_NODE=1 but {problem}", pytrace=False)
    pytest.skip(problem)
    return None


_PACKED: dict[str, Path] = {}
"""The tarball this process packed, so it is packed once per test process."""


def pack(destination: Path) -> Path:
    """`npm pack` the package (once per process) and copy the tarball into `destination`."""
    if "tarball" not in _PACKED:
        folder = tempfile.mkdtemp(prefix="neens-typescript-pack-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _PACKED["tarball"] = _pack(Path(folder))
    tarball = destination / _PACKED["tarball"].name
    shutil.copyfile(_PACKED["tarball"], tarball)
    return tarball


def _pack(destination: Path) -> Path:
    tools = node_tools()
    assert tools is not None
    _, npm = tools
    lock_path = Path(tempfile.gettempdir()) / "neens-typescript-pack.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (PACKAGE_DIR / "node_modules" / ".bin" / "tsc").exists():
            _npm([npm, "ci", "--no-audit", "--no-fund"], PACKAGE_DIR)
        out = _npm([npm, "pack", "--pack-destination", str(destination)], PACKAGE_DIR)
    name = out.strip().splitlines()[-1]
    return destination / name


def installed_bin(project: Path) -> Path:
    """Install the packed tarball into the empty folder `project`; its `neens-eval` bin."""
    tools = node_tools()
    assert tools is not None
    _, npm = tools
    tarball = pack(project)
    (project / "package.json").write_text('{"name": "ci-job", "private": true}\n')
    _npm([npm, "install", "--save-dev", "--no-audit", "--no-fund", str(tarball)], project)
    binary = project / "node_modules" / ".bin" / "neens-eval"
    assert binary.exists(), f"the tarball installed no neens-eval bin: {sorted(project.rglob('*'))}"
    return binary


def _npm(command: list[str], cwd: Path) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout
