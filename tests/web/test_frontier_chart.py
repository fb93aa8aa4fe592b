"""The frontier chart as SVG: what it places, what it never places, and that it is stable."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from xml.dom import minidom

from neens.domain.decision_frontier import Frontier, FrontierPoint
from neens.web.frontier_chart import frontier_svg

MINI = FrontierPoint("msa-1", "mini", 0.002, 14 / 15, 0.787, 0.982, 30, None, True, True)
OLD = FrontierPoint("msa-2", "previous-gen", 0.004, 0.8, 0.63, 0.9, 30, "not_pass_k", False, False)
LARGE = FrontierPoint("msa-0", "frontier-large", 0.02, 29 / 30, 0.83, 0.99, 30, None, True, False)


def texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)<", svg)


def test_each_plotted_arm_is_labelled_the_excluded_one_says_why_and_unpriced_ones_are_absent() -> (
    None
):
    frontier = Frontier((MINI, OLD, LARGE), ("msa-local",), ("msa-dead",), "msa-1")
    svg = frontier_svg(frontier, bar=0.9, title="Cost–quality frontier")
    ET.fromstring(svg)  # well-formed, embeddable in a page as it is
    labels = texts(svg)
    assert {"mini", "previous-gen (not pass^k)", "frontier-large", "bar 90%"} <= set(labels)
    assert "cost per case (USD)" in labels
    # The chart draws arms by label only: the unpriced and no-data arms (listed beside it by
    # the page) have no mark, and no internal id leaks into the picture.
    assert "msa-" not in svg
    assert "<title>Cost–quality frontier</title>" in svg


def test_the_same_frontier_draws_the_same_svg() -> None:
    frontier = Frontier((MINI, LARGE), (), (), None)
    assert frontier_svg(frontier, bar=0.9, title="t") == frontier_svg(frontier, bar=0.9, title="t")


def test_nothing_priced_says_so_instead_of_drawing_an_empty_axis() -> None:
    svg = frontier_svg(Frontier((), ("msa-a", "msa-b"), (), None), bar=0.9, title="t")
    assert "no priced arm to place" in texts(svg)


HOSTILE_LABELS = [
    "a $\\frac{",
    "$\\badcommand$",
    "ctl\x01\x0b\x1b\x0c\x00end",
    "tab\tnew\nline\rcr",
]
"""Arm labels as people may name them: mathtext that does not parse, control characters."""


def test_labels_and_title_of_any_text_make_a_well_formed_svg_with_dollars_as_written() -> None:
    points = tuple(
        FrontierPoint(f"msa-{n}", label, 0.002 * (n + 1), 0.9, 0.8, 0.95, 30, None, n == 0, n == 0)
        for n, label in enumerate(HOSTILE_LABELS)
    )
    svg = frontier_svg(
        Frontier(points, (), (), "msa-0"),
        bar=0.9,
        title="Cost–quality frontier: $x^2$ \x01\x1b\ud800\ufffe\uffff",
    )
    minidom.parseString(svg.encode("utf-8"))  # a well-formed XML document
    labels = texts(svg)
    assert "a $\\frac{" in labels
    assert "$\\badcommand$" in labels
    assert "ctl\ufffd\ufffd\ufffd\ufffd\ufffdend" in labels
    assert "tab new line cr" in labels
    assert "<title>Cost–quality frontier: $x^2$ \ufffd\ufffd\ufffd\ufffd\ufffd</title>" in svg


def test_a_bar_of_minus_zero_is_labelled_zero() -> None:
    svg = frontier_svg(Frontier((MINI,), (), (), None), bar=-0.0, title="t")
    assert "bar 0%" in texts(svg)
