"""The span writer's write-ahead log is checkpointed on a thread of its own
(`store.wal_checkpoint`), and stays bounded whether that thread keeps up or not."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from neens.store import db as db_module
from neens.store import wal_checkpoint
from neens.store.db import Database
from neens.store.wal_checkpoint import BACKSTOP_PAGES, Checkpointer

PAGE = 4096
BLOB = os.urandom(256 * 1024)
"""Incompressible, so each write appends about 64 pages to the log."""


async def _write_megabytes(db: Database, megabytes: int) -> None:
    def create(conn: Connection) -> None:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS filler (data BLOB)")

    def fill(conn: Connection) -> None:
        conn.exec_driver_sql("INSERT INTO filler VALUES (?)", [(BLOB,)] * 4)

    await db.run_write(create)
    for _ in range(megabytes):
        await db.run_write(fill)


def _wal_bytes(database_url: str) -> int:
    path = Path(database_url.split(":///", 1)[1] + "-wal")
    return path.stat().st_size if path.exists() else 0


@pytest.mark.parametrize("dialect", ["sqlite"])
async def test_the_writer_checkpoints_only_past_the_backstop(db: Database) -> None:
    def autocheckpoint(conn: Connection) -> int:
        return int(conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one())

    assert await db.run_write(autocheckpoint) == BACKSTOP_PAGES
    async with db.read() as s:  # every other connection keeps SQLite's default
        assert (await s.execute(text("PRAGMA wal_autocheckpoint"))).scalar() == 1000


@pytest.mark.parametrize("dialect", ["sqlite"])
async def test_the_background_checkpoint_copies_the_log_into_the_database(
    db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 MB written, less than the writer's own checkpoint waits for (40 MB): only the
    background thread can have copied it into the database file."""
    monkeypatch.setattr(wal_checkpoint, "MIN_INTERVAL_S", 0.0)
    database_file = Path(database_url.split(":///", 1)[1])
    before = database_file.stat().st_size
    await _write_megabytes(db, 20)
    checkpointer = db._checkpointer
    assert checkpointer is not None
    checkpointer.wait()  # the last one may have started before the last commit: one more
    await _write_megabytes(db, 0)
    checkpointer.wait()
    assert checkpointer.checkpoints >= 2
    assert database_file.stat().st_size - before >= 20 * 1024 * 1024


@pytest.mark.parametrize("dialect", ["sqlite"])
async def test_the_log_stays_bounded_when_the_background_checkpoint_falls_behind(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No background checkpoint after the first: the writer's backstop (here 1,000 pages)
    checkpoints inline, so 30 MB of commits leave a log of about 4 MB, not 30.

    The first one is let finish before the 30 MB: SQLite runs one checkpoint at a time, so
    while a background one waits on a slow disk the writer's are skipped and the log grows by
    whatever is committed meanwhile (on a busy machine, 14 MB). That is the bound under load,
    backstop plus one checkpoint's duration of writes; this test is about the backstop."""
    monkeypatch.setattr(wal_checkpoint, "MIN_INTERVAL_S", 3600.0)
    monkeypatch.setattr(db_module, "BACKSTOP_PAGES", 1000)
    db = Database(database_url)
    try:
        await _write_megabytes(db, 0)
        assert db._checkpointer is not None
        db._checkpointer.wait()
        await _write_megabytes(db, 30)
        assert db._checkpointer.checkpoints == 1
        assert _wal_bytes(database_url) < (1000 + 200) * (PAGE + 24)
    finally:
        await db.dispose()


@pytest.mark.parametrize("dialect", ["sqlite"])
async def test_dispose_waits_for_the_checkpoint_and_closes_its_thread(
    database_url: str,
) -> None:
    db = Database(database_url)
    await _write_megabytes(db, 2)
    assert any(t.name.startswith("neens-sqlite-checkpoint") for t in threading.enumerate())
    await db.dispose()
    assert not any(t.name.startswith("neens-sqlite-checkpoint") for t in threading.enumerate())
    assert db._checkpointer is not None
    db._checkpointer.after_commit()  # after close: nothing is started
    assert not any(t.name.startswith("neens-sqlite-checkpoint") for t in threading.enumerate())


def test_a_checkpoint_that_cannot_run_is_logged_once_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database file that is missing for a while (in a directory whose name a URI would
    misread): the first failure is logged, its repeats are not, and the recovery is."""
    monkeypatch.setattr(wal_checkpoint, "MIN_INTERVAL_S", 0.0)
    where = tmp_path / "later ? # %"
    checkpointer = Checkpointer(str(where / "neens.db"), 100)
    with caplog.at_level(logging.WARNING, logger="neens.store"):
        for _ in range(3):
            checkpointer.after_commit()
            checkpointer.wait()
        assert checkpointer.checkpoints == 0
        where.mkdir()
        checkpointer.after_commit()
        checkpointer.wait()
        assert not (where / "neens.db").exists()  # not made by the checkpointer
        sqlite3.connect(where / "neens.db").close()
        checkpointer.after_commit()
        checkpointer.wait()
    checkpointer.close()
    assert checkpointer.checkpoints == 1
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "unable to open database file" in messages[0]
    assert f"once the log holds {BACKSTOP_PAGES} pages" in messages[0]
    assert messages[1].endswith("run again")
