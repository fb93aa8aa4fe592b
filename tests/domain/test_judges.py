"""Managed checks, prompt rendering, reading judge replies, composites and the pass threshold."""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from neens.domain.json_path import parse_path
from neens.domain.judges import (
    MANAGED_CHECKS,
    PASS_THRESHOLD,
    JudgeCase,
    Verdict,
    cannot_judge,
    composite,
    json_equal,
    parse_label_reply,
    parse_score_reply,
    passes,
    render_prompt,
    run_managed,
    validate_composite_weights,
    validate_labels,
    validate_managed_config,
    validate_template,
)
from neens.errors import Unprocessable


def case(output: str | None, expected: str | None = None, input: str | None = "q") -> JudgeCase:
    return JudgeCase(input=input, output=output, expected_output=expected)


def score_of(check: str, config: dict[str, Any], output: str | None, expected: str | None) -> float:
    verdict = run_managed(check, config, case(output, expected))
    assert verdict.score is not None, verdict
    return verdict.score


def refusal(check: str, config: dict[str, Any]) -> Unprocessable:
    with pytest.raises(Unprocessable) as caught:
        validate_managed_config(check, config)
    return caught.value


# --- verdicts -------------------------------------------------------------------------------


def test_a_scored_verdict_has_a_score_and_no_unscored_reason() -> None:
    verdict = Verdict.scored(1, "right")
    assert verdict.score == 1.0 and isinstance(verdict.score, float)
    assert verdict.unscored_reason is None and verdict.label is None


def test_an_unscored_verdict_has_neither_score_nor_label() -> None:
    verdict = Verdict.unscored("no_output", "nothing to judge", raw_reply="x")
    assert (verdict.score, verdict.label, verdict.unscored_reason) == (None, None, "no_output")
    assert verdict.raw_reply == "x"


@pytest.mark.parametrize("bad", [-0.1, 1.01, math.nan, math.inf, True])
def test_a_verdict_refuses_a_score_outside_zero_to_one(bad: float) -> None:
    with pytest.raises(ValueError):
        Verdict.scored(bad, "out of range")


def test_a_verdict_cannot_be_both_scored_and_unscored() -> None:
    with pytest.raises(ValueError):
        Verdict(score=0.5, label=None, reason="r", unscored_reason="no_output")
    with pytest.raises(ValueError):
        Verdict(score=None, label=None, reason="neither")


# --- exact_match ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "output", "expected", "score"),
    [
        ({}, "Paris", "Paris", 1.0),
        ({}, "  Paris\n", "Paris", 1.0),
        ({"strip": False}, "  Paris\n", "Paris", 0.0),
        ({}, "paris", "Paris", 0.0),
        ({"case_sensitive": False}, "PARIS", "paris", 1.0),
        ({"case_sensitive": False}, "STRASSE", "straße", 1.0),
        ({}, "", "", 1.0),
        ({}, "", "Paris", 0.0),
        ({}, "日本語 🌍", "日本語 🌍", 1.0),
        ({}, "café", "cafe\u0301", 1.0),
        ({}, "Paris.", "Paris", 0.0),
    ],
)
def test_exact_match_compares_the_output_with_the_expected_output(
    config: dict[str, Any], output: str, expected: str, score: float
) -> None:
    assert score_of("exact_match", config, output, expected) == score


def test_exact_match_says_where_the_output_differs() -> None:
    verdict = run_managed("exact_match", {}, case("Parsi", "Paris"))
    assert "character 3" in verdict.reason


def test_exact_match_without_expected_output_is_unscored_not_zero() -> None:
    verdict = run_managed("exact_match", {}, case("Paris", None))
    assert verdict.score is None and verdict.unscored_reason == "no_expected_output"


@given(st.text())
def test_exact_match_always_accepts_an_output_equal_to_the_expected_one(text: str) -> None:
    assert score_of("exact_match", {"strip": False}, text, text) == 1.0


