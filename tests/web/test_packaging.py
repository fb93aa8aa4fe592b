"""Every template and asset of the pages is package data, so an installed wheel serves them."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "neens"


def test_every_template_and_asset_is_in_the_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["neens"]
    shipped = {path for pattern in patterns for path in PACKAGE.glob(pattern)}
    files = {
        path
        for folder in ("templates", "static")
        for path in (PACKAGE / "web" / folder).rglob("*")
        if path.is_file()
    }
    assert files, "no templates or assets found"
    assert sorted(str(p.relative_to(PACKAGE)) for p in files - shipped) == []
