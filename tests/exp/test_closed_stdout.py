"""`neens exp list | head`: a reader that goes away before the command has written everything
ends it quietly with 141 (as SIGPIPE would), not with a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_a_closed_standard_output_exits_141_without_a_traceback(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes a byte
    try:
        done = subprocess.run(
            [sys.executable, "-m", "neens_eval", "exp", "list", "--database-url",
             f"sqlite+aiosqlite:///{tmp_path / 'neens.db'}"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr
    assert done.stderr == ""
