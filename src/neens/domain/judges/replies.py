"""Reading an LLM judge's reply back: a 0..1 score, or one of a classifier's labels.

Pure, so the reading is tested without a network; a reply that cannot be read is unscored.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from neens.domain.judges.verdict import Verdict, json_text
from neens.domain.storable import safe_label

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
    return f"the score is {json_text(value)}, not a number"


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
            return _label_failure(reply, f"{json_text(value)} is not one of: {allowed}")
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
