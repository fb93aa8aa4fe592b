"""Judges: what turns an agent's answer into a score, a label, or an honest "could not score".

Three kinds of judge share one result type, `Verdict`:

- managed checks (`run_managed`, in `managed`): built-in, offline comparisons of the output
  with the item's expected output or with a value from the check's config;
- LLM prompt judges: a template is rendered with the case (`render_prompt`, in `prompt`),
  sent to a model by `neens.engine.llm_judge`, and the model's reply is read back in `replies`
  (`parse_score_reply`, `parse_label_reply`), so the reading is pure and tested without a
  network;
- composites (`composite`): a weighted mean of other judges' scores.

The rule every judge follows: when it cannot score, it says so (`Verdict.unscored` with a stable
reason code) instead of returning 0.0. A missing expected output, a reply the parser cannot read
or a provider outage says nothing about the agent, and a 0.0 would be averaged into its results
as if the agent had answered wrong. Unscored verdicts stay visible and countable instead.

An agent that answered but answered badly does get a low score: an output that is not JSON
fails `json_field_match` with 0.0, because producing JSON was the agent's job.

This package re-exports the public names of its modules, so callers import from
`neens.domain.judges` without knowing how it is split.
"""

from neens.domain.judges.composite import composite, validate_composite_weights, weighted_mean
from neens.domain.judges.managed import (
    MANAGED_CHECKS,
    ManagedCheck,
    json_equal,
    run_managed,
    validate_managed_config,
)
from neens.domain.judges.prompt import (
    PLACEHOLDERS,
    cannot_judge,
    render_prompt,
    validate_labels,
    validate_template,
)
from neens.domain.judges.replies import parse_label_reply, parse_score_reply
from neens.domain.judges.verdict import (
    PASS_THRESHOLD,
    JudgeCase,
    UnscoredReason,
    Verdict,
    passes,
)

__all__ = [
    "MANAGED_CHECKS",
    "PASS_THRESHOLD",
    "PLACEHOLDERS",
    "JudgeCase",
    "ManagedCheck",
    "UnscoredReason",
    "Verdict",
    "cannot_judge",
    "composite",
    "json_equal",
    "parse_label_reply",
    "parse_score_reply",
    "passes",
    "render_prompt",
    "run_managed",
    "validate_composite_weights",
    "validate_labels",
    "validate_managed_config",
    "validate_template",
    "weighted_mean",
]
