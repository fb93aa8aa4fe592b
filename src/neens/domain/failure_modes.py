"""Failure modes: how a classifier label resolves to the taxonomy, and which confirmed sessions
become the items of a stress-test suite.

A suite replays what went wrong before, so every item is a session a person confirmed in one of
the suite's modes, with the prompt that session was given. A confirmed session that cannot be
replayed honestly (no input was recorded, or its annotations disagree on the expected answer) is
left out and said so, never replayed with a made-up prompt or a picked answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def resolve_label(label: str, modes_by_name: Mapping[str, str]) -> str | None:
    """The failure mode id a classifier label names: the mode whose name equals the label
    exactly (case and spaces included), else None. No normalisation, so "Refund" and "refund"
    are two labels, and a label never lands on a mode it only resembles."""
    return modes_by_name.get(label)


@dataclass(frozen=True, slots=True)
class Confirmation:
    """One session confirmed in one failure mode, with what the suite needs from both."""

    session_id: str
    session_input: str | None
    failure_mode_id: str
    failure_mode: str
    expected_output: str | None


@dataclass(frozen=True, slots=True)
class SuiteItem:
    source_session_id: str
    input: str
    expected_output: str | None
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SkippedSession:
    session_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class SuiteContent:
    items: list[SuiteItem]
    skipped: list[SkippedSession]


NO_INPUT = "no input was recorded for this session, so there is no prompt to replay"
EXPECTED_OUTPUTS_DISAGREE = (
    "its annotations in these failure modes give different expected outputs; make them agree "
    "or leave all but one empty"
)


def suite_content(confirmations: Iterable[Confirmation], suite_id: str) -> SuiteContent:
    """One item per session, in the order sessions first appear in `confirmations`.

    The item's input is the session's input; its expected output is the one its annotations
    give (null when none gives one); its metadata names the suite, the source session and every
    one of the suite's modes the session was confirmed in."""
    sessions: dict[str, list[Confirmation]] = {}
    for confirmation in confirmations:
        sessions.setdefault(confirmation.session_id, []).append(confirmation)
    items: list[SuiteItem] = []
    skipped: list[SkippedSession] = []
    for session_id, found in sessions.items():
        prompt = found[0].session_input
        if prompt is None:
            skipped.append(SkippedSession(session_id, NO_INPUT))
            continue
        answers = {c.expected_output for c in found if c.expected_output is not None}
        if len(answers) > 1:
            skipped.append(SkippedSession(session_id, EXPECTED_OUTPUTS_DISAGREE))
            continue
        items.append(
            SuiteItem(
                session_id,
                prompt,
                next(iter(answers)) if answers else None,
                _metadata(found, suite_id),
            )
        )
    return SuiteContent(items, skipped)


def _metadata(found: Sequence[Confirmation], suite_id: str) -> dict[str, Any]:
    return {
        "stressTestSuiteId": suite_id,
        "sourceSessionId": found[0].session_id,
        "failureModes": [c.failure_mode for c in found],
        "failureModeIds": [c.failure_mode_id for c in found],
    }
