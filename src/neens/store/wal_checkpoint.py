"""Checkpointing a SQLite file's write-ahead log on a thread of its own, for span ingest.

In WAL mode each commit appends the pages it changed to the log, and a checkpoint copies them
back into the database file. By default the committing connection checkpoints itself once the
log holds 1,000 pages, inside the commit that crossed it: in span ingest that was about two
thirds of the writer's time spent committing (copying the pages, then two fsyncs), during which
no other batch could be written. The span writer's connections instead leave the checkpoint
to `Checkpointer`, which runs SQLite's PASSIVE checkpoint on its own thread and connection
while the writer goes on: it never takes the write lock, and copies only what readers no
longer need, exactly as the automatic one does. Durability is unchanged: a commit is in the
log either way.

The writer's own automatic checkpoint is not turned off but set to `BACKSTOP_PAGES`: should the
background checkpoint fall behind (the writer appending as fast as it copies, so the log never
empties and SQLite cannot start it again from the beginning), the writer checkpoints inline
once the log is that long, and the log stays bounded as before.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final
from urllib.parse import quote

log = logging.getLogger("neens.store")

BACKSTOP_PAGES: Final = 10_000
"""`wal_autocheckpoint` on the span writer's connections: the log's length (in pages, 40 MB at
SQLite's default 4 KB page) past which the writer checkpoints inline after all."""
MIN_INTERVAL_S: Final = 0.2
"""The least time between the starts of two background checkpoints. Under a steady load one
checkpoint copies the pages of several commits, so a page many commits change (an index's
root) is copied once, not once per commit."""


class Checkpointer:
    """Runs `PRAGMA wal_checkpoint(PASSIVE)` on the database file at `path`, in the background,
    at most one at a time; `after_commit()` asks for one, `close()` waits for the last."""

    def __init__(self, path: str, busy_timeout_ms: int) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.checkpoints = 0
        """Background checkpoints that ran (for tests and diagnostics)."""
        self._lock = threading.Lock()
        self._thread: ThreadPoolExecutor | None = None
        self._running: Future[None] | None = None
        self._last_start = float("-inf")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._failing = False
        """The last checkpoint failed: the next failures are not logged again until one runs."""

    def after_commit(self) -> None:
        """Start a checkpoint unless one is running or one started less than `MIN_INTERVAL_S`
        ago. Called by the writer after each commit; returns at once."""
        with self._lock:
            if self._closed or (self._running is not None and not self._running.done()):
                return
            now = time.monotonic()
            if now - self._last_start < MIN_INTERVAL_S:
                return
            self._last_start = now
            if self._thread is None:
                self._thread = ThreadPoolExecutor(1, thread_name_prefix="neens-sqlite-checkpoint")
            self._running = self._thread.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        try:
            if self._conn is None:
                # No transaction is ever opened on this connection: the checkpoint pragma
                # runs outside one, and the connection reads nothing. `mode=rw`: a database
                # file that is gone is not made again, empty, by its checkpointer.
                self._conn = sqlite3.connect(
                    f"file:{quote(self.path)}?mode=rw",
                    uri=True,
                    timeout=self.busy_timeout_ms / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                )
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            # A checkpoint that could not run now is run later (the next one, or the writer's
            # backstop); nothing written depends on it. Logged once, not five times a second.
            if not self._failing:
                log.warning(
                    "background checkpoint of %s failed: %s (the writer checkpoints itself "
                    "once the log holds %d pages; not logged again until a checkpoint runs)",
                    self.path,
                    exc,
                    BACKSTOP_PAGES,
                )
            self._failing = True
            return
        self.checkpoints += 1
        if self._failing:
            log.warning("background checkpoints of %s run again", self.path)
            self._failing = False

    def wait(self) -> None:
        """Until the checkpoint running now, if any, has finished."""
        with self._lock:
            running = self._running
        if running is not None:
            running.result()

    def close(self) -> None:
        """Wait for a running checkpoint, then close the connection and the thread. A
        checkpoint asked for afterwards is not run."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.shutdown(wait=True)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
