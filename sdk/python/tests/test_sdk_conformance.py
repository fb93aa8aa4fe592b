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
def test_the_python_cli_conforms(case: Case, tmp_path: Path) -> None:
    outcome = run_case(case, PYTHON_CLI, tmp_path, python=True)

    found = problems(case, outcome, tmp_path)

    assert not found, "\n".join(found)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_the_packed_typescript_cli_conforms(
    case: Case, tmp_path: Path, neens_eval_bin: Path
) -> None:
    outcome = run_case(case, [str(neens_eval_bin)], tmp_path, python=False)

    found = problems(case, outcome, tmp_path)

    assert not found, "\n".join(found)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_the_two_clis_print_the_same_report(
    case: Case, tmp_path: Path, neens_eval_bin: Path
) -> None:
    (tmp_path / "python").mkdir()
    (tmp_path / "typescript").mkdir()
    python = run_case(case, PYTHON_CLI, tmp_path / "python", python=True)
    typescript = run_case(case, [str(neens_eval_bin)], tmp_path / "typescript", python=False)

    py_lines = report_lines(case, python, python=True)
    ts_lines = report_lines(case, typescript, python=False)

    assert ts_lines == [
        line.replace(str(tmp_path / "python"), str(tmp_path / "typescript")) for line in py_lines
    ]
