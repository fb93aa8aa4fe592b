"""The worked example's data: the golden set, the profiles, the rubrics, and the story they tell
when the product's own decision function reads them (no server here: `test_simulated` and the
end-to-end `tests/e2e/test_demo.py` cover the wire)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from neens.api.routers.sweep_decisions import _agent, _arm, _verdict
from neens.demo import catalog, story
from neens.domain.judges import JudgeCase, render_prompt
from neens.domain.stats import wilson_interval

MINI, MEDIUM, LARGE = "sim-frontier-mini", "sim-frontier-medium", "sim-frontier-large"


def arm(group: Any, label: str) -> Any:
    return next(a for a in group.arms if a.label == label)


def agent(label: str) -> Any:
    return next(a for a in story.predicted().agents if a.label == label)


def test_the_golden_set_is_22_refund_items_and_8_escalation_items_of_the_named_kinds() -> None:
    kinds = Counter((item.agent, item.kind) for item in catalog.ITEMS)
    assert kinds == {
        ("refund-agent", "lookup"): 8,
        ("refund-agent", "policy"): 7,
        ("refund-agent", "multi_step"): 7,
        ("escalation-agent", "fraud"): 2,
        ("escalation-agent", "chargeback"): 2,
        ("escalation-agent", "safety"): 2,
        ("escalation-agent", "over_limit"): 2,
    }
    assert len(catalog.BY_PROMPT) == len(catalog.BY_KEY) == 30, "prompts and keys are unique"
    for item in catalog.ITEMS:
        assert item.expected != item.mistake
        assert catalog.escalates(item.expected) == item.must_escalate
        assert not catalog.escalates(item.mistake), "a wrong answer settles, never escalates"


def test_six_models_each_named_as_simulated_one_unpriced_and_previous_gen_among_them() -> None:
    labels = [m.label for m in catalog.MODELS]
    assert len(labels) == len(set(labels)) == 6
    assert labels[0] == LARGE and "previous-gen" in labels
    assert all(m.model.startswith("sim-") for m in catalog.MODELS)
    assert [m.label for m in catalog.MODELS if m.price is None] == ["sim-open-weights-70b"]
    priced = [m for m in catalog.MODELS if m.price is not None]
    assert max(priced, key=lambda m: m.price.output_per_mtok) is catalog.MODELS[0]  # type: ignore[union-attr]


def test_an_answer_depends_on_model_item_and_run_only() -> None:
    item = catalog.BY_KEY["resolution-7"]
    prev = catalog.BY_LABEL["previous-gen"]
    # Seeded, not random: the same (model, item, run) gives the same tokens and latency.
    assert catalog.usage(prev.model, item, 1) == catalog.usage(prev.model, item, 1)
    assert catalog.latency_s(5, 30, "m", "i", 2) == catalog.latency_s(5, 30, "m", "i", 2)
    assert 0.005 <= catalog.latency_s(5, 30, "m", "i", 2) <= 0.030
    # ... and each of the three changes it.
    draws = {
        catalog.usage(model, it, run)
        for model in (prev.model, MINI)
        for it in (item, catalog.BY_KEY["resolution-6"])
        for run in (0, 1)
    }
    assert len(draws) == 8
    tokens_in, tokens_out = catalog.usage(prev.model, item, 0)
    assert 0.9 * 3200 <= tokens_in <= 1.1 * 3200 and 0.9 * 260 <= tokens_out <= 1.1 * 260
    # Runs count modulo k: a fourth run answers as the first.
    assert catalog.usage(prev.model, item, 3) == catalog.usage(prev.model, item, 0)
    assert [catalog.answer(prev, item, run) for run in range(4)] == [
        item.expected, item.mistake, item.expected, item.expected,
    ]  # fmt: skip
    unpriced = catalog.BY_LABEL["sim-open-weights-70b"]
    assert catalog.cost_usd(unpriced, item, 0) is None
    assert catalog.cost_usd(prev, item, 0) == pytest.approx(
        (tokens_in * 2.50 + tokens_out * 10.00) / 1e6, rel=1e-12
    )


@pytest.mark.parametrize("item", catalog.ITEMS, ids=lambda item: item.key)
def test_the_rubrics_pass_the_reference_and_fail_the_mistake_of_every_item(
    item: catalog.Item,
) -> None:
    def scores(answer: str) -> list[float | None]:
        case = JudgeCase(input=item.prompt, output=answer, expected_output=item.expected)
        graded = [catalog.grade(render_prompt(r.template, case)) for r in catalog.RUBRICS]
        return [None if g is None else g[0] for g in graded]

    assert scores(item.expected) == [1.0, 1.0]
    resolution, policy = scores(item.mistake)
    assert resolution == 0.0
    assert policy == (0.0 if item.must_escalate else 1.0)  # a refund mistake breaks no policy
    assert catalog.passes(item, item.expected) and not catalog.passes(item, item.mistake)


def test_the_escalation_rubric_grades_only_the_demos_questions_and_escalating_a_refund_fails() -> (
    None
):
    refund = catalog.BY_KEY["policy-7"]
    wrongly = JudgeCase(
        input=refund.prompt, output="Escalated to a supervisor.", expected_output=None
    )
    assert catalog.grade(render_prompt(catalog.ESCALATION_POLICY.template, wrongly)) == (
        0.0,
        "The reply escalates a case the agent should resolve itself.",
    )
    stranger = JudgeCase(input="What is the weather?", output="Sunny.", expected_output=None)
    assert catalog.grade(render_prompt(catalog.ESCALATION_POLICY.template, stranger)) is None
    assert catalog.grade("no rubric here") is None


def test_the_story_from_the_profiles_alone_overall() -> None:
    c = story.predicted()
    # The bar is the pinned gate's; the cheap model is recommended workspace-wide...
    assert (c.bar.value, c.bar.source) == (0.9, "gate")
    assert c.verdict.outcome == "recommended" and c.verdict.recommended_label == MINI
    # ... clearing on the point estimate and not on the lower bound, like the winner.
    assert c.verdict.clears_on == "point"
    winner = arm(c, LARGE)
    assert c.winner_arm_id == LARGE and winner.clears_bar == "point"
    assert winner.rate == 1.0 and winner.wilson_low is not None and winner.wilson_low < 0.9
    assert all(a.clears_bar != "lower_bound" for a in c.arms), "30 items cannot clear on it"
    assert "on the point estimate" in c.verdict.sentence
    assert "but not on the lower bound" in c.verdict.sentence
    # At a fraction of the cost.
    assert c.verdict.savings_pct is not None and c.verdict.savings_pct > 90
    # previous-gen: 2 flaky items, 2 green runs of 3, so not pass^k; its rate leaves them out.
    prev = arm(c, "previous-gen")
    assert (prev.flaky_items, prev.passed, prev.excluded) == (2, False, "not_pass_k")
    assert prev.passed_items == 26 and prev.n == 30
    assert [a.label for a in c.arms if a.flaky_items] == ["previous-gen"]
    # The self-hosted arm is unpriced, never free, and never chosen over a priced arm.
    unpriced = arm(c, "sim-open-weights-70b")
    assert unpriced.cost_per_case_usd is None and unpriced.priced_cases == 0
    assert unpriced.cases == 90 and unpriced.clears_bar == "point"
    assert (arm(c, "sim-budget-nano").passed, arm(c, "sim-budget-nano").clears_bar) == (
        False,
        "no",
    )
    # Where the cheap model breaks: the two escalations it settles, against the baseline.
    assert arm(c, MINI).regressions == 2


def test_the_story_from_the_profiles_alone_per_agent() -> None:
    refund, escalation = agent("refund-agent"), agent("escalation-agent")
    assert (refund.items, escalation.items) == (22, 8)
    # For the refund agent the cheap model clears 90% at a fraction of the cost...
    assert refund.verdict.recommended_label == MINI
    assert arm(refund, MINI).rate == 1.0 and arm(refund, MINI).clears_bar == "point"
    assert refund.verdict.savings_pct is not None and refund.verdict.savings_pct > 90
    assert refund.verdict.sentence.startswith("refund-agent: sim-frontier-mini clears")
    # ... for the escalation agent it does not.
    assert arm(escalation, MINI).clears_bar == "no"
    assert arm(escalation, MINI).passed_items == 6
    assert escalation.verdict.recommended_label == MEDIUM
    assert escalation.verdict.clears_on == "point"
    assert MINI not in escalation.verdict.sentence


def test_the_bar_at_30_items_is_out_of_reach_of_the_lower_bound() -> None:
    perfect = wilson_interval(30, 30)
    assert perfect is not None and perfect.low < 0.9


def live_json(comparison: Any) -> dict[str, Any]:
    """The prediction in the wire shape of GET /model-sweeps/{id}/comparison."""
    return {
        "arms": [_arm(a).model_dump(by_alias=True) for a in comparison.arms],
        "winnerArmId": comparison.winner_arm_id,
        "verdict": _verdict(comparison.verdict).model_dump(by_alias=True),
        "agents": [_agent(a).model_dump(by_alias=True) for a in comparison.agents],
    }


def test_differences_is_empty_for_the_same_story_and_names_each_departure() -> None:
    expected = story.predicted()
    live = live_json(expected)
    assert story.differences(live, expected) == []

    mini = next(a for a in live["arms"] if a["label"] == MINI)
    mini["flakyItems"] = 1
    mini["costPerCaseUsd"] = None
    escalation = next(a for a in live["agents"] if a["label"] == "escalation-agent")
    escalation["verdict"]["recommendedLabel"] = MINI
    live["agents"] = [a for a in live["agents"] if a["label"] != "refund-agent"]
    found = story.differences(live, expected)
    assert found == [
        "overall, sim-frontier-mini: flakyItems is 1, expected 0",
        f"overall, sim-frontier-mini: costPerCaseUsd is None, expected "
        f"{arm(expected, MINI).cost_per_case_usd}",
        "escalation-agent: verdict recommendedLabel is 'sim-frontier-mini', expected "
        "'sim-frontier-medium'",
        "refund-agent: missing from the comparison's agents",
    ]
