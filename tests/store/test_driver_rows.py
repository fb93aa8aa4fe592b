"""How ingest's driver-level INSERTs split their rows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neens.store.driver_rows import MAX_BOUND_VALUES, chunks, flat, values_clause


@given(count=st.integers(0, 5000), width=st.integers(1, 40))
def test_rows_go_in_power_of_two_chunks_that_fit_one_statement(count: int, width: int) -> None:
    rows = [tuple(range(n * width, (n + 1) * width)) for n in range(count)]
    parts = list(chunks(rows, width))
    assert [row for part in parts for row in part] == rows  # all of them, in order, once
    sizes = [len(part) for part in parts]
    assert all(size & (size - 1) == 0 for size in sizes)
    assert all(size * width <= MAX_BOUND_VALUES for size in sizes)
    assert sizes == sorted(sizes, reverse=True)
    smaller = [size for size in sizes if size != sizes[0]]
    assert len(set(smaller)) == len(smaller)  # a few statement texts serve every batch


@pytest.mark.skipif(MAX_BOUND_VALUES != 32_766, reason="this SQLite binds fewer values")
def test_700_rows_of_17_values() -> None:
    rows = [(n,) * 17 for n in range(700)]
    assert [len(part) for part in chunks(rows, 17)] == [512, 128, 32, 16, 8, 4]
    assert [len(part) for part in chunks(rows * 3, 17)] == [1024, 1024, 32, 16, 4]


def test_the_values_clause_and_its_flat_values() -> None:
    assert values_clause(["?", "?"], 3) == "VALUES (?, ?), (?, ?), (?, ?)"
    assert flat([(1, "a"), (2, None)]) == (1, "a", 2, None)
