"""Outbound clients share one TLS context per process: loading the CA bundle costs tens of ms."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from neens.engine import destinations
from neens.engine.destinations import guarded_client


async def test_guarded_clients_build_the_tls_settings_once(monkeypatch: pytest.MonkeyPatch) -> None:
    real, built = httpx.create_ssl_context, []

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(httpx, "create_ssl_context", counted)
    destinations.tls_context.cache_clear()
    try:
        for _ in range(3):
            async with guarded_client(allow_private=True):
                pass
        shared = destinations.tls_context()
    finally:
        destinations.tls_context.cache_clear()
    assert len(built) == 1
    assert shared.verify_mode.name == "CERT_REQUIRED" and shared.check_hostname
    assert shared.cert_store_stats()["x509_ca"] > 0  # the CA bundle is loaded
