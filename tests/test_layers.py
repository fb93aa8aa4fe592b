"""Imports point one way: domain ← ingest/store/queue ← engine ← api. A layer that reaches up
(the store importing the engine, the domain importing anything with I/O) fails here by name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "neens"

SHARED = {"errors", "settings", "secrets", "__version__"}
"""Top-level modules every layer may use: error types, settings and the secret box."""

MAY_IMPORT: dict[str, set[str]] = {
    "domain": {"domain", "errors"},
    "ingest": {"ingest", "domain"} | SHARED,
    "store": {"store", "domain"} | SHARED,
    "queue": {"queue", "store", "domain"} | SHARED,
    "engine": {"engine", "queue", "store", "ingest", "domain"} | SHARED,
    "views": {"views", "store", "domain"} | SHARED,
}
"""What each layer may import from `neens`; `api` and the CLI sit on top and may import all."""

ABOVE_VIEWS = {"api", "mcp", "web"}
"""The layers that call the views: the API, the MCP tools and the pages."""


def _neens_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "neens" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
            elif parts[0] == "neens" and isinstance(node, ast.ImportFrom):
                found.extend((node.lineno, alias.name) for alias in node.names)
    return found


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    upward = [
        f"{path.relative_to(SRC.parent)}:{line} imports neens.{target}"
        for path in sorted((SRC / layer).rglob("*.py"))
        if "migrations" not in path.parts
        for line, target in _neens_imports(path)
        if target not in MAY_IMPORT[layer]
    ]
    assert upward == []


def test_only_the_api_calls_the_views() -> None:
    callers = sorted(
        f"{path.relative_to(SRC.parent)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).parts[0] not in ABOVE_VIEWS | {"views"}
        for line, target in _neens_imports(path)
        if target == "views"
    )
    assert callers == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from neens.store.runs import get_run\nimport neens.engine.push\n")
    assert [t for _, t in _neens_imports(probe)] == ["store", "engine"]
