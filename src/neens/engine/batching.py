"""Work produced in parallel, stored in batches.

Calls to agents and judges run many at a time, but a database (SQLite above all) takes one
writer at a time; rather than one transaction per result, a single writer drains what has
arrived and stores it together. A batch the database refuses is written again entry by entry
(`write_or_split`), so one bad entry cannot sink the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

from sqlalchemy.exc import OperationalError

from neens.store.types import storable_text

log = logging.getLogger("neens.batching")

T = TypeVar("T")

WRITE_BATCH = 64
"""Results stored per transaction at most."""


class BatchWriter(Generic[T]):
    """Collects results with `put` and hands them to `store` in batches, from one task."""

    def __init__(self, store: Callable[[list[T]], Awaitable[None]]) -> None:
        self._store = store
        self._queue: asyncio.Queue[T | None] = asyncio.Queue()

    async def put(self, result: T) -> None:
        await self._queue.put(result)

    async def _run(self) -> None:
        done = False
        while not done:
            batch = [await self._queue.get()]
            while len(batch) < WRITE_BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            done = batch[-1] is None
            ready = [result for result in batch if result is not None]
            if ready:
                await self._store(ready)


@asynccontextmanager
async def batch_writer(
    store: Callable[[list[T]], Awaitable[None]],
) -> AsyncIterator[BatchWriter[T]]:
    """A writer running for the duration of the block; everything put is stored on exit."""
    writer: BatchWriter[T] = BatchWriter(store)
    task = asyncio.create_task(writer._run())
    try:
        yield writer
    finally:
        await writer._queue.put(None)
        await task


def refusal(exc: Exception) -> str:
    """What the database said when it refused a write, in one storable line: the driver's own
    message (`orig`), not SQLAlchemy's wrapping of it."""
    cause = getattr(exc, "orig", None) or exc
    text = str(cause).strip() or type(cause).__name__
    return storable_text(text.splitlines()[0][:300])


async def write_or_split(
    batch: list[T],
    write: Callable[[list[T]], Awaitable[None]],
    refused: Callable[[T, Exception], Awaitable[None]],
    what: str,
    *,
    refusable: Callable[[T], bool] = lambda _: True,
) -> None:
    """Write a batch; when the database refuses it, write its entries one by one and hand each
    one it still refuses to `refused`, so one bad entry cannot sink the rest (a lost connection
    or lock is not the data's fault: it raises). A refused batch of one goes to `refused` at
    once, unless `refusable` says `refused` would only write the same thing again: then the
    refusal is raised."""
    try:
        await write(batch)
    except OperationalError:
        raise
    except Exception as exc:
        if len(batch) == 1:
            if not refusable(batch[0]):
                raise
            await refused(batch[0], exc)
            return
        log.warning("a batch of %d %s was refused; storing them one by one", len(batch), what)
        for entry in batch:
            try:
                await write([entry])
            except OperationalError:
                raise
            except Exception as exc:
                await refused(entry, exc)
