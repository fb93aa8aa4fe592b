"""Which confirmed sessions become suite items, and how labels resolve: pure rules."""

from __future__ import annotations

from neens.domain.failure_modes import (
    EXPECTED_OUTPUTS_DISAGREE,
    NO_INPUT,
    Confirmation,
    SkippedSession,
    resolve_label,
    suite_content,
)


def c(session: str, prompt: str | None, mode: str, expected: str | None = None) -> Confirmation:
    return Confirmation(session, prompt, f"fm_{mode}", mode, expected)


def test_one_item_per_session_in_first_seen_order_naming_every_mode() -> None:
    content = suite_content(
        [c("s2", "b", "refund"), c("s1", "a", "refund"), c("s2", "b", "fraud")], "sts_1"
    )
    assert [(i.source_session_id, i.input) for i in content.items] == [("s2", "b"), ("s1", "a")]
    assert content.items[0].metadata == {
        "stressTestSuiteId": "sts_1",
        "sourceSessionId": "s2",
        "failureModes": ["refund", "fraud"],
        "failureModeIds": ["fm_refund", "fm_fraud"],
    }
    assert content.skipped == []


def test_the_expected_output_is_the_one_given_or_null_and_disagreement_skips() -> None:
    content = suite_content(
        [
            c("given", "p1", "refund", "$40"),
            c("given", "p1", "fraud"),
            c("same", "p2", "refund", "$10"),
            c("same", "p2", "fraud", "$10"),
            c("none", "p3", "refund"),
            c("split", "p4", "refund", "$10"),
            c("split", "p4", "fraud", "escalate"),
            c("blank", None, "refund", "$5"),
        ],
        "sts_1",
    )
    assert [(i.source_session_id, i.expected_output) for i in content.items] == [
        ("given", "$40"),
        ("same", "$10"),
        ("none", None),
    ]
    assert content.skipped == [
        SkippedSession("split", EXPECTED_OUTPUTS_DISAGREE),
        SkippedSession("blank", NO_INPUT),
    ]


def test_an_empty_prompt_is_still_a_prompt() -> None:
    content = suite_content([c("s", "", "refund")], "sts_1")
    assert [i.input for i in content.items] == [""] and content.skipped == []


def test_a_label_resolves_only_to_the_mode_of_exactly_its_name() -> None:
    modes = {"refund": "fm_1", "Escalation": "fm_2"}
    assert resolve_label("refund", modes) == "fm_1"
    assert resolve_label("Refund", modes) is None
    assert resolve_label("escalation", modes) is None
    assert resolve_label("refund ", modes) is None
