"""The cost–quality frontier drawn as SVG on the server, with Matplotlib.

Why Matplotlib, rendered server-side: the page works with no JavaScript and no network (the SVG
is part of the HTML), every browser and screen reader gets the same picture with real text in
it, and the chart is a pure function of `domain.decision_frontier.Frontier`, so it can be tested
as a string. An interactive chart library would ship megabytes of JavaScript for six points.

What it draws, and what it never draws:
- each plotted arm at (cost per case, rate) with its 95% Wilson interval as a vertical bar and
  its label; arms on the frontier filled and joined by a line, excluded arms hollow and marked
  "(not pass^k)" or similar, the recommended arm ringed;
- the bar as a dashed horizontal line;
- never an unpriced arm or an arm with no data: the page lists those beside the chart, so
  nothing is placed at 0 USD or 0% that was not measured there.

Labels and the title are people's text: they are drawn as written (`parse_math=False`, so `$`
is a dollar sign, never Matplotlib's mathtext, which could fail the chart), with the characters
XML 1.0 does not allow replaced by U+FFFD so the SVG stays a well-formed document (`_drawable`).
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Final

from neens.domain.decision_frontier import Frontier, FrontierPoint

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["frontier_svg"]

_EXCLUDED_NOTE: Final = {
    "not_pass_k": "not pass^k",
    "failed": "failed",
    "not_terminal": "still running",
}
_FRONTIER: Final = "#1f6f43"
_OTHER: Final = "#4a5560"
_EXCLUDED: Final = "#9aa3ab"
_HIGHLIGHT: Final = "#b35900"
_LINE_BREAKS: Final = re.compile("[\t\n\r]")
_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""What XML 1.0's `Char` production leaves out (a control character, a lone surrogate, U+FFFE,
U+FFFF): any of them in the SVG makes it a document no parser reads."""


def _drawable(text: str) -> str:
    """`text` as the chart can carry it: characters XML does not allow become U+FFFD, and tabs
    and line breaks (allowed, but drawn oddly) a space."""
    return _NOT_XML.sub("\ufffd", _LINE_BREAKS.sub(" ", text))


def frontier_svg(frontier: Frontier, *, bar: float, title: str) -> str:
    """The chart as an `<svg>` element (no XML prolog), sized by its viewBox so it scales to
    the page; `title` becomes its accessible name."""
    from matplotlib import rc_context  # imported on first use: about half a second
    from matplotlib.figure import Figure

    title = _drawable(title)
    bar = bar + 0.0  # a −0 bar is labelled 0%, not −0%
    fig = Figure(figsize=(7.2, 4.0), dpi=100)
    ax = fig.add_subplot()
    points = frontier.points
    for point in points:
        _draw_point(ax, point)
    on = [p for p in points if p.on_frontier]
    if len(on) > 1:
        ax.plot(
            [p.cost_per_case_usd for p in on],
            [p.rate * 100 for p in on],
            color=_FRONTIER,
            linewidth=1.2,
            zorder=1,
        )
    ax.axhline(bar * 100, color=_HIGHLIGHT, linestyle="--", linewidth=1)
    ax.annotate(
        f"bar {bar * 100:g}%",
        xy=(1.0, bar * 100),
        xycoords=("axes fraction", "data"),
        xytext=(-4, 3),
        textcoords="offset points",
        ha="right",
        fontsize=8,
        color=_HIGHLIGHT,
        parse_math=False,
    )
    ax.set_xlabel("cost per case (USD)")
    ax.set_ylabel("pass rate (%), 95% interval")
    low = min([p.wilson_low * 100 for p in points] + [bar * 100], default=0.0)
    ax.set_ylim(max(0.0, low - 5), 102)
    if points:
        costs = [p.cost_per_case_usd for p in points]
        span = (max(costs) - min(costs)) or max(costs) or 1.0
        ax.set_xlim(max(0.0, min(costs) - span * 0.15), max(costs) + span * 0.25)
    else:
        ax.text(0.5, 0.5, "no priced arm to place", ha="center", va="center",
                transform=ax.transAxes, color=_OTHER, parse_math=False)  # fmt: skip
    ax.grid(True, linewidth=0.4, alpha=0.5)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()

    out = io.StringIO()
    # Text stays text (readable, selectable, small), and ids are the same for the same chart.
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "neens-frontier"}):
        fig.savefig(out, format="svg", metadata={"Date": None, "Title": title})
    svg = out.getvalue()
    return svg[svg.index("<svg") :]


def _draw_point(ax: Axes, point: FrontierPoint) -> None:
    x, y = point.cost_per_case_usd, point.rate * 100
    colour = _EXCLUDED if point.excluded else _FRONTIER if point.on_frontier else _OTHER
    ax.errorbar(
        [x],
        [y],
        yerr=[[y - point.wilson_low * 100], [point.wilson_high * 100 - y]],
        fmt="o",
        color=colour,
        markerfacecolor="white" if point.excluded else colour,
        markersize=7,
        capsize=3,
        linewidth=1,
        zorder=3,
    )
    if point.highlighted:
        ax.plot([x], [y], "o", markersize=15, markerfacecolor="none",
                markeredgecolor=_HIGHLIGHT, markeredgewidth=2, zorder=4)  # fmt: skip
    note = f" ({_EXCLUDED_NOTE[point.excluded]})" if point.excluded else ""
    ax.annotate(
        f"{_drawable(point.label)}{note}",
        xy=(x, y),
        xytext=(7, 5),
        textcoords="offset points",
        fontsize=8,
        color=colour if not point.highlighted else _HIGHLIGHT,
        fontweight="bold" if point.highlighted else "normal",
        parse_math=False,
    )