# --- contains -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "output", "expected", "score"),
    [
        ({"value": "refund"}, "We will refund you.", None, 1.0),
        ({"value": "refund"}, "We will not help.", "anything", 0.0),
        ({"value": "Refund"}, "we will refund you", None, 0.0),
        ({"value": "Refund", "case_sensitive": False}, "we will REFUND you", None, 1.0),
        ({}, "The capital is Paris.", "Paris", 1.0),
        ({}, "The capital is Lyon.", "Paris", 0.0),
        ({"value": "🌍"}, "hello 🌍!", None, 1.0),
        ({"value": "a.b*"}, "a.b*c", None, 1.0),
        ({"value": "a.b*"}, "axbbb", None, 0.0),
        ({"value": "x"}, "", None, 0.0),
    ],
)
def test_contains_looks_for_the_value_or_the_expected_output_in_the_output(
    config: dict[str, Any], output: str, expected: str | None, score: float
) -> None:
    assert score_of("contains", config, output, expected) == score


def test_contains_without_value_or_expected_output_is_unscored() -> None:
    verdict = run_managed("contains", {}, case("Paris", None))
    assert verdict.unscored_reason == "no_expected_output"


def test_contains_with_an_empty_expected_output_is_unscored_because_it_always_matches() -> None:
    verdict = run_managed("contains", {}, case("anything", ""))
    assert verdict.unscored_reason == "invalid_expected_output"


def test_contains_refuses_an_empty_configured_value() -> None:
    assert refusal("contains", {"value": ""}).field == "config.value"
    assert refusal("contains", {"value": 3}).field == "config.value"


# Below U+0300 no character composes with its neighbour under NFC, so concatenation is kept.
_LATIN = st.text(st.characters(max_codepoint=0x2FF))


@given(_LATIN, _LATIN.filter(bool), _LATIN)
def test_contains_accepts_any_output_that_contains_the_value(a: str, value: str, b: str) -> None:
    assert score_of("contains", {"value": value}, a + value + b, None) == 1.0


# --- regex ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "output", "score"),
    [
        (r"\b\d{3}-\d{4}\b", "call 555-1234 now", 1.0),
        (r"\b\d{3}-\d{4}\b", "call 5551234 now", 0.0),
        (r"^Yes", "Yes, indeed", 1.0),
        (r"^Yes", "Well, Yes", 0.0),
        (r"\$\d+\.\d{2}", "total: $12.50", 1.0),
        (r"\(a\|b\)", "(a|b)", 1.0),
        (r"(?i)paris", "PARIS", 1.0),
        (r"日本", "これは日本です", 1.0),
        (r"^$", "", 1.0),
    ],
)
def test_regex_searches_the_output(pattern: str, output: str, score: float) -> None:
    assert score_of("regex", {"pattern": pattern}, output, None) == score


def test_regex_needs_no_expected_output() -> None:
    assert run_managed("regex", {"pattern": "x"}, case("x", None)).score == 1.0


@pytest.mark.parametrize("config", [{}, {"pattern": ""}, {"pattern": "(unclosed"}, {"pattern": 5}])
def test_regex_refuses_a_missing_empty_or_broken_pattern(config: dict[str, Any]) -> None:
    assert refusal("regex", config).field == "config.pattern"


def test_a_pattern_that_backtracks_past_its_time_limit_leaves_the_case_unscored() -> None:
    """`(a|aa)+$` over 60 a's and a "!" tries every way of splitting the a's (Fibonacci(60), about
    10**12): hours, with the server's thread held, unless the match is cut off."""
    started = time.monotonic()
    verdict = run_managed("regex", {"pattern": "(a|aa)+$"}, case("a" * 60 + "!", None))
    elapsed = time.monotonic() - started
    assert (verdict.score, verdict.unscored_reason) == (None, "pattern_timeout")
    assert verdict.reason is not None and "took longer than 0.1 s" in verdict.reason
    assert elapsed < 5, "the time limit did not cut the match off"
    # the same pattern on an output it settles quickly still scores
    assert run_managed("regex", {"pattern": "(a|aa)+$"}, case("a" * 60, None)).score == 1.0


def test_regex_takes_no_case_option() -> None:
    assert refusal("regex", {"pattern": "x", "case_sensitive": False}).field == (
        "config.case_sensitive"
    )


