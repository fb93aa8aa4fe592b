"""Run a test on SQLite only, for a test whose subject is not storage.

Every test that reaches the database runs on SQLite and on PostgreSQL (tests/conftest.py),
because what a database does (its queries, types, constraints and locks) differs between the two.
Some tests reach the database only on the way to their subject: a CLI's exit codes and signal
handling, a gate policy the CLI checks over the server's JSON, an MCP transport, a statistic over
trials already stored, a refusal made before anything is written. Running those twice tests the
same code twice and doubles the suite's slowest part. Each use names, as its reason, where the
storage the test reaches is tested on both databases.
"""

from __future__ import annotations

import pytest


def sqlite_only(reason: str) -> pytest.MarkDecorator:
    """The test (or module, as `pytestmark`) runs once, with `dialect` "sqlite"; `reason` says why
    its subject is not storage and which tests cover that storage on both databases."""
    if not reason.strip():
        raise ValueError("sqlite_only needs a reason")
    return pytest.mark.parametrize("dialect", ["sqlite"], indirect=True)
