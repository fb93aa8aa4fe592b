"""Numbers typed into the pages' forms and queries: ASCII digits only, and no −0 echoed back."""

from __future__ import annotations

import math

import pytest

from neens.errors import Unprocessable
from neens.web import new_run
from neens.web.form_numbers import plain_decimal, whole_number
from neens.web.routers.sweeps import _bar

NOT_WHOLE = ["1_0", "٣", "１", "³", "1.0", "1e1", "0x1", "", "-", "+", " 1", "1 ", "9" * 5000]
NOT_DECIMAL = [
    "0.1_0",
    "1_0",
    "٠.٥",
    "٣",
    "0.５",
    "1e-1",
    "1E1",
    "inf",
    "-Infinity",
    "nan",
    "0x1p-1",
    ".",
    "-.",
    "1.2.3",
    "0,5",
    "1" + "0" * 400,
]


@pytest.mark.parametrize("text", NOT_WHOLE)
def test_a_whole_number_is_ascii_digits_only(text: str) -> None:
    assert whole_number(text) is None


@pytest.mark.parametrize("text", NOT_DECIMAL)
def test_a_decimal_is_written_plainly_in_ascii_digits(text: str) -> None:
    assert plain_decimal(text) is None


def test_numbers_written_plainly_read_as_written() -> None:
    assert [whole_number(t) for t in ("0", "12", "-3", "+4", "007")] == [0, 12, -3, 4, 7]
    assert [plain_decimal(t) for t in ("0.75", ".5", "3.", "-2", "+0.25", "1")] == [
        0.75,
        0.5,
        3.0,
        -2.0,
        0.25,
        1.0,
    ]


def test_a_decimal_zero_is_never_negative() -> None:
    for text in ("-0", "-0.0", "-.0", "-0."):
        value = plain_decimal(text)
        assert value == 0 and math.copysign(1, value or 0.0) == 1, text


def _form(**gate: str) -> new_run.Values:
    return new_run.Values(dataset="ds_1", version_label="v2", judges=["jdg_1"], **gate)


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("max_regressions", "1_0"),
        ("max_regressions", "٣"),
        ("max_regressions", "1.5"),
        ("min_pass_rate", "0.7_5"),
        ("min_pass_rate", "٠.٥"),
        ("min_pass_rate", "nan"),
        ("max_avg_usd", "1_000"),
        ("max_avg_usd", "inf"),
        ("max_delta_pct", "１0"),
        ("max_delta_pct", "1e1"),
    ],
)
def test_the_new_run_form_refuses_a_number_not_in_ascii_digits_naming_its_field(
    field: str, text: str
) -> None:
    with pytest.raises(Unprocessable) as refused:
        new_run.request_body(_form(**{field: text}))
    assert refused.value.field is not None and refused.value.field.endswith(field)
    assert refused.value.field in refused.value.message and repr(text) in refused.value.message


def test_the_new_run_form_reads_ascii_numbers_as_before() -> None:
    gate = new_run.request_body(
        _form(max_regressions="2", min_pass_rate="0.75", max_avg_usd=".01", max_delta_pct="-5")
    )["gate"]
    assert gate == {
        "max_regressions": 2,
        "min_pass_rate": 0.75,
        "cost": {"max_avg_usd": 0.01, "max_delta_pct": -5.0},
    }


@pytest.mark.parametrize("text", ["0.1_0", "٠.٥", "0.５", "1e-1", "-0.5", "1.5", "nan"])
def test_a_bar_not_written_plainly_from_0_to_1_is_refused(text: str) -> None:
    with pytest.raises(Unprocessable) as refused:
        _bar(text)
    assert refused.value.field == "bar"


def test_a_bar_of_minus_zero_is_zero() -> None:
    for text in ("-0", "-0.0", " -0 "):
        value = _bar(text)
        assert value == 0 and math.copysign(1, value or 0.0) == 1, text
    assert (_bar(" 0.9 "), _bar(""), _bar(None)) == (0.9, None, None)
