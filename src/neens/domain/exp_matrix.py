"""A matrix's cells, each compared with the baseline cell, and the family's Holm adjustment.

How it decides (docs/exp.md has the user's version):

- **Each cell against the baseline** is `exp compare`'s paired comparison (`exp_compare.compare`
  with the baseline as A): B − A over the cases both graded, its 95% paired bootstrap interval,
  and the exact McNemar p on the cases that flipped.
- **The family** is every cell compared in this report that has at least one paired case. A cell
  with none has no p-value; it is shown "no data" and left out of the family rather than counted
  in it (statsmodels counts a NaN in m, which would penalise the others for a test never made).
- **Holm** (1979): `statsmodels.stats.multitest.multipletests(p, alpha=0.05, method="holm")`,
  the step-down p_adj(i) = max_{j≤i} min(1, (m − j + 1)·p(j)) over the sorted p-values. It
  bounds the chance of any false "better" or "worse" in the family at 5%, under any dependence
  between the cells (they share the baseline, so they are dependent).
- **Verdict.** better when the Holm-adjusted p is below 0.05 and more cases flipped to pass than
  to fail (and B − A is above 0); worse the other way round; else inconclusive. The adjusted
  test decides, not the unadjusted interval: with several cells, one interval clearing 0 by
  chance is to be expected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from neens.domain.exp_compare import Comparison, Verdict

ALPHA: Final = 0.05
HOLM_METHOD: Final = "Holm over the cells, exact McNemar p (statsmodels multipletests)"


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given:
    `multipletests(p, alpha=0.05, method="holm")[1]`. Every p must be a number (leave out
    the cells without one first)."""
    if not p_values:
        return []
    if any(math.isnan(p) or not 0 <= p <= 1 for p in p_values):
        raise ValueError(f"p-values must be numbers from 0 to 1, got {list(p_values)}")
    from statsmodels.stats.multitest import multipletests

    adjusted = multipletests(list(p_values), alpha=ALPHA, method="holm")[1]
    return [float(p) for p in adjusted]


@dataclass(frozen=True, slots=True)
class CellResult:
    """One non-baseline cell against the baseline."""

    cell: str
    comparison: Comparison
    p_holm: float | None
    """None when the cell has no paired case (no p-value, outside the family)."""
    verdict: Verdict
    reason: str


def cell_verdict(comparison: Comparison, p_holm: float | None) -> tuple[Verdict, str]:
    """The verdict of one cell from its Holm-adjusted p and the direction of its flips."""
    c = comparison
    if p_holm is None or c.diff is None:
        return "inconclusive", "no paired cases"
    if p_holm >= ALPHA:
        return "inconclusive", f"Holm-adjusted p={p_holm:.3f} is not below {ALPHA:g}"
    if c.n01 > c.n10 and c.diff > 0:
        return "better", f"Holm-adjusted p={p_holm:.3f}, {c.n01} improved, {c.n10} regressed"
    if c.n10 > c.n01 and c.diff < 0:
        return "worse", f"Holm-adjusted p={p_holm:.3f}, {c.n10} regressed, {c.n01} improved"
    return "inconclusive", "the flipped cases and B − A point different ways"


def judge_cells(comparisons: Sequence[tuple[str, Comparison]]) -> list[CellResult]:
    """Each cell's verdict, Holm-adjusted over the cells that have a p-value."""
    tested = [(i, c.mcnemar_p) for i, (_, c) in enumerate(comparisons) if c.mcnemar_p is not None]
    adjusted = dict(
        zip([i for i, _ in tested], holm([p for _, p in tested if p is not None]), strict=True)
    )
    results = []
    for index, (cell, comparison) in enumerate(comparisons):
        p_holm = adjusted.get(index)
        verdict, reason = cell_verdict(comparison, p_holm)
        results.append(CellResult(cell, comparison, p_holm, verdict, reason))
    return results