# --- json_field_match -------------------------------------------------------------------------

ORDER = json.dumps({"order": {"status": "shipped", "total": 12}, "items": [{"id": "a1"}, {}]})


@pytest.mark.parametrize(
    ("config", "output", "score"),
    [
        ({"path": "order.status", "value": "shipped"}, ORDER, 1.0),
        ({"path": "order.status", "value": "pending"}, ORDER, 0.0),
        ({"path": "items[0].id", "value": "a1"}, ORDER, 1.0),
        ({"path": "items[1].id", "value": "a1"}, ORDER, 0.0),
        ({"path": "items[5].id", "value": "a1"}, ORDER, 0.0),
        ({"path": "order.total", "value": 12.0}, ORDER, 1.0),
        ({"path": "order.total", "value": "12"}, ORDER, 0.0),
        ({"path": "order", "value": {"status": "shipped", "total": 12}}, ORDER, 1.0),
        ({"path": "[1]", "value": True}, "[0, true]", 1.0),
        ({"path": "[1]", "value": 1}, "[0, true]", 0.0),
        ({"path": "a", "value": None}, '{"a": null}', 1.0),
        ({"path": "a", "value": None}, "{}", 0.0),
        ({"path": "名前", "value": "太郎"}, '{"名前": "太郎"}', 1.0),
        ({"path": "items.0", "value": 1}, '{"items": [1]}', 0.0),
        ({"path": "items.0", "value": 1}, '{"items": {"0": 1}}', 1.0),
    ],
)
def test_json_field_match_compares_the_value_at_a_path(
    config: dict[str, Any], output: str, score: float
) -> None:
    assert score_of("json_field_match", config, output, None) == score


def test_json_field_match_compares_with_the_same_path_in_the_expected_output() -> None:
    expected = json.dumps({"order": {"status": "shipped", "note": "other fields do not matter"}})
    assert score_of("json_field_match", {"path": "order.status"}, ORDER, expected) == 1.0


@pytest.mark.parametrize("output", ["not json", '```json\n{"a": 1}\n```', '{"a": NaN}', ""])
def test_an_output_that_is_not_json_fails_json_field_match(output: str) -> None:
    verdict = run_managed("json_field_match", {"path": "a", "value": 1}, case(output))
    assert verdict.score == 0.0 and "not JSON" in verdict.reason


def test_a_deeply_nested_output_fails_json_field_match_without_crashing() -> None:
    output = "[" * 100_000 + "]" * 100_000
    assert score_of("json_field_match", {"path": "a", "value": 1}, output, None) == 0.0


@pytest.mark.parametrize(
    ("expected", "code"),
    [
        (None, "no_expected_output"),
        ("nope", "invalid_expected_output"),
        ("{}", "invalid_expected_output"),
    ],
)
def test_json_field_match_cannot_score_against_an_unusable_expected_output(
    expected: str | None, code: str
) -> None:
    verdict = run_managed("json_field_match", {"path": "a"}, case('{"a": 1}', expected))
    assert verdict.score is None and verdict.unscored_reason == code


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("order.status", ("order", "status")),
        ("items[0].id", ("items", 0, "id")),
        ("[2].name", (2, "name")),
        ("matrix[1][0]", ("matrix", 1, 0)),
        ("first name", ("first name",)),
    ],
)
def test_json_paths_are_keys_separated_by_dots_and_bracketed_indexes(
    path: str, steps: tuple[str | int, ...]
) -> None:
    assert parse_path(path, field="config.path").steps == steps


@pytest.mark.parametrize("path", ["", "a.", "a..b", "a[-1]", "a[x]", "a.[0]", "a]"])
def test_malformed_json_paths_are_refused_on_config_path(path: str) -> None:
    assert refusal("json_field_match", {"path": path, "value": 1}).field == "config.path"


def test_json_field_match_needs_a_path_and_a_json_value() -> None:
    assert refusal("json_field_match", {"value": 1}).field == "config.path"
    assert refusal("json_field_match", {"path": "a", "value": math.nan}).field == "config.value"
    assert refusal("json_field_match", {"path": "a", "value": {1, 2}}).field == "config.value"


