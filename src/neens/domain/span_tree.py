"""Arranging a trace's spans into the tree a person reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from neens.ingest.records import SpanRecord


@dataclass(slots=True)
class SpanNode:
    record: SpanRecord
    children: list[SpanNode] = field(default_factory=list)


def _start_key(record: SpanRecord) -> tuple[bool, float, str]:
    started = record.start_time.timestamp() if record.start_time else 0.0
    return (record.start_time is None, started, record.span_id)


def span_tree(records: list[SpanRecord]) -> list[SpanNode]:
    """Roots first, children under their parent, siblings by start time.

    Every span appears exactly once: a span whose parent never arrived, or that sits on a parent
    cycle, is shown as a root rather than dropped.
    """
    ordered = sorted(records, key=_start_key)
    nodes = {r.span_id: SpanNode(r) for r in ordered}
    roots: list[SpanNode] = []
    for record in ordered:
        parent = nodes.get(record.parent_span_id) if record.parent_span_id else None
        if parent is None or _has_ancestor(nodes, record.parent_span_id, record.span_id):
            roots.append(nodes[record.span_id])
        else:
            parent.children.append(nodes[record.span_id])
    return roots


def _has_ancestor(nodes: dict[str, SpanNode], start: str | None, target: str) -> bool:
    """Whether walking up from `start` reaches `target` (a cycle through `target`)."""
    seen: set[str] = set()
    current = start
    while current is not None and current not in seen:
        if current == target:
            return True
        seen.add(current)
        node = nodes.get(current)
        current = node.record.parent_span_id if node else None
    return False
