"""neens-eval promises to need nothing but the standard library; these tests hold it to that."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import neens_eval

PACKAGE_DIR = Path(neens_eval.__file__).resolve().parent
MODULES = sorted(PACKAGE_DIR.glob("*.py"))


def imported_names(path: Path) -> list[tuple[int, str]]:
    """(line, top-level module) for every absolute import in `path`, TYPE_CHECKING ones too."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.partition(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.partition(".")[0]))
    return found


def test_every_import_is_standard_library_or_the_package_itself() -> None:
    assert len(MODULES) >= 5  # cli, client, datasets, errors, __init__: the glob found them
    offenders = [
        f"{path.name}:{line}: {name}"
        for path in MODULES
        for line, name in imported_names(path)
        if name not in sys.stdlib_module_names and name != "neens_eval"
    ]
    assert offenders == []


def test_the_checker_would_catch_a_third_party_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import json\nfrom httpx import Client\nfrom . import x\n")
    assert imported_names(module) == [(1, "json"), (2, "httpx")]


def test_importing_the_cli_loads_only_standard_library_modules() -> None:
    """Catches what a static check cannot: a module imported indirectly or by name at runtime."""
    code = (
        "import json, sys\n"
        "import neens_eval.cli, neens_eval.client, neens_eval.datasets, neens_eval.errors\n"
        "import neens_eval.eval_run, neens_eval.gate_policy, neens_eval.summary\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],  # -S: no site-packages, so nothing else to find
        env={**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {name.partition(".")[0] for name in json.loads(result.stdout)}
    assert "neens_eval" in loaded
    assert loaded - set(sys.stdlib_module_names) - {"neens_eval", "__main__"} == set()


def test_pyyaml_stays_optional_it_is_only_looked_up_when_a_yaml_policy_is_read() -> None:
    code = (
        "import sys\n"
        "import neens_eval.cli, neens_eval.eval_run, neens_eval.gate_policy\n"
        "print('yaml' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "False"
