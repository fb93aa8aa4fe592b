"""docs/exp.md documents every flag of `exp plateau` and `exp metrics`, the plateau's chosen
statistic, m0, λ grid and threshold, and its example lines are what test_plateau reproduces."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.exp.test_docs import DOCS, _exp_commands


@pytest.mark.parametrize("command", ["plateau", "metrics", "run"])
def test_every_flag_is_documented(command: str) -> None:
    text = DOCS.read_text()
    parser = _exp_commands()[command]
    flags = [
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    missing = [flag for flag in flags if f"`{flag}" not in text]
    assert missing == [], f"neens exp {command}: {missing} not in docs/exp.md"


def test_the_plateau_choices_are_written_down() -> None:
    text = DOCS.read_text()
    section = text[
        text.index("### How the plateau is decided") : text.index("## `neens exp metrics`")
    ]
    for phrase in (
        "X_t = 1 when g_t > ε, else 0",
        "m₀ = ½",
        "λ ∈ {0.5, 1, 1.5}",
        "M_t(λ) = L_t(λ) · (M_{t−1}(λ) + 1)",
        "M_t ≥ 1/δ",
        "an average run length, not an error rate",
        "restarts from M₀ = 0",
    ):
        assert phrase in section, phrase


def test_how_exp_metrics_decides_covers_every_verdict() -> None:
    text = DOCS.read_text()
    section = text[text.index("### How `exp metrics` decides") : text.index("## Exit codes")]
    for phrase in ("`better`", "`worse`", "`no change`", "quantile_test", "ties dropped"):
        assert phrase in section, phrase


def test_the_documented_series_lines_are_what_exp_run_prints() -> None:
    text = DOCS.read_text()
    # test_plateau's expected lines, with its implicitly joined string literals joined.
    tests = re.sub(r'"\n\s*"', "", (Path(__file__).parent / "test_plateau.py").read_text())
    for line in (
        "continue, incumbent v4 (pass 55.0%); v4 gains +5.0pp over v2 on 20 shared cases; "
        "detector 4.81 of 20",
        "stop, ship v2 (pass 50.0%): detector 25.40 ≥ 20 at round 7 (the plateau began at round 3)",
        "continue, incumbent v9 (pass 65.0%); v9 beats the shipped v2 by +15.0pp, more than ε "
        "5.0pp: the series resumes and the detector restarts",
    ):
        assert f"series prompt-loop: {line}" in text, line
        assert f"series loop: {line}" in tests, line