def test_json_equality_keeps_booleans_apart_from_numbers() -> None:
    assert not json_equal(True, 1)
    assert not json_equal([0], [False])
    assert json_equal(1, 1.0)
    assert json_equal({"a": [1, None]}, {"a": [1.0, None]})
    assert not json_equal({"a": 1}, {"a": 1, "b": 2})
    assert not json_equal("5", 5)


# --- fuzzy_similarity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "output", "expected", "score"),
    [
        ({}, "kitten", "kitten", 1.0),
        ({}, "", "", 1.0),
        ({}, "abc", "", 0.0),
        ({}, "abcd", "abce", 0.75),
        ({}, "PARIS", "paris", 0.0),
        ({"case_sensitive": False}, "PARIS", "paris", 1.0),
        ({}, "café", "cafe\u0301", 1.0),
    ],
)
def test_fuzzy_similarity_is_the_character_level_similarity(
    config: dict[str, Any], output: str, expected: str, score: float
) -> None:
    assert score_of("fuzzy_similarity", config, output, expected) == pytest.approx(score)


def test_fuzzy_similarity_does_not_reward_a_subset_of_words() -> None:
    assert score_of("fuzzy_similarity", {}, "It is not Paris", "Paris") < PASS_THRESHOLD


def test_fuzzy_similarity_without_expected_output_is_unscored() -> None:
    verdict = run_managed("fuzzy_similarity", {}, case("Paris", None))
    assert verdict.unscored_reason == "no_expected_output"


@given(st.text())
def test_fuzzy_similarity_of_identical_texts_is_one(text: str) -> None:
    assert score_of("fuzzy_similarity", {}, text, text) == 1.0


@given(st.text(), st.text())
def test_fuzzy_similarity_lies_in_zero_to_one_and_is_symmetric(a: str, b: str) -> None:
    forward = score_of("fuzzy_similarity", {}, a, b)
    assert 0.0 <= forward <= 1.0
    assert forward == score_of("fuzzy_similarity", {}, b, a)


# --- every managed check ----------------------------------------------------------------------

CONFIGS: dict[str, dict[str, Any]] = {
    "exact_match": {},
    "contains": {},
    "regex": {"pattern": "x"},
    "json_field_match": {"path": "a"},
    "fuzzy_similarity": {},
}


@pytest.mark.parametrize("check", MANAGED_CHECKS)
def test_no_output_is_unscored_for_every_check(check: str) -> None:
    verdict = run_managed(check, CONFIGS[check], case(None, "x"))
    assert verdict.score is None and verdict.unscored_reason == "no_output"


@pytest.mark.parametrize("check", MANAGED_CHECKS)
def test_every_check_refuses_unknown_options_naming_them(check: str) -> None:
    assert refusal(check, {**CONFIGS[check], "threshold": 0.5}).field == "config.threshold"


@pytest.mark.parametrize("check", MANAGED_CHECKS)
def test_normalizing_a_config_is_idempotent(check: str) -> None:
    normalized = validate_managed_config(check, CONFIGS[check])
    assert validate_managed_config(check, normalized) == normalized


def test_normalized_configs_spell_out_the_defaults() -> None:
    assert validate_managed_config("exact_match", {}) == {"case_sensitive": True, "strip": True}
    assert validate_managed_config("contains", {"value": None}) == {"case_sensitive": True}
    assert validate_managed_config("json_field_match", {"path": "a", "value": None}) == {
        "path": "a",
        "value": None,
    }


def test_an_unknown_check_is_refused_on_check() -> None:
    assert refusal("semantic_vibes", {}).field == "check"


@pytest.mark.parametrize("value", [1, "true", None])
def test_boolean_options_must_be_booleans(value: object) -> None:
    assert refusal("exact_match", {"case_sensitive": value}).field == "config.case_sensitive"


def test_a_config_must_be_an_object() -> None:
    assert refusal("regex", ["pattern"]).field == "config"  # type: ignore[arg-type]


def test_running_a_check_with_an_invalid_config_raises() -> None:
    with pytest.raises(Unprocessable):
        run_managed("regex", {"pattern": "("}, case("x"))


