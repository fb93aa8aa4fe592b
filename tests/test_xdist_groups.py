"""`make test` relies on `--dist loadgroup` honouring `xdist_group` marks: the page modules share
one seeded server per test process, and tests/e2e/test_demo.py one `neens demo`. When a pytest
or pytest-xdist release stops honouring them, nothing fails, and the suite just does that work
once per test process; this test fails instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GROUPED = """\
import os
import pytest

pytestmark = pytest.mark.xdist_group("together")


@pytest.mark.parametrize("i", range(6))
def test_part(i):
    with open(os.environ["WORKERS_LOG"], "a") as log:
        log.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_a_group_runs_on_one_test_process(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    log = tmp_path / "workers.log"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-p", "no:logfire", "-p", "no:pytest_logfire",
         "-o", "addopts=", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "WORKERS_LOG": str(log)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    workers = log.read_text().split()
    assert len(workers) == 6
    assert len(set(workers)) == 1, f"the group ran on {sorted(set(workers))}"
