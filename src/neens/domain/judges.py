"""Judges: what turns an agent's answer into a score, a label, or an honest "could not score".

Three kinds of judge share one result type, `Verdict`:

- managed checks (`run_managed`): built-in, offline comparisons of the output with the item's
  expected output or with a value from the check's config;
- LLM prompt judges: a template is rendered with the case (`render_prompt`), sent to a model by
  `neens.engine.llm_judge`, and the model's reply is read back here (`parse_score_reply`,
  `parse_label_reply`), so the reading is pure and tested without a network;
- composites (`composite`): a weighted mean of other judges' scores.

The rule every judge follows: when it cannot score, it says so (`Verdict.unscored` with a stable
reason code) instead of returning 0.0. A missing expected output, a reply the parser cannot read
or a provider outage says nothing about the agent, and a 0.0 would be averaged into its results
as if the agent had answered wrong. Unscored verdicts stay visible and countable instead.

An agent that answered but answered badly does get a low score: an output that is not JSON
fails `json_field_match` with 0.0, because producing JSON was the agent's job.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from rapidfuzz import fuzz

from neens.domain.conventions import safe_label
from neens.errors import Unprocessable

# ---------------------------------------------------------------------------------------------
# Cases and verdicts
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Managed checks
# ---------------------------------------------------------------------------------------------

ManagedCheck = Literal["exact_match", "contains", "regex", "json_field_match", "fuzzy_similarity"]
MANAGED_CHECKS: Final[tuple[str, ...]] = get_args(ManagedCheck)

_ALLOWED_KEYS: Final[Mapping[str, frozenset[str]]] = {
    "exact_match": frozenset({"case_sensitive", "strip"}),
    "contains": frozenset({"value", "case_sensitive"}),
    "regex": frozenset({"pattern"}),
    "json_field_match": frozenset({"path", "value"}),
    "fuzzy_similarity": frozenset({"case_sensitive"}),
}


def validate_managed_config(check: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The normalized config of a managed check, or Unprocessable naming the faulty field.

    Normalizing fills in defaults (`case_sensitive` and `strip` are True) so a stored config says
    what the check does without knowing the defaults; it is idempotent, so a stored config
    validates to itself. Unknown keys are refused rather than ignored: a misspelt
    `case_sensitve: false` would otherwise silently keep the check case-sensitive.

    - exact_match: `case_sensitive`, `strip` (bools).
    - contains: `value` (non-empty string; absent or null means "the expected output"),
      `case_sensitive`. An empty value is refused: it is contained in every output, so the check
      could never fail.
    - regex: `pattern` (required, non-empty, must compile). The regex is compiled here so a bad
      pattern is reported when the judge is configured, not on every case of a run.
    - json_field_match: `path` (required; see `parse_json_path`) and `value` (any JSON value,
      null included, so the key's presence is what counts; absent means "the same path in the
      expected output").
    - fuzzy_similarity: `case_sensitive`.
    """
    if check not in _ALLOWED_KEYS:
        raise Unprocessable(
            f"unknown check {safe_label(check)}; expected one of {', '.join(MANAGED_CHECKS)}",
            field="check",
        )
    if not isinstance(config, Mapping):
        raise Unprocessable("config must be an object", field="config")
    allowed = _ALLOWED_KEYS[check]
    for key in config:
        if key not in allowed:
            options = ", ".join(sorted(allowed))
            raise Unprocessable(
                f"check {check!r} has no option {safe_label(key)}; its options are {options}",
                field=f"config.{key}",
            )

    normalized: dict[str, Any] = {}
    if "case_sensitive" in allowed:
        normalized["case_sensitive"] = _bool_option(config, "case_sensitive")
    if "strip" in allowed:
        normalized["strip"] = _bool_option(config, "strip")
    if check == "contains" and config.get("value") is not None:
        value = config["value"]
        if not isinstance(value, str) or value == "":
            raise Unprocessable(
                "value must be a non-empty string (an empty value is contained in every output)",
                field="config.value",
            )
        normalized["value"] = value
    if check == "regex":
        normalized["pattern"] = _pattern_option(config)
    if check == "json_field_match":
        path = config.get("path")
        if not isinstance(path, str):
            raise Unprocessable(
                'path is required: a string such as "order.status" or "items[0].id"',
                field="config.path",
            )
        parse_json_path(path)
        normalized["path"] = path
        if "value" in config:
            try:
                json.dumps(config["value"], allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise Unprocessable(
                    f"value must be a JSON value: {exc}", field="config.value"
                ) from exc
            normalized["value"] = config["value"]
    return normalized


def _bool_option(config: Mapping[str, Any], key: str) -> bool:
    value = config.get(key, True)
    if not isinstance(value, bool):
        raise Unprocessable(f"{key} must be true or false", field=f"config.{key}")
    return value


def _pattern_option(config: Mapping[str, Any]) -> str:
    pattern = config.get("pattern")
    if not isinstance(pattern, str) or pattern == "":
        raise Unprocessable(
            "pattern is required: a non-empty regular expression (Python syntax)",
            field="config.pattern",
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise Unprocessable(f"pattern does not compile: {exc}", field="config.pattern") from exc
    return pattern


def run_managed(check: str, config: Mapping[str, Any], case: JudgeCase) -> Verdict:
    """Score `case` with a managed check; the config is validated first.

    Validating again here costs little and means an unvalidated config cannot score silently
    with a wrong reading (it raises Unprocessable instead). A None output is unscored
    "no_output" for every check, decided before anything else: the agent failed to answer, which
    its run records separately, and a 0.0 here would count that failure twice.
    """
    options = validate_managed_config(check, config)
    if case.output is None:
        return Verdict.unscored("no_output", "the agent produced no output to judge")
    output = case.output
    if check == "exact_match":
        return _exact_match(options, output, case.expected_output)
    if check == "contains":
        return _contains(options, output, case.expected_output)
    if check == "regex":
        return _regex(options, output)
    if check == "json_field_match":
        return _json_field_match(options, output, case.expected_output)
    return _fuzzy_similarity(options, output, case.expected_output)


def _no_expected_output(check: str) -> Verdict:
    return Verdict.unscored(
        "no_expected_output",
        f"{check} compares with the expected output, and this item has none",
    )


def _comparable(text: str, *, case_sensitive: bool, strip: bool = False) -> str:
    """NFC-normalized (and optionally stripped and case-folded) text for text comparisons.

    NFC first: "é" typed as one code point and as "e" plus a combining accent are the same text
    to every reader, and an agent should not fail a check on how its tokenizer composed a
    character. `casefold` (not `lower`) so that "STRASSE" matches "straße" case-insensitively.
    """
    text = unicodedata.normalize("NFC", text)
    if strip:
        text = text.strip()
    if not case_sensitive:
        text = text.casefold()
    return text


def _exact_match(options: Mapping[str, Any], output: str, expected: str | None) -> Verdict:
    if expected is None:
        return _no_expected_output("exact_match")
    a = _comparable(output, case_sensitive=options["case_sensitive"], strip=options["strip"])
    b = _comparable(expected, case_sensitive=options["case_sensitive"], strip=options["strip"])
    if a == b:
        return Verdict.scored(1.0, "the output equals the expected output")
    at = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return Verdict.scored(
        0.0,
        f"the output differs from the expected output at character {at}: "
        f"output has {safe_label(a[at:], 40)}, expected {safe_label(b[at:], 40)}",
    )


def _contains(options: Mapping[str, Any], output: str, expected: str | None) -> Verdict:
    if "value" in options:
        needle, source = options["value"], "the configured value"
    elif expected is None:
        return _no_expected_output("contains")
    elif expected == "":
        return Verdict.unscored(
            "invalid_expected_output",
            "the expected output is empty, and an empty text is contained in every output",
        )
    else:
        needle, source = expected, "the expected output"
    sensitive = options["case_sensitive"]
    if _comparable(needle, case_sensitive=sensitive) in _comparable(
        output, case_sensitive=sensitive
    ):
        return Verdict.scored(1.0, f"the output contains {source} {safe_label(needle)}")
    return Verdict.scored(0.0, f"the output does not contain {source} {safe_label(needle)}")


def _regex(options: Mapping[str, Any], output: str) -> Verdict:
    pattern = options["pattern"]
    match = re.search(pattern, output)
    if match is None:
        return Verdict.scored(0.0, f"the output does not match {safe_label(pattern)}")
    return Verdict.scored(
        1.0, f"the output matches {safe_label(pattern)} at {match.start()}: {safe_label(match[0])}"
    )


def _fuzzy_similarity(options: Mapping[str, Any], output: str, expected: str | None) -> Verdict:
    """`rapidfuzz.fuzz.ratio` / 100: normalized Indel similarity over characters.

    `ratio` rather than `token_set_ratio`: the latter scores 1.0 whenever one text's words are a
    subset of the other's, so "Paris" would fully match "It is not Paris", inflating scores.
    `ratio` is symmetric, 1.0 only for equal texts (after NFC and optional case folding), and
    two empty texts are equal.
    """
    if expected is None:
        return _no_expected_output("fuzzy_similarity")
    sensitive = options["case_sensitive"]
    a = _comparable(output, case_sensitive=sensitive)
    b = _comparable(expected, case_sensitive=sensitive)
    score = min(1.0, max(0.0, fuzz.ratio(a, b) / 100.0))
    return Verdict.scored(score, f"the output is {score:.0%} similar to the expected output")


# --- JSON paths --------------------------------------------------------------------------------

JsonPath = tuple[str | int, ...]

_PATH_TOKEN: Final = re.compile(r"\[(\d+)\]|([^.\[\]]+)|(\.)")


def parse_json_path(path: str) -> JsonPath:
    """Steps of a JSON path such as "order.status", "items[0].id" or "[2].name".

    Keys are separated by dots and taken literally (spaces and non-ASCII included); array
    positions are written only in brackets, so "items.0" looks up the key "0" and never guesses
    that it meant an index. Negative indexes, empty keys ("a..b") and stray brackets are
    refused with Unprocessable on "config.path".
    """
    steps: list[str | int] = []
    position = 0
    expect_key = False  # just after a dot, a key must follow
    while position < len(path):
        token = _PATH_TOKEN.match(path, position)
        if token is None:
            break
        index, key, dot = token.groups()
        if dot is not None:
            if not steps or expect_key:
                break
            expect_key = True
        elif key is not None:
            if steps and not expect_key:
                break
            steps.append(key)
            expect_key = False
        else:
            if expect_key:
                break
            steps.append(int(index))
        position = token.end()
    if position != len(path) or not steps or expect_key:
        raise Unprocessable(
            f"path {safe_label(path)} is not a JSON path such as order.status or items[0].id "
            "(keys separated by dots, array positions as [n])",
            field="config.path",
        )
    return tuple(steps)


_MISSING: Final = object()


def _lookup(document: Any, steps: JsonPath) -> Any:
    current = document
    for step in steps:
        if isinstance(step, int):
            if not isinstance(current, list) or step >= len(current):
                return _MISSING
            current = current[step]
        else:
            if not isinstance(current, dict) or step not in current:
                return _MISSING
            current = current[step]
    return current


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _load_json(text: str) -> tuple[Any, str | None]:
    """The parsed document and None, or None and why `text` is not JSON.

    Strict JSON: NaN and Infinity (which Python's parser accepts by default) are refused, and
    text fenced in ``` is not JSON either.
    """
    try:
        return json.loads(text, parse_constant=_refuse_constant), None
    except RecursionError:
        return None, "it is nested too deeply to read"
    except ValueError as exc:
        return None, str(exc)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality, stricter than Python's `==` where JSON is.

    Python says `True == 1` and `1 == 1.0`; JSON has booleans distinct from numbers, so true
    never equals 1 here, while numbers compare by value (1 equals 1.0, as JSON has one number
    type). Strings never equal numbers ("5" is not 5). Objects compare by keys and values,
    arrays by position.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return a is None and b is None
    return type(a) is type(b) and bool(a == b)


def _json_text(value: Any) -> str:
    return safe_label(json.dumps(value, ensure_ascii=False), 60)


def _json_field_match(options: Mapping[str, Any], output: str, expected: str | None) -> Verdict:
    path = options["path"]
    steps = parse_json_path(path)
    if "value" in options:
        wanted, source = options["value"], "the configured value"
    elif expected is None:
        return _no_expected_output("json_field_match")
    else:
        reference, problem = _load_json(expected)
        if problem is not None:
            return Verdict.unscored(
                "invalid_expected_output",
                f"the expected output is not JSON ({problem}), so {path} cannot be compared",
            )
        wanted = _lookup(reference, steps)
        if wanted is _MISSING:
            return Verdict.unscored(
                "invalid_expected_output", f"the expected output has no {path} to compare with"
            )
        source = "the expected output's"
    document, problem = _load_json(output)
    if problem is not None:
        return Verdict.scored(0.0, f"the output is not JSON ({problem})")
    found = _lookup(document, steps)
    if found is _MISSING:
        return Verdict.scored(0.0, f"the output has no {path}")
    if json_equal(found, wanted):
        return Verdict.scored(1.0, f"{path} is {_json_text(found)}, as in {source}")
    return Verdict.scored(
        0.0, f"{path} is {_json_text(found)}, where {source} is {_json_text(wanted)}"
    )


# ---------------------------------------------------------------------------------------------
# LLM prompt judges
# ---------------------------------------------------------------------------------------------

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


# --- reading replies ---------------------------------------------------------------------------

_NUMBER: Final = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_SCORE_VALUE: Final = re.compile(
    rf"\s*[*_`]*\s*(?P<num>{_NUMBER})(?:\s*/\s*(?P<den>{_NUMBER}))?\s*[*_`]*"
    # What may follow: nothing, sentence punctuation, or an aside in brackets or after a dash.
    # Anything else ("1 out of 10", "8 on a 10-point scale") is refused rather than misread.
    r"(?:[.,;]?\s*$|[.,;]\s+\S.*$|\s+[(\[—–-].*$)"
)
_KEY_LINE: Final = (
    r"^[ \t>#*_-]*(?:(?:final|overall|total)[ \t]+)?{key}[ \t*_]*[:=][ \t]*(?P<rest>.*?)[ \t]*$"
)
_SCORE_LINE: Final = re.compile(_KEY_LINE.format(key="score"), re.IGNORECASE | re.MULTILINE)
_REASON_LINE: Final = re.compile(_KEY_LINE.format(key="reason"), re.IGNORECASE | re.MULTILINE)
_LABEL_LINE: Final = re.compile(_KEY_LINE.format(key="label"), re.IGNORECASE | re.MULTILINE)
_NO_REASON: Final = "the judge gave no reason"


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object embedded in `text`, in order.

    Each "{" is tried as the start of an object, so prose, ```json fences and stray braces
    around the object do not matter; once an object is read, the scan continues after it, so
    an object nested inside another is not taken for a top-level one.
    """
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        position = text.find("{", end)
    return found


def _key(obj: Mapping[str, Any], name: str) -> str | None:
    """The key of `obj` equal to `name` ignoring case ("Score" is accepted for "score")."""
    return next((k for k in obj if k.casefold() == name), None)


def _reason_of(obj: Mapping[str, Any]) -> str:
    key = _key(obj, "reason")
    if key is None or obj[key] is None:
        return _NO_REASON
    value = obj[key]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text.strip() or _NO_REASON


def _score_from_text(text: str) -> float | str:
    """A score read from text ("0.8", "4/5", "**0.8**"), or why it cannot be one."""
    match = _SCORE_VALUE.fullmatch(text)
    if match is None:
        return f"{safe_label(text, 40)} is not a number from 0 to 1 or a fraction such as 4/5"
    value = float(match["num"])
    if match["den"] is not None:
        denominator = float(match["den"])
        if denominator <= 0:
            return f"{safe_label(text, 40)} divides by {match['den']}"
        value /= denominator
    return value


def _check_range(value: float, shown: str) -> float | str:
    # Compared before converting: float() of a 400-digit integer raises OverflowError.
    if isinstance(value, float) and not math.isfinite(value) or not 0 <= value <= 1:
        return f"the score {shown} is not between 0 and 1"
    return float(value)


def _score_from_json(value: Any) -> float | str:
    if isinstance(value, bool):
        return f"the score is the boolean {json.dumps(value)}, not a number"
    if isinstance(value, int | float):
        return _check_range(value, safe_label(value, 40))
    if isinstance(value, str):
        read = _score_from_text(value)
        return read if isinstance(read, str) else _check_range(read, safe_label(value, 40))
    return f"the score is {_json_text(value)}, not a number"


def _grade_failure(reply: str, why: str) -> Verdict:
    return Verdict.unscored(
        "grade_parse_failure",
        f"could not read a score from the judge's reply: {why}",
        raw_reply=reply,
    )


def parse_score_reply(reply: str) -> Verdict:
    """The score and reason in an LLM judge's reply, or unscored "grade_parse_failure".

    Read, in order of preference:

    1. The first top-level JSON object with a "score" key (any case), wherever it sits in the
       reply: bare, in a ```json fence, or among prose. `{"score": 0.8, "reason": "..."}`.
       The score may be a number, or a string holding a number or a fraction ("4/5").
    2. Otherwise `Score: 0.8` lines (also `**Score:** 4/5`, `score = 1`), with the reason from a
       `Reason:` line and the lines after it, or else from the rest of the reply. Several
       Score lines that disagree are refused: the parser will not pick one for the judge.

    Refused, keeping the raw reply on the verdict: no score at all, a score outside [0, 1]
    (never rescaled: 8 might mean 8/10 or 8/100), NaN or infinity, a boolean (true is not 1.0),
    a zero denominator, and a number followed by words ("1 out of 10" is not read as 1).
    Once a JSON object with a "score" key is found its value decides; a bad value there is not
    rescued from elsewhere in the reply. Windows line endings are read like "\n".
    """
    text = _unix_lines(reply)
    for obj in _json_objects(text):
        key = _key(obj, "score")
        if key is None:
            continue
        score = _score_from_json(obj[key])
        if isinstance(score, str):
            return _grade_failure(reply, score)
        return Verdict.scored(score, _reason_of(obj), raw_reply=reply)

    lines = list(_SCORE_LINE.finditer(text))
    if not lines:
        return _grade_failure(
            reply, 'expected a JSON object {"score": <0..1>, "reason": "..."} or a "Score:" line'
        )
    scores: set[float] = set()
    for line in lines:
        read = _score_from_text(line["rest"])
        score = read if isinstance(read, str) else _check_range(read, safe_label(line["rest"], 40))
        if isinstance(score, str):
            return _grade_failure(reply, score)
        scores.add(score)
    if len(scores) > 1:
        shown = ", ".join(f"{s:g}" for s in sorted(scores))
        return _grade_failure(reply, f"the reply gives several different scores ({shown})")
    return Verdict.scored(scores.pop(), _line_reason(text, _SCORE_LINE), raw_reply=reply)


def _unix_lines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _line_reason(reply: str, value_line: re.Pattern[str]) -> str:
    """The text after a `Reason:` line marker, or the reply without its value lines."""
    marker = _REASON_LINE.search(reply)
    if marker is not None:
        # The match ends where its line does, so the first piece is that line's empty remainder.
        following = reply[marker.end() :].splitlines()[1:]
        kept = [marker["rest"]]
        for line in following:
            if value_line.fullmatch(line):
                break
            kept.append(line)
        return "\n".join(kept).strip() or _NO_REASON
    rest = value_line.sub("", reply).strip()
    return rest or _NO_REASON


def _label_failure(reply: str, why: str) -> Verdict:
    return Verdict.unscored(
        "label_parse_failure",
        f"could not read a label from the judge's reply: {why}",
        raw_reply=reply,
    )


_LABEL_DECORATION: Final = re.compile(r"^[\s*_`\"']*(?P<bare>.*?)[\s*_`\"'.]*$", re.DOTALL)


def _canonical(text: str, labels: Sequence[str]) -> str | None:
    """The label `text` names, ignoring case, quotes, emphasis and a final period; or None."""
    bare = _LABEL_DECORATION.fullmatch(text)
    candidates = {text.strip().casefold(), (bare["bare"] if bare else text).casefold()}
    return next((label for label in labels if label.casefold() in candidates), None)


def parse_label_reply(reply: str, labels: Sequence[str]) -> Verdict:
    """The label and reason in a classifier judge's reply, or unscored "label_parse_failure".

    Read, in order of preference:

    1. The first top-level JSON object with a "label" key: `{"label": "relevant", "reason": ..}`.
    2. A `Label: relevant` line.
    3. The first non-empty line being a label on its own (`relevant`, `**Relevant**.`), with the
       lines after it as the reason.

    Windows line endings are read like "\n". Labels match ignoring case and surrounding quotes,
    markdown emphasis and a final period, and
    the verdict carries the canonical spelling from `labels`. A label is never searched for
    inside a sentence: "not relevant" contains "relevant". The verdict has no score.
    """
    allowed = ", ".join(labels)
    text = _unix_lines(reply)
    for obj in _json_objects(text):
        key = _key(obj, "label")
        if key is None:
            continue
        value = obj[key]
        label = _canonical(value, labels) if isinstance(value, str) else None
        if label is None:
            return _label_failure(reply, f"{_json_text(value)} is not one of: {allowed}")
        return Verdict.labelled(label, _reason_of(obj), raw_reply=reply)

    marker = _LABEL_LINE.search(text)
    if marker is not None:
        label = _canonical(marker["rest"], labels)
        if label is None:
            return _label_failure(reply, f"{safe_label(marker['rest'])} is not one of: {allowed}")
        return Verdict.labelled(label, _line_reason(text, _LABEL_LINE), raw_reply=reply)

    lines = text.strip().splitlines()
    if lines:
        label = _canonical(lines[0], labels)
        if label is not None:
            rest = "\n".join(lines[1:])
            reason_marker = _REASON_LINE.search(rest)
            reason = _line_reason(rest, _LABEL_LINE) if reason_marker else rest.strip()
            return Verdict.labelled(label, reason or _NO_REASON, raw_reply=reply)
    return _label_failure(
        reply, f'expected a JSON object {{"label": ..., "reason": ...}} with one of: {allowed}'
    )


# ---------------------------------------------------------------------------------------------
# Composites
# ---------------------------------------------------------------------------------------------


def validate_composite_weights(weights: Sequence[float]) -> list[float]:
    """The weights of a composite's components, or Unprocessable on "components[i].weight".

    Each weight must be a finite number above 0. A zero weight would keep a component that
    counts for nothing yet can still make the composite unscored; a negative one would reward
    failing it. Booleans are refused (true is not a weight).
    """
    checked: list[float] = []
    for index, weight in enumerate(weights):
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not math.isfinite(weight)
            or weight <= 0
        ):
            raise Unprocessable(
                f"weight must be a number above 0, not {safe_label(weight)}",
                field=f"components[{index}].weight",
            )
        checked.append(float(weight))
    return checked


def composite(parts: Sequence[tuple[float, str, Verdict]]) -> Verdict:
    """The weighted mean of the components' scores; each part is (weight, judge name, verdict).

    If any component is unscored (or is a classifier label, which has no score), the composite
    is unscored "component_unscored", naming them: averaging over the components that did score
    would silently drop, say, a failed safety judge and inflate the result. No parts at all is
    unscored "no_components". Weights are validated (Unprocessable) as in
    `validate_composite_weights`. The mean uses `math.fsum` and is rounded to 12 decimals, so
    three components at 0.7 combine to 0.7 rather than 0.6999999999999998 (which would be shown,
    stored and compared as noise), and clamped to [0, 1].
    """
    if not parts:
        return Verdict.unscored("no_components", "the composite has no components to combine")
    weights = validate_composite_weights([weight for weight, _, _ in parts])
    missing = [
        f"{safe_label(name)} ({verdict.unscored_reason or 'gives a label, not a score'})"
        for _, name, verdict in parts
        if verdict.score is None
    ]
    if missing:
        return Verdict.unscored(
            "component_unscored",
            f"{len(missing)} of {len(parts)} components did not score: {', '.join(missing)}",
        )
    scores = [verdict.score for _, _, verdict in parts if verdict.score is not None]
    mean = math.fsum(w * s for w, s in zip(weights, scores, strict=True)) / math.fsum(weights)
    score = min(1.0, max(0.0, round(mean, 12)))
    terms = ", ".join(
        f"{safe_label(name)} {s:.2f} × {w:g}"
        for w, (_, name, _), s in zip(weights, parts, scores, strict=True)
    )
    return Verdict.scored(score, f"weighted mean {score:.2f} of {terms}")
