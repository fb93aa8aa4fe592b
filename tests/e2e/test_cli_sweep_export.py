"""`neens sweep export` and `neens verify` against a live server, as a CI job runs them: the real
command with an ingest key writes a bundle of a finished sweep whose verify.py passes with the
standard library alone, and `neens verify` agrees (docs/evidence.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from neens.demo.endpoints import steady
from neens.store.keys import CreatedKey
from tests.e2e.test_cli_sweep import RIGHT, Neens
from tests.e2e.test_cli_sweep_decide import ONE_WRONG, finished_sweep
from tests.support.live import LiveServer

pytestmark = pytest.mark.e2e


@pytest.fixture
def neens(
    live_server: LiveServer, key: CreatedKey, admin_key: CreatedKey, database_url: str
) -> Neens:
    return Neens(live_server.url, key.key, admin_key.key, database_url)


def test_a_finished_sweep_is_exported_and_its_bundle_verifies_offline(
    neens: Neens, tmp_path: Path
) -> None:
    sweep = finished_sweep(
        neens, steady(RIGHT, path="/a"), steady(ONE_WRONG, path="/b"), "--min-pass-rate", "0.5"
    )
    out = tmp_path / "evidence"
    exported = neens.neens("sweep", "export", sweep["id"], "--out", str(out))
    assert exported.code == 0, exported.stderr
    assert f"wrote {out}" in exported.stdout
    decided = neens.neens("sweep", "decide", sweep["id"], "--json")
    assert json.loads((out / "decision.json").read_text()) == decided.json, "as served"

    offline = subprocess.run(
        [sys.executable, "-I", str(out / "verify.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert offline.returncode == 0, offline.stderr
    checked = neens.neens("verify", str(out))
    assert checked.code == 0, checked.stderr
    assert "not signed" in checked.stdout

    refused = neens.neens("sweep", "export", sweep["id"], "--out", str(out))
    assert refused.code == 2 and "--out" in refused.stderr
