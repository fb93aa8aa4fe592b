"""LLM prompt judges: validating and rendering a template, and a classifier's labels.

The model call lives in `neens.engine.llm_judge`; everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from neens.domain.judges.verdict import JudgeCase, Verdict
from neens.domain.storable import safe_label
from neens.errors import Unprocessable

PLACEHOLDERS: Final = ("{input}", "{output}", "{expected_output}")
_PLACEHOLDER: Final = re.compile(r"\{(input|output|expected_output)\}")


def validate_template(template: str) -> None:
    """Refuse (Unprocessable on "template") a template that is not a string or lacks {output}.

    A judge that never sees the output cannot judge it; it would grade the question or the
    reference instead and hand out scores unrelated to the agent. {input} and
    {expected_output} are optional.
    """
    if not isinstance(template, str):
        raise Unprocessable("template must be a string", field="template")
    if "{output}" not in template:
        raise Unprocessable(
            "template must contain {output}: a judge that never sees the output cannot judge it "
            "(available placeholders: {input}, {output}, {expected_output})",
            field="template",
        )


def render_prompt(template: str, case: JudgeCase) -> str:
    """`template` with {input}, {output} and {expected_output} replaced by the case's texts.

    Only these three exact placeholders are replaced, in one pass: every other brace stays as
    written (`str.format` would choke on the JSON examples judge prompts contain), and text
    substituted in is never scanned again, so an output that itself says "{expected_output}"
    cannot pull the reference answer into the prompt. A missing value (None) renders as the
    empty string; callers that must not judge without a value check `cannot_judge` first.
    """
    values = {"input": case.input, "output": case.output, "expected_output": case.expected_output}

    def substitute(match: re.Match[str]) -> str:
        return values[match[1]] or ""

    return _PLACEHOLDER.sub(substitute, template)


def cannot_judge(template: str, case: JudgeCase) -> Verdict | None:
    """The unscored verdict for a case an LLM judge must not be asked about, or None.

    - No output: "no_output", as for managed checks; the model would otherwise grade an empty
      answer, and the call would cost money to say what is already known.
    - The template uses {expected_output} and the item has none: "no_expected_output". Asked to
      compare with an empty reference, a model still returns a confident-looking score.
    A missing {input} is rendered empty instead: many items are judged on the output alone.
    """
    if case.output is None:
        return Verdict.unscored("no_output", "the agent produced no output to judge")
    if case.expected_output is None and "{expected_output}" in template:
        return Verdict.unscored(
            "no_expected_output",
            "the judge's template uses {expected_output}, and this item has none",
        )
    return None


def validate_labels(labels: Sequence[str]) -> list[str]:
    """The labels of a classifier judge, or Unprocessable naming the faulty one.

    At least one label; each a non-empty string without surrounding whitespace; no two equal
    ignoring case, since replies are matched case-insensitively and must map to one label.
    """
    if isinstance(labels, str) or not isinstance(labels, Sequence) or not labels:
        raise Unprocessable("labels must be a non-empty list of strings", field="labels")
    seen: dict[str, int] = {}
    for index, label in enumerate(labels):
        if not isinstance(label, str) or not label.strip() or label != label.strip():
            raise Unprocessable(
                "each label must be a non-empty string without surrounding whitespace",
                field=f"labels[{index}]",
            )
        key = label.casefold()
        if key in seen:
            raise Unprocessable(
                f"label {safe_label(label)} repeats labels[{seen[key]}] (labels ignore case)",
                field=f"labels[{index}]",
            )
        seen[key] = index
    return list(labels)
