"""Work produced in parallel, stored in batches.

Calls to agents and judges run many at a time, but a database (SQLite above all) takes one
writer at a time; rather than one transaction per result, a single writer drains what has
arrived and stores it together.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

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
