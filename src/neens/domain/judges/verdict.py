"""What every judge returns: the case it looks at, its `Verdict`, and the pass threshold."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final, Literal

from neens.domain.storable import safe_label


@dataclass(frozen=True, slots=True)
class JudgeCase:
    """What a judge looks at: the item's input, the agent's output and the expected output.

    Each may be None: an item without a reference answer has no expected output, and an agent
    call that failed has no output. `None` and `""` differ: `""` is an answer that is empty.
    """

    input: str | None
    output: str | None
    expected_output: str | None


UnscoredReason = Literal[
    "no_output",
    "no_expected_output",
    "invalid_expected_output",
    "grade_parse_failure",
    "label_parse_failure",
    "judge_call_failed",
    "component_unscored",
    "no_components",
    "pattern_timeout",
]
"""Why a judge could not score, as a stable code that callers may count and filter on.

- no_output: the agent produced no output (None), so there is nothing to judge.
- no_expected_output: the judge compares with the expected output and the item has none.
- invalid_expected_output: the item's expected output cannot serve as a reference (not JSON, or
  lacking the path, for `json_field_match`; empty, for `contains`, where it would always match).
- grade_parse_failure: an LLM judge replied, but no valid 0..1 score could be read from it.
- label_parse_failure: a classifier judge replied, but not with one of its labels.
- judge_call_failed: the LLM judge endpoint could not be reached or answered with an error.
- component_unscored: a composite has a component that did not score.
- no_components: a composite has nothing to average.
- pattern_timeout: a `regex` judge's pattern took longer than its time limit on the output.
"""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One judge's finding about one case.

    Exactly one of three shapes, enforced on construction so a half-filled verdict cannot exist:

    - scored: `score` in [0, 1], `unscored_reason` None (`Verdict.scored`);
    - labelled (classifier judges): `label` set, `score` None (`Verdict.labelled`);
    - unscored: `unscored_reason` set to an `UnscoredReason` code, `score` and `label` None
      (`Verdict.unscored`).

    `reason` is always a human sentence. `prompt` is the exact user message an LLM judge sent,
    and `raw_reply` the model's text as received, kept so that a surprising score can be audited
    and a parse failure can be read.
    """

    score: float | None
    label: str | None
    reason: str
    unscored_reason: str | None = None
    prompt: str | None = None
    raw_reply: str | None = None

    def __post_init__(self) -> None:
        if self.score is not None:
            if isinstance(self.score, bool) or not isinstance(self.score, int | float):
                raise ValueError(f"a verdict score must be a number, not {self.score!r}")
            if not (math.isfinite(self.score) and 0.0 <= self.score <= 1.0):
                raise ValueError(f"a verdict score must lie in [0, 1], not {self.score!r}")
            object.__setattr__(self, "score", float(self.score))
        if self.unscored_reason is not None:
            if self.score is not None or self.label is not None:
                raise ValueError("an unscored verdict carries neither a score nor a label")
        elif self.score is None and self.label is None:
            raise ValueError("a verdict needs a score, a label, or an unscored reason")

    @classmethod
    def scored(
        cls,
        score: float,
        reason: str,
        *,
        prompt: str | None = None,
        raw_reply: str | None = None,
    ) -> Verdict:
        """A verdict with a score in [0, 1] (ValueError outside it: that is a judge's bug)."""
        return cls(score=score, label=None, reason=reason, prompt=prompt, raw_reply=raw_reply)

    @classmethod
    def labelled(
        cls,
        label: str,
        reason: str,
        *,
        prompt: str | None = None,
        raw_reply: str | None = None,
    ) -> Verdict:
        """A classifier's verdict: a label, and no score."""
        return cls(score=None, label=label, reason=reason, prompt=prompt, raw_reply=raw_reply)

    @classmethod
    def unscored(
        cls,
        reason_code: UnscoredReason,
        reason: str,
        *,
        prompt: str | None = None,
        raw_reply: str | None = None,
    ) -> Verdict:
        """A judge's admission that it could not score, with a code and a human reason."""
        return cls(
            score=None,
            label=None,
            reason=reason,
            unscored_reason=reason_code,
            prompt=prompt,
            raw_reply=raw_reply,
        )


PASS_THRESHOLD: Final = 0.7
"""The score from which a case counts as passed."""

_PASS_TOLERANCE: Final = 1e-9


def passes(score: float) -> bool:
    """Whether `score` reaches `PASS_THRESHOLD` (0.7).

    A tolerance of 1e-9 absorbs float rounding: a score computed as 0.7 (three components at 0.7
    average to 0.6999999999999998 in floats) must pass like a judge that said 0.7 directly.
    NaN never passes.
    """
    return score >= PASS_THRESHOLD - _PASS_TOLERANCE


def json_text(value: Any) -> str:
    """A JSON value as a reason shows it: JSON text, cut to 60 characters."""
    return safe_label(json.dumps(value, ensure_ascii=False), 60)
