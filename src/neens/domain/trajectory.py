"""The trajectory diff: two versions' steps on one prompt, aligned and marked.

GET /preprod-compare/trajectory turns "v3 regressed on this prompt" into "v3 stopped calling
lookup_order". Steps are aligned on what they are, (kind, name), with the standard library's
`difflib.SequenceMatcher` (autojunk off, so a tool called many times is never treated as noise
and dropped from the alignment), and then marked:

- same: the same step with the same input and output;
- changed: the same step with different content, or, inside a replaced stretch, the step that
  took the other's place (paired in order);
- removed: a baseline step the candidate no longer takes;
- added: a candidate step the baseline did not take.

Every step of both sides appears exactly once, each side in its own order, so nothing the agent
did is hidden by the diff.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

from neens.domain.conventions import span_view
from neens.domain.spans import SpanRecord

__all__ = ["STEP_KINDS", "Step", "StepDiff", "StepDiffStatus", "diff_trajectories", "steps_of"]

StepDiffStatus = Literal["same", "changed", "added", "removed"]


@dataclass(frozen=True, slots=True)
class Step:
    """One step an agent took: an LLM call, a tool call, or whatever kind the caller reads."""

    kind: str
    name: str
    input: str | None
    output: str | None


@dataclass(frozen=True, slots=True)
class StepDiff:
    """One line of the diff; the index is the step's position in its own sequence."""

    status: StepDiffStatus
    baseline: Step | None
    candidate: Step | None
    baseline_index: int | None
    candidate_index: int | None


STEP_KINDS = ("llm", "tool", "retriever")
"""Span kinds that are steps; an agent span is a step too when it is a sub-agent call."""


def steps_of(records: Iterable[SpanRecord]) -> list[Step]:
    """A session's steps, in the order given (the store gives start order): its LLM, tool and
    retriever calls, and its sub-agent calls (agent spans with a parent)."""
    steps = []
    for record in records:
        view = span_view(record)
        if view.kind in STEP_KINDS or (view.kind == "agent" and record.parent_span_id):
            steps.append(Step(view.kind, record.name, view.input, view.output))
    return steps


def diff_trajectories(baseline: Sequence[Step], candidate: Sequence[Step]) -> list[StepDiff]:
    """Align two step sequences and mark each step (see the module docstring).

    Within a replaced stretch the steps are paired in order and marked changed, and the longer
    side's leftovers follow as removed (baseline) or added (candidate).
    """
    matcher = SequenceMatcher(
        None,
        [(step.kind, step.name) for step in baseline],
        [(step.kind, step.name) for step in candidate],
        autojunk=False,
    )
    diff: list[StepDiff] = []
    for tag, b_start, b_end, c_start, c_end in matcher.get_opcodes():
        paired = min(b_end - b_start, c_end - c_start) if tag in ("equal", "replace") else 0
        for offset in range(paired):
            b, c = b_start + offset, c_start + offset
            old, new = baseline[b], candidate[c]
            same = tag == "equal" and (old.input, old.output) == (new.input, new.output)
            diff.append(StepDiff("same" if same else "changed", old, new, b, c))
        for b in range(b_start + paired, b_end):
            diff.append(StepDiff("removed", baseline[b], None, b, None))
        for c in range(c_start + paired, c_end):
            diff.append(StepDiff("added", None, candidate[c], None, c))
    return diff
