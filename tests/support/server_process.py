"""`neens serve` as a real process on a fixed port and database, which a test can kill (SIGKILL,
as a crash or an OOM kill does) and start again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

NEENS = [sys.executable, "-m", "neens_eval"]


class ServerProcess:
    """`neens serve` on a fixed port and database, which a test can kill and start again."""

    def __init__(self, database_url: str, port: int, log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.port = port
        self.database_url = database_url
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        return {**os.environ, "NEENS_WORKERS_IN_PROCESS": "false"}

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [*NEENS, "serve", "--port", str(self.port), "--database-url", self.database_url,
                 "--log-level", "warning"],
                env=self.env(), stdout=log, stderr=log,
            )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert self.process.poll() is None, self.log.read_text(errors="replace")
            time.sleep(0.1)
        raise AssertionError("neens serve did not start: " + self.log.read_text(errors="replace"))

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, as a crash or an OOM kill."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
