"""`write_or_split`: a batch the database refuses is stored entry by entry, and every entry it
still refuses goes to `refused` (a batch of one straight away), so one bad entry never stalls
the job that holds it."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from neens.engine.batching import write_or_split


class Table:
    """A write that refuses batches holding a bad entry, as a CHECK or trigger would."""

    def __init__(self, bad: set[str], error: Exception | None = None) -> None:
        self.bad, self.error = bad, error
        self.rows: list[str] = []
        self.refused: list[str] = []
        self.writes = 0

    async def write(self, entries: list[str]) -> None:
        self.writes += 1
        if self.bad.intersection(entries):
            raise self.error or IntegrityError("INSERT", {}, Exception("refused by a trigger"))
        self.rows.extend(entries)

    async def refuse(self, entry: str, exc: Exception) -> None:
        assert isinstance(exc, IntegrityError)
        self.refused.append(entry)


async def test_a_refused_batch_is_stored_entry_by_entry_and_only_the_bad_entry_is_refused() -> None:
    table = Table({"b"})
    await write_or_split(["a", "b", "c"], table.write, table.refuse, "rows")
    assert table.rows == ["a", "c"] and table.refused == ["b"]


async def test_a_refused_batch_of_one_is_refused_at_once_not_raised() -> None:
    table = Table({"b"})
    await write_or_split(["b"], table.write, table.refuse, "rows")
    assert table.refused == ["b"] and table.rows == []
    assert table.writes == 1, "the same single entry is not written twice"


async def test_a_batch_of_one_that_refused_could_only_rewrite_raises() -> None:
    table = Table({"b"})
    with pytest.raises(IntegrityError):
        await write_or_split(
            ["b"], table.write, table.refuse, "rows", refusable=lambda entry: entry != "b"
        )
    assert table.refused == []


async def test_a_lost_connection_is_raised_not_blamed_on_the_data() -> None:
    table = Table({"a"}, OperationalError("INSERT", {}, Exception("database is locked")))
    with pytest.raises(OperationalError):
        await write_or_split(["a", "b"], table.write, table.refuse, "rows")
    assert table.refused == []