# --- templates and prompts --------------------------------------------------------------------


def test_render_prompt_replaces_the_three_placeholders() -> None:
    template = "Q: {input}\nA: {output}\nRef: {expected_output}\nA again: {output}"
    rendered = render_prompt(template, JudgeCase("2+2?", "4", "four"))
    assert rendered == "Q: 2+2?\nA: 4\nRef: four\nA again: 4"


def test_render_prompt_leaves_json_braces_and_unknown_placeholders_alone() -> None:
    template = 'Reply as {"score": 0.5, "reason": "..."} about {output}; {name} {{output}} {0}'
    rendered = render_prompt(template, case("OUT"))
    assert rendered == 'Reply as {"score": 0.5, "reason": "..."} about OUT; {name} {OUT} {0}'


def test_render_prompt_never_substitutes_into_substituted_text() -> None:
    rendered = render_prompt("{output} / {expected_output}", case("{expected_output}", "secret"))
    assert rendered == "{expected_output} / secret"


def test_render_prompt_renders_missing_values_as_empty_text() -> None:
    assert render_prompt("[{input}] [{expected_output}]", JudgeCase(None, "x", None)) == "[] []"


_PLAIN = st.text(alphabet=st.characters(blacklist_characters="}"))
_PLACEHOLDER = st.sampled_from(["input", "output", "expected_output"])


@given(st.lists(st.tuples(_PLAIN, _PLACEHOLDER)), _PLAIN, st.text(), st.text(), st.text())
def test_render_prompt_never_alters_text_outside_placeholders(
    pieces: list[tuple[str, str]], tail: str, input: str, output: str, expected: str
) -> None:
    values = {"input": input, "output": output, "expected_output": expected}
    template = "".join(f"{text}{{{name}}}" for text, name in pieces) + tail
    wanted = "".join(text + values[name] for text, name in pieces) + tail
    assert render_prompt(template, JudgeCase(input, output, expected)) == wanted


_JSON = st.recursive(
    st.none() | st.integers() | st.text(), lambda c: st.dictionaries(st.text(), c), max_leaves=8
)


@given(_JSON)
def test_render_prompt_keeps_any_json_example_verbatim(example: object) -> None:
    text = json.dumps(example)
    assume(not re.search(r"\{(input|output|expected_output)\}", text))
    assert render_prompt(f"{text} {{output}}", case("o")) == f"{text} o"


def test_a_template_must_show_the_judge_the_output() -> None:
    validate_template("Is {output} correct?")
    with pytest.raises(Unprocessable) as caught:
        validate_template("Is {input} answered well? Compare to {expected_output}.")
    assert caught.value.field == "template"
    with pytest.raises(Unprocessable):
        validate_template("{ output }")


def test_a_case_without_output_cannot_be_judged() -> None:
    verdict = cannot_judge("{output}", case(None))
    assert verdict is not None and verdict.unscored_reason == "no_output"


def test_a_template_using_the_reference_cannot_judge_an_item_without_one() -> None:
    verdict = cannot_judge("{output} vs {expected_output}", case("x", None))
    assert verdict is not None and verdict.unscored_reason == "no_expected_output"
    assert cannot_judge("{output}", case("x", None)) is None
    assert cannot_judge("{input}: {output}", case("x", None, input=None)) is None


