"""One JSON path syntax for `answerPath` and `json_field_match`'s `path`, and every path either
field accepted before the two were one still read the same way."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neens.domain.json_path import extract, parse_path
from neens.errors import Unprocessable

FIELDS = ["answerPath", "config.path"]


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("order.status", ("order", "status")),
        ("choices[0].message.content", ("choices", 0, "message", "content")),
        ("[2].name", (2, "name")),
        ("matrix[1][0]", ("matrix", 1, 0)),
        ("first name", ("first name",)),
        ("ключ.é", ("ключ", "é")),
        ("items.0", ("items", "0")),
        ('say"hi"', ('say"hi"',)),
        ('["a.b"]', ("a.b",)),
        ('data["x[1]"].y', ("data", "x[1]", "y")),
        ('["say \\"hi\\""]', ('say "hi"',)),
        ('["\\u00e9"]', ("é",)),
        ('[""]', ("",)),
        (".order.status", ("order", "status")),
        ("items[0]id", ("items", 0, "id")),
        ('["a"]b', ("a", "b")),
    ],
)
def test_one_syntax_for_both_fields(field: str, path: str, steps: tuple[str | int, ...]) -> None:
    assert parse_path(path, field=field).steps == steps


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize(
    "path",
    ["", ".", "a.", "a..b", "..a", "a[-1]", "a[x]", "a[]", "a.[0]", ".[0]", "a]", "a[0", '["a"',
     '["a\\x"]', '["a\nb"]', "[" + "9" * 5000 + "]"],
)  # fmt: skip
def test_a_malformed_path_is_refused_naming_the_field(field: str, path: str) -> None:
    with pytest.raises(Unprocessable) as refused:
        parse_path(path, field=field)
    assert refused.value.field == field
    assert refused.value.message.startswith(field)


def test_the_refusal_says_where_the_path_goes_wrong() -> None:
    with pytest.raises(Unprocessable, match=r"problem at character 3$"):
        parse_path("a..b", field="answerPath")


@given(st.text())
def test_any_text_is_a_path_or_a_refusal(text: str) -> None:
    try:
        path = parse_path(text, field="answerPath")
    except Unprocessable:
        return
    assert path.steps and path.text == text


def test_extract_follows_keys_and_positions_and_says_when_nothing_is_there() -> None:
    document = {"data": {"answers": [{"text": "hi"}, None]}, "a.b": False}
    assert extract(document, parse_path("data.answers[0].text", field="f")) == (True, "hi")
    assert extract(document, parse_path("data.answers[1]", field="f")) == (True, None)
    assert extract(document, parse_path('["a.b"]', field="f")) == (True, False)
    for missing in ["data.answers[2]", "data.answers.0", "data[0]", "nope", "data.answers[0].x"]:
        assert extract(document, parse_path(missing, field="f")) == (False, None)


# --- the two parsers this one replaced, as oracles -------------------------------------------

_OLD_ANSWER_PATH = re.compile(r'\.?([^.\[\]"]+)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')
_OLD_JUDGE_PATH = re.compile(r"\[(\d+)\]|([^.\[\]]+)|(\.)")


def old_answer_path(text: str) -> tuple[str | int, ...] | None:
    steps: list[Any] = []
    position = 0
    while position < len(text):
        match = _OLD_ANSWER_PATH.match(text, position)
        if match is None or match.end() == position:
            return None
        name, index, quoted = match.groups()
        try:
            steps.append(
                name if name is not None else int(index) if index else json.loads(f'"{quoted}"')
            )
        except ValueError:
            return None
        position = match.end()
    return tuple(steps) or None


def old_judge_path(text: str) -> tuple[str | int, ...] | None:
    steps: list[str | int] = []
    position = 0
    expect_key = False
    while position < len(text):
        token = _OLD_JUDGE_PATH.match(text, position)
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
    if position != len(text) or not steps or expect_key:
        return None
    return tuple(steps)


PATH_TEXT = st.text(alphabet='ab.[]0"\\ é-', max_size=12)


def reads_as_before(text: str) -> None:
    for old in (old_answer_path(text), old_judge_path(text)):
        if old is not None:
            assert parse_path(text, field="answerPath").steps == old


@given(PATH_TEXT)
def test_every_path_either_field_accepted_before_reads_the_same(text: str) -> None:
    reads_as_before(text)


@pytest.mark.parametrize(
    "text", ["a", ".a", "a[0]b", '["a.b"]', "a.b[0]", '["x"]["y"]z', 'a"b', "[1].a", "a\\"]
)
def test_the_oracles_read_the_spellings_each_field_had(text: str) -> None:
    assert old_answer_path(text) is not None or old_judge_path(text) is not None
    reads_as_before(text)
