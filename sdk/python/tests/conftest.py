"""Fixtures for the neens-eval tests.

The SDK itself is standard library only; its tests also use the platform's simulated endpoints
(`neens.demo.endpoints`) as a loopback stand-in for the Neens server.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path

import pytest
from neens.demo.endpoints import Scripted, serve_one

from neens_eval import cli, client

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ambient configuration, no installed plugins, and retries that do not wait."""
    for name in ("NEENS_BASE_URL", "NEENS_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name in PROXY_VARIABLES:  # a proxy would swallow the loopback requests
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setattr(cli, "plugin_entry_points", list)
    monkeypatch.setattr(client, "DEFAULT_RETRY", client.RetryPolicy(attempts=3, backoff=0.0))


@pytest.fixture
def fake_neens() -> Iterator[Scripted]:
    """A loopback stand-in for the Neens server, scripted per test with its documented answers."""
    with serve_one(Scripted()) as fake:
        yield fake


@pytest.fixture
def closed_port() -> int:
    """A loopback port with nothing listening: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, fake_neens: Scripted) -> Scripted:
    """The CLI configured through its environment variables to talk to `fake_neens`."""
    monkeypatch.setenv("NEENS_BASE_URL", fake_neens.url)
    monkeypatch.setenv("NEENS_API_KEY", "nk_live_test")
    return fake_neens


MakePlugin = Callable[[str, str, str], None]


@pytest.fixture
def make_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakePlugin]:
    """Install fake plugin distributions into a temporary directory and expose only them.

    `make_plugin(dist_name, entry_point_value, module_source)` writes a real `*.dist-info`
    (METADATA + entry_points.txt) so the entry points carry their distribution, exactly as
    installed ones do; `module_source` (may be "") becomes the module the value points at.
    """
    modules: list[str] = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(dist_name: str, value: str, source: str) -> None:
        module = value.partition(":")[0]
        if source:
            (tmp_path / f"{module}.py").write_text(source)
            modules.append(module)
        info = tmp_path / f"{dist_name.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[neens.cli]\n{dist_name} = {value}\n")

    def listed() -> list[metadata.EntryPoint]:
        found = [
            entry_point
            for dist in metadata.distributions(path=[str(tmp_path)])
            for entry_point in dist.entry_points
            if entry_point.group == cli.ENTRY_POINT_GROUP
        ]
        return sorted(found, key=lambda entry_point: entry_point.name)

    monkeypatch.setattr(cli, "plugin_entry_points", listed)
    yield make
    for module in modules:
        sys.modules.pop(module, None)