# --- reading score replies --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "score", "reason"),
    [
        ('{"score": 0.8, "reason": "mostly right"}', 0.8, "mostly right"),
        ('{"score": 1, "reason": "right"}', 1.0, "right"),
        ('{"score": 0}', 0.0, "the judge gave no reason"),
        ('```json\n{"score": 0.25, "reason": "weak"}\n```', 0.25, "weak"),
        ('Let me think. {draft} The verdict: {"score": 0.6, "reason": "ok"} Done.', 0.6, "ok"),
        ('{"Score": "4/5", "Reason": "good"}', 0.8, "good"),
        ('{"score": "0.5", "reason": "half"}', 0.5, "half"),
        ('{"notes": "a"} {"score": 0.9, "reason": "second object"}', 0.9, "second object"),
        ("Score: 0.8\nReason: concise and correct", 0.8, "concise and correct"),
        ("Reason: spans\ntwo lines\nScore: 0.3", 0.3, "spans\ntwo lines"),
        ("The answer is right.\n\nScore: 4/5", 0.8, "The answer is right."),
        ("**Score:** 0.7", 0.7, "the judge gave no reason"),
        ("Final score: 8/10 (minor typo)", 0.8, "the judge gave no reason"),
        ("score = 1.", 1.0, "the judge gave no reason"),
        ("Score: 0.9\nScore: 0.9", 0.9, "the judge gave no reason"),
        ("Score: 0.4\r\nReason: two\r\nlines\r\n", 0.4, "two\nlines"),
    ],
)
def test_score_replies_are_read_from_json_or_score_lines(
    reply: str, score: float, reason: str
) -> None:
    verdict = parse_score_reply(reply)
    assert verdict.score == pytest.approx(score) and verdict.reason == reason
    assert verdict.raw_reply == reply and verdict.unscored_reason is None


@pytest.mark.parametrize(
    "reply",
    [
        "banana",
        "",
        '{"score": 1.5, "reason": "too good"}',
        '{"score": -0.1}',
        "Score: 1.5",
        "Score: 8",
        '{"score": NaN}',
        '{"score": Infinity}',
        '{"score": true, "reason": "yes"}',
        '{"score": null}',
        '{"score": [0.5]}',
        '{"score": "high"}',
        "Score: 1 out of 10",
        "Score: 0/0",
        "Score: 3/0",
        "Score: 0.8\nScore: 0.4",
        '{"reason": "no score here"}',
        '{"result": {"score": 0.8}}',
        '{"score": 0.8',
        '{"score": 2} Score: 0.5',
        "My score: high. " * 3,
    ],
)
def test_unreadable_score_replies_are_unscored_not_zero(reply: str) -> None:
    verdict = parse_score_reply(reply)
    assert verdict.score is None
    assert verdict.unscored_reason == "grade_parse_failure"
    assert verdict.raw_reply == reply


@given(st.floats(min_value=0, max_value=1), st.text())
def test_any_json_score_in_range_reads_back_exactly(score: float, reason: str) -> None:
    verdict = parse_score_reply(json.dumps({"score": score, "reason": reason}))
    assert verdict.score == score
    assert verdict.reason == (reason.strip() or "the judge gave no reason")


@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not 0 <= x <= 1))
def test_any_json_score_out_of_range_is_unscored(score: float) -> None:
    assert parse_score_reply(json.dumps({"score": score})).unscored_reason == "grade_parse_failure"


@given(st.text())
def test_reading_a_reply_never_raises(reply: str) -> None:
    parse_score_reply(reply)
    parse_label_reply(reply, ["yes", "no"])


# --- reading label replies --------------------------------------------------------------------

LABELS = ["relevant", "partially relevant", "Irrelevant", "wrong"]


@pytest.mark.parametrize(
    ("reply", "label", "reason"),
    [
        ('{"label": "relevant", "reason": "on topic"}', "relevant", "on topic"),
        ('```json\n{"label": "IRRELEVANT", "reason": "off"}\n```', "Irrelevant", "off"),
        ("Label: Partially Relevant\nReason: half of it", "partially relevant", "half of it"),
        ("relevant", "relevant", "the judge gave no reason"),
        ("**Irrelevant**.\nIt talks about cats.", "Irrelevant", "It talks about cats."),
        ('"relevant"', "relevant", "the judge gave no reason"),
        ("irrelevant\nReason: cats", "Irrelevant", "cats"),
        ("Label: Wrong\r\nReason: off\r\n", "wrong", "off"),
    ],
)
def test_label_replies_are_read_and_given_the_canonical_spelling(
    reply: str, label: str, reason: str
) -> None:
    verdict = parse_label_reply(reply, LABELS)
    assert (verdict.label, verdict.reason, verdict.score) == (label, reason, None)
    assert verdict.unscored_reason is None and verdict.raw_reply == reply


