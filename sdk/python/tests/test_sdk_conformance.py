"""The conformance table (sdk/conformance): both SDKs' command lines, run against the same
scripted server, must exit with the case's code, print its `--json` document and make its
requests. The TypeScript CLI is run from the tarball `npm pack` makes, installed into an empty
folder as `npm install --save-dev @neens/eval` installs it; sdk/typescript's own tests run the
same table against their build.

The TypeScript half needs Node 20 and npm: without them it is skipped, unless
NEENS_REQUIRE_NODE=1 (as CI sets), which fails instead.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance import Case, load_cases, problems, report_lines, run_case
from typescript_package import installed_bin

CASES = load_cases()
PYTHON_CLI = [sys.executable, "-m", "neens_eval"]


@pytest.fixture(scope="session")
def neens_eval_bin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The `neens-eval` bin of the packed tarball, installed into an empty folder."""
    yield installed_bin(tmp_path_factory.mktemp("npm-project"))


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_both_clis_conform_and_print_the_same_report(
    case: Case, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each CLI runs the case once: its exit code, `--json` document and requests are checked
    against the case, then its report against the other's. The Python half is checked before
    the TypeScript CLI is installed, so a machine without Node still checks it (and then skips
    the rest, or fails under NEENS_REQUIRE_NODE=1)."""
    (tmp_path / "python").mkdir()
    (tmp_path / "typescript").mkdir()
    python = run_case(case, PYTHON_CLI, tmp_path / "python", python=True)
    found = problems(case, python, tmp_path / "python")
    assert not found, "the Python CLI:\n" + "\n".join(found)

    neens_eval_bin: Path = request.getfixturevalue("neens_eval_bin")
    typescript = run_case(case, [str(neens_eval_bin)], tmp_path / "typescript", python=False)
    found = problems(case, typescript, tmp_path / "typescript")
    assert not found, "the TypeScript CLI:\n" + "\n".join(found)

    py_lines = report_lines(case, python, python=True)
    ts_lines = report_lines(case, typescript, python=False)
    assert ts_lines == [
        line.replace(str(tmp_path / "python"), str(tmp_path / "typescript")) for line in py_lines
    ]
