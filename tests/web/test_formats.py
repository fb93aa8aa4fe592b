"""How pages write values: unknown is never 0, unpriced is never free."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import unquote, urljoin

import pytest

from neens.web import formats
from neens.web.render import segment


def test_rates_costs_and_durations_read_as_people_write_them() -> None:
    assert formats.percent(0.875) == "87.5%"
    assert formats.percent(0.0) == "0.0%"
    assert formats.percent(1) == "100.0%"
    assert formats.usd(0.00039) == "$0.000390"
    assert formats.usd(12345.678) == "$12,345.68"
    assert formats.usd(0.0) == "$0.00"
    assert formats.usd(-0.5) == "−$0.500000"
    assert formats.usd(0.0001, signed=True) == "+$0.000100"
    assert formats.usd(-2, signed=True) == "−$2.00"
    assert formats.ms(2250.4) == "2,250 ms"
    assert formats.ms(-14.0, signed=True) == "−14 ms"
    assert formats.decimal(0.29812, 3) == "0.298"
    assert formats.decimal(0.0, 1, signed=True) == "0.0"
    assert formats.count(1234567) == "1,234,567"
    assert formats.cost_rule(-50, "max_delta_pct") == "−50.0%"
    assert formats.cost_rule(0.004, "max_avg_usd") == "$0.004000"
    assert formats.cost_rule(0.01, "max_delta_usd") == "+$0.010000"


def test_no_data_is_never_zero_and_unpriced_is_never_free() -> None:
    assert formats.percent(None) == "no data"
    assert formats.usd(None) == "unpriced"
    assert formats.ms(None) == "no data"
    assert formats.decimal(None) == "no data"
    assert formats.count(None) == "no data"
    assert formats.cost_rule(None, "max_avg_usd") == "unpriced"


def test_times_are_shown_in_utc_and_values_as_json() -> None:
    paris = timezone(timedelta(hours=1))
    assert formats.when(datetime(2026, 11, 30, 9, 0, 2, tzinfo=paris)) == "2026-11-30 08:00:02 UTC"
    assert formats.when(None) == "—"
    assert formats.iso(datetime(2026, 11, 30, tzinfo=UTC)) == "2026-11-30T00:00:00+00:00"
    assert formats.wire(None) == "null"
    assert formats.wire(0.5) == "0.5"
    assert formats.wire('a"b') == '"a\\"b"'


def test_every_status_has_a_word_and_a_symbol_besides_its_colour() -> None:
    for word, tone in formats.TONES.items():
        assert formats.symbol(word) == formats.SYMBOLS[tone]
    assert formats.words("completed_with_regressions") == "completed with regressions"
    assert formats.tone("a status no one knows") == "quiet"


def test_a_negative_zero_or_a_difference_rounded_away_shows_no_minus() -> None:
    assert formats.wire(-0.0) == "0.0"
    assert formats.wire(0) == "0"
    assert formats.percent(-0.0) == "0.0%"
    assert formats.percent(-0.00001) == "0.0%"
    assert formats.percent_short(-0.0) == "0%"
    assert formats.pct_change(-0.0) == "0.0%"
    assert formats.pct_change(-0.01) == "0.0%"
    assert formats.pct_change(0.01) == "0.0%"
    assert formats.usd(-0.0, signed=True) == "$0.00"
    assert formats.usd(-1e-9, signed=True) == "$0.000000"
    assert formats.ms(-0.4, signed=True) == "0 ms"
    assert formats.decimal(-0.001, 2, signed=True) == "0.00"
    assert formats.cost_rule(-0.0, "max_delta_pct") == "0.0%"
    # What does not round to zero keeps its sign.
    assert formats.pct_change(-0.05) == "−0.1%"
    assert formats.percent(-0.001) == "-0.1%"


@pytest.mark.parametrize(
    ("value", "link"),
    [
        ("..", "%2E%2E"),  # a browser resolves `/ui/sessions/..` to `/ui/`
        (".", "%2E"),
        ("a/b", "a%2Fb"),
        ("v1.2", "v1.2"),
        ("...", "..."),  # only `.` and `..` are dot segments
    ],
)
def test_an_id_is_one_path_segment_of_a_link_whatever_it_holds(value: str, link: str) -> None:
    assert segment(value) == link
    assert urljoin("http://neens.test/ui/sessions/", link).startswith(
        "http://neens.test/ui/sessions/"
    )
    assert unquote(link) == value
