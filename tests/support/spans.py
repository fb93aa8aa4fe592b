"""Span records for store and engine tests that write traces directly."""

from __future__ import annotations

from datetime import UTC, datetime

from neens.domain.spans import SpanRecord


def step_span(trace_id: str, n: int) -> SpanRecord:
    """Span `s{n}` of an agent trace: `s0` is the refund-agent root, the others its tool steps,
    one second apart."""
    return SpanRecord(
        trace_id=trace_id,
        span_id=f"s{n}",
        parent_span_id=None if n == 0 else "s0",
        name=f"step-{n}",
        kind="tool" if n else "agent",
        start_time=datetime(2026, 11, 30, 8, 0, n, tzinfo=UTC),
        end_time=datetime(2026, 11, 30, 8, 0, n + 1, tzinfo=UTC),
        status_code=None,
        status_message=None,
        attributes={"gen_ai.agent.name": "refund-agent"} if n == 0 else {},
    )
