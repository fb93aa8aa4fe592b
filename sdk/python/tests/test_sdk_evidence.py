"""`neens sweep export` and `neens verify` against the loopback stand-in: what is refused before
anything is written, and that the evidence modules need nothing beyond the standard library
(the real server and real bundles: tests/api/test_sweep_evidence_bundle.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from neens.demo.endpoints import Reply, Scripted

import neens_eval
from neens_eval import cli
from neens_eval.evidence_verify import main as verify_main

PACKAGE_DIR = Path(neens_eval.__file__).resolve().parent


def test_the_evidence_commands_load_only_standard_library_modules() -> None:
    code = (
        "import json, sys\n"
        "import neens_eval.cli, neens_eval.sweep_export, neens_eval.verify_cli\n"
        "import neens_eval.evidence, neens_eval.evidence_sign, neens_eval.evidence_verify\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {name.partition(".")[0] for name in json.loads(result.stdout)}
    assert loaded - set(sys.stdlib_module_names) - {"neens_eval", "__main__"} == set()


def test_a_sweep_that_has_not_finished_is_not_exported(
    env: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    running = {"sweepId": "msw-1", "status": "running", "arms": []}
    env.reply("GET", "/model-sweeps/msw-1/comparison", Reply(200, running))
    env.reply("GET", "/model-sweeps/msw-1/evidence", Reply(200, {**running, "answers": []}))
    out = tmp_path / "bundle"
    assert cli.main(["sweep", "export", "msw-1", "--out", str(out)]) == 3
    assert "only a finished sweep is exported" in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == [], "nothing half-written"


def test_bad_input_is_refused_before_anything_is_read(
    env: Scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    assert cli.main(["sweep", "export", "msw-1", "--out", str(busy)]) == 2
    assert "--out" in capsys.readouterr().err
    key = tmp_path / "key.pem"
    key.write_text("not a key")
    out = tmp_path / "out"
    assert cli.main(["sweep", "export", "msw-1", "--out", str(out), "--sign", str(key)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sign" in err[0]
    assert cli.main(["sweep", "export", "--out", str(out)]) == 2, "no sweep"
    assert env.paths() == [], "nothing was asked of the server"
    assert not out.exists()


def test_verify_refuses_what_is_not_a_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["verify", str(tmp_path)]) == 2
    assert "manifest.json is missing" in capsys.readouterr().err
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "other"}))
    assert verify_main([str(tmp_path)]) == 2
    assert "not a neens-evidence/1 manifest" in capsys.readouterr().err
