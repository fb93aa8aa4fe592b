"""Managed checks: built-in, offline comparisons of an output with the expected output or config.

An output that is not JSON fails `json_field_match` with 0.0, because producing JSON was the
agent's job; an expected output that cannot serve as a reference leaves the case unscored.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

import regex
from rapidfuzz import fuzz

from neens.domain.json_path import extract, parse_path
from neens.domain.judges.verdict import JudgeCase, Verdict, json_text
from neens.domain.storable import safe_label
from neens.errors import Unprocessable

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
    - json_field_match: `path` (required; see `neens.domain.json_path`) and `value` (any JSON value,
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
        parse_path(path, field="config.path")
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
        regex.compile(pattern)
    except regex.error as exc:
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


PATTERN_TIME_LIMIT_S: Final = 0.1
"""How long a `regex` judge's pattern may take on one output. Python's syntax lets a pattern
backtrack exponentially (`(a|aa)+$` over a long run of a's takes hours), and an output is text an
agent, or whoever sends traces, chose: past this the case is left unscored (`pattern_timeout`)
instead of the server's thread being held. Real patterns take microseconds."""


def _regex(options: Mapping[str, Any], output: str) -> Verdict:
    pattern = options["pattern"]
    try:
        match = regex.search(pattern, output, timeout=PATTERN_TIME_LIMIT_S)
    except TimeoutError:
        return Verdict.unscored(
            "pattern_timeout",
            f"the pattern {safe_label(pattern)} took longer than {PATTERN_TIME_LIMIT_S:g} s on "
            f"this output of {len(output):,} characters: it backtracks too much; rewrite it "
            f"without nested or overlapping repetition such as (a|aa)+",
        )
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


def _json_field_match(options: Mapping[str, Any], output: str, expected: str | None) -> Verdict:
    path = options["path"]
    steps = parse_path(path, field="config.path")
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
        present, wanted = extract(reference, steps)
        if not present:
            return Verdict.unscored(
                "invalid_expected_output", f"the expected output has no {path} to compare with"
            )
        source = "the expected output's"
    document, problem = _load_json(output)
    if problem is not None:
        return Verdict.scored(0.0, f"the output is not JSON ({problem})")
    present, found = extract(document, steps)
    if not present:
        return Verdict.scored(0.0, f"the output has no {path}")
    if json_equal(found, wanted):
        return Verdict.scored(1.0, f"{path} is {json_text(found)}, as in {source}")
    return Verdict.scored(
        0.0, f"{path} is {json_text(found)}, where {source} is {json_text(wanted)}"
    )
