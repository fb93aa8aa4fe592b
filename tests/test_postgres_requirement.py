"""Without PostgreSQL, its half of the suite skips on a laptop but fails in CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[1]
PG_TEST = "tests/store/test_migrations.py::test_upgrading_twice_changes_nothing[postgresql]"


def _run_without_postgres(require: bool) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        # Nothing listens on a port just found free: PostgreSQL is "missing".
        "NEENS_TEST_POSTGRES_URL": f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test",
    }
    env.pop("NEENS_REQUIRE_POSTGRES", None)
    if require:
        env["NEENS_REQUIRE_POSTGRES"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", PG_TEST, "-p", "no:cacheprovider", "-rs", "-q"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_postgres_fails_the_run_when_required() -> None:
    result = _run_without_postgres(require=True)
    assert result.returncode != 0, result.stdout
    assert "NEENS_REQUIRE_POSTGRES=1 but PostgreSQL not reachable" in result.stdout


def test_a_missing_postgres_skips_with_a_one_line_reason_otherwise() -> None:
    result = _run_without_postgres(require=False)
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout
    assert "PostgreSQL not reachable at" in result.stdout
