"""Arranging a trace's spans into the tree a person reads.

Traces come from outside, so their shape is not trusted: a parent chain may be thousands of
spans deep and parents may form cycles. Everything here walks with explicit stacks and visits
each span a bounded number of times, so no shape can exhaust the interpreter's recursion limit
or take quadratic time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from neens.domain.spans import SpanRecord

__all__ = ["NESTED_LEVELS", "SpanNode", "parent_cycle_members", "span_tree", "walk"]

NESTED_LEVELS = 64
"""How many levels of `children` a displayed span tree nests. Deeper spans are listed, in
depth-first order and with their own parent ids, among the children of their ancestor at the
last nested level: a chain of thousands of spans stays readable by any JSON client (many refuse
documents nested a few hundred levels deep) and no span is dropped."""


@dataclass(slots=True)
class SpanNode:
    record: SpanRecord
    children: list[SpanNode] = field(default_factory=list)


def _start_key(record: SpanRecord) -> tuple[bool, float, str]:
    started = record.start_time.timestamp() if record.start_time else 0.0
    return (record.start_time is None, started, record.span_id)


def parent_cycle_members(records: Iterable[SpanRecord]) -> set[str]:
    """The ids of the spans that are their own ancestors (that sit on a parent cycle).

    Each span is followed up its parent chain until it reaches a root, a missing parent, a span
    already settled, or a span on the current path (a cycle: the spans from there on are its
    members). Every span is settled once, so this is linear in the number of spans.
    """
    parent_of = {record.span_id: record.parent_span_id for record in records}
    settled: set[str] = set()
    members: set[str] = set()
    for start in parent_of:
        path: list[str] = []
        on_path: set[str] = set()
        current: str | None = start
        while current is not None and current in parent_of and current not in settled:
            if current in on_path:
                members.update(path[path.index(current) :])
                break
            path.append(current)
            on_path.add(current)
            current = parent_of[current]
        settled.update(path)
    return members


def span_tree(records: Sequence[SpanRecord]) -> list[SpanNode]:
    """Roots first, children under their parent, siblings by start time.

    Every span appears exactly once: a span whose parent never arrived, or that sits on a parent
    cycle, is shown as a root rather than dropped.
    """
    ordered = sorted(records, key=_start_key)
    nodes = {r.span_id: SpanNode(r) for r in ordered}
    on_cycle = parent_cycle_members(ordered)
    roots: list[SpanNode] = []
    for record in ordered:
        parent = nodes.get(record.parent_span_id) if record.parent_span_id else None
        if parent is None or record.span_id in on_cycle:
            roots.append(nodes[record.span_id])
        else:
            parent.children.append(nodes[record.span_id])
    return roots


def walk(roots: Sequence[SpanNode]) -> Iterator[tuple[SpanNode, SpanNode | None, int]]:
    """Every node of the tree as (node, parent, depth), depth first in display order.

    Roots have depth 0 and parent None. Iterative, so a chain of any length is safe.
    """
    stack: list[tuple[SpanNode, SpanNode | None, int]] = [
        (root, None, 0) for root in reversed(roots)
    ]
    while stack:
        node, parent, depth = stack.pop()
        yield node, parent, depth
        stack.extend((child, node, depth + 1) for child in reversed(node.children))
