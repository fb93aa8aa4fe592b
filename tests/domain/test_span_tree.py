"""The span tree and parent cycles, for traces of any shape: iterative and linear."""

from __future__ import annotations

import sys
import time

from hypothesis import given
from hypothesis import strategies as st

from neens.domain.span_tree import parent_cycle_members, span_tree, walk
from neens.domain.spans import SpanRecord


def make(span_id: str, parent: str | None) -> SpanRecord:
    return SpanRecord(
        trace_id="t",
        span_id=span_id,
        parent_span_id=parent,
        name=span_id,
        kind=None,
        start_time=None,
        end_time=None,
        status_code=None,
        status_message=None,
    )


def chain(depth: int) -> list[SpanRecord]:
    return [make(f"s{n}", f"s{n - 1}" if n else None) for n in range(depth)]


def test_a_chain_far_deeper_than_the_recursion_limit_is_walked_in_linear_time() -> None:
    depth = max(5000, sys.getrecursionlimit() * 5)
    records = chain(depth)
    started = time.monotonic()
    walked = [(node.record.span_id, level) for node, _, level in walk(span_tree(records))]
    assert time.monotonic() - started < 5  # quadratic ancestor checks took far longer
    assert walked == [(f"s{n}", n) for n in range(depth)]
    assert parent_cycle_members(records) == set()


def test_spans_on_a_parent_cycle_are_roots_and_their_other_children_stay_under_them() -> None:
    records = [make("a", "c"), make("b", "a"), make("c", "b"), make("d", "a"), make("e", "e")]
    assert parent_cycle_members(records) == {"a", "b", "c", "e"}
    roots = span_tree(records)
    assert sorted(r.record.span_id for r in roots) == ["a", "b", "c", "e"]
    [a] = [r for r in roots if r.record.span_id == "a"]
    assert [c.record.span_id for c in a.children] == ["d"]


def test_a_long_chain_ending_in_a_cycle_marks_only_the_cycle() -> None:
    records = [*chain(3000), make("x", "y"), make("y", "x"), make("hang", "x")]
    assert parent_cycle_members(records) == {"x", "y"}


@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 31)), max_size=30, unique_by=lambda p: p[0]
    )
)
def test_every_span_appears_exactly_once_whatever_its_parents(pairs: list[tuple[int, int]]) -> None:
    records = [make(str(child), str(parent) if parent < 31 else None) for child, parent in pairs]
    seen = [node.record.span_id for node, _, _ in walk(span_tree(records))]
    assert sorted(seen) == sorted(r.span_id for r in records)
    # The cycle members are exactly the spans that reach themselves by following parents.
    parent_of = {r.span_id: r.parent_span_id for r in records}
    expected = set()
    for r in records:
        current, steps = parent_of.get(r.span_id), 0
        while current is not None and steps <= len(records):
            if current == r.span_id:
                expected.add(r.span_id)
                break
            current, steps = parent_of.get(current), steps + 1
    assert parent_cycle_members(records) == expected