@pytest.mark.parametrize(
    "reply",
    [
        "maybe",
        "",
        "The answer is not relevant.",
        '{"label": "maybe", "reason": "unsure"}',
        '{"label": 1}',
        "Label: maybe",
        "I would say\nrelevant",
    ],
)
def test_a_reply_without_one_of_the_labels_is_unscored(reply: str) -> None:
    verdict = parse_label_reply(reply, LABELS)
    assert verdict.label is None and verdict.unscored_reason == "label_parse_failure"
    assert verdict.raw_reply == reply


def test_labels_must_be_distinct_ignoring_case_and_non_empty() -> None:
    assert validate_labels(["yes", "no"]) == ["yes", "no"]
    for labels, field in [
        ([], "labels"),
        ("yes", "labels"),
        (["yes", ""], "labels[1]"),
        (["yes", " no"], "labels[1]"),
        (["Yes", "no", "YES"], "labels[2]"),
    ]:
        with pytest.raises(Unprocessable) as caught:
            validate_labels(labels)
        assert caught.value.field == field


# --- composites -------------------------------------------------------------------------------


def test_a_composite_is_the_weighted_mean_of_its_components() -> None:
    verdict = composite(
        [(2.0, "accuracy", Verdict.scored(1.0, "")), (1.0, "tone", Verdict.scored(0.4, ""))]
    )
    assert verdict.score == pytest.approx(0.8)
    assert "'accuracy' 1.00 × 2" in verdict.reason


def test_a_composite_with_an_unscored_component_is_unscored_and_names_it() -> None:
    verdict = composite(
        [
            (1.0, "accuracy", Verdict.scored(1.0, "")),
            (1.0, "safety", Verdict.unscored("judge_call_failed", "provider down")),
            (1.0, "topic", Verdict.labelled("relevant", "")),
        ]
    )
    assert verdict.score is None and verdict.unscored_reason == "component_unscored"
    assert "'safety' (judge_call_failed)" in verdict.reason
    assert "'topic' (gives a label, not a score)" in verdict.reason


def test_a_composite_of_nothing_is_unscored() -> None:
    assert composite([]).unscored_reason == "no_components"


@pytest.mark.parametrize("weights", [[1.0, 0.0], [1.0, -1.0], [math.nan], [math.inf], [True]])
def test_composite_weights_must_be_finite_and_positive(weights: list[float]) -> None:
    with pytest.raises(Unprocessable) as caught:
        validate_composite_weights(weights)
    assert caught.value.field == f"components[{len(weights) - 1}].weight"


@given(
    st.lists(
        st.tuples(st.floats(min_value=0.01, max_value=100), st.floats(min_value=0, max_value=1)),
        min_size=1,
    ),
    st.floats(min_value=0.01, max_value=100),
)
def test_a_composite_lies_between_its_components_and_ignores_weight_scale(
    parts: list[tuple[float, float]], factor: float
) -> None:
    verdicts = [(w, f"j{i}", Verdict.scored(s, "")) for i, (w, s) in enumerate(parts)]
    score = composite(verdicts).score
    scaled = composite([(w * factor, n, v) for w, n, v in verdicts]).score
    assert score is not None and scaled is not None
    scores = [s for _, s in parts]
    assert min(scores) - 1e-9 <= score <= max(scores) + 1e-9
    assert scaled == pytest.approx(score, abs=1e-9)


# --- passing ----------------------------------------------------------------------------------


def test_a_case_passes_from_seven_tenths() -> None:
    assert PASS_THRESHOLD == 0.7
    assert passes(0.7) and passes(1.0)
    assert not passes(0.69) and not passes(0.0) and not passes(math.nan)


def test_a_composite_that_is_seven_tenths_up_to_rounding_is_seven_tenths_and_passes() -> None:
    assert math.fsum([0.7, 0.7, 0.7]) / 3 < 0.7  # what plain float arithmetic gives
    parts = [(1.0, f"j{i}", Verdict.scored(0.7, "")) for i in range(3)]
    assert composite(parts).score == 0.7


def test_a_score_a_rounding_error_below_seven_tenths_still_passes() -> None:
    assert passes(0.6999999999999998)
    assert not passes(0.699999)
