"""Composite judges: a weighted mean of other judges' scores."""

from __future__ import annotations

import math
from collections.abc import Sequence

from neens.domain.judges.verdict import Verdict
from neens.domain.storable import safe_label
from neens.errors import Unprocessable


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


def weighted_mean(weights: Sequence[float], values: Sequence[float]) -> float:
    """Σ wᵢ·xᵢ / Σ wᵢ for finite weights above 0 and values in [0, 1], without overflow.

    Every weight is first scaled by the same power of two, 2⁻ᵉ with e the exponent of the
    largest weight (`math.frexp`), so the largest becomes a number in [0.5, 1): the sums are then
    at most `len(weights)` and cannot overflow, however large the weights (two weights of 1e308
    overflowed `math.fsum` before), and the denominator is at least 0.5, however small they are
    (5e-324 alone becomes 0.5). Scaling by a power of two is exact (`math.ldexp`), so for
    ordinary weights the result is bit for bit that of the textbook formula: one rounding per
    product, `math.fsum`'s correctly rounded sums, one division. A weight more than 2¹⁰⁷⁴ times
    smaller than the largest scales to 0 (or loses bits as a subnormal): its share of the mean
    is below the precision of a float anyway.
    """
    _, exponent = math.frexp(max(weights))
    scaled = [math.ldexp(weight, -exponent) for weight in weights]
    total = math.fsum(w * x for w, x in zip(scaled, values, strict=True))
    return total / math.fsum(scaled)


def composite(parts: Sequence[tuple[float, str, Verdict]]) -> Verdict:
    """The weighted mean of the components' scores; each part is (weight, judge name, verdict).

    If any component is unscored (or is a classifier label, which has no score), the composite
    is unscored "component_unscored", naming them: averaging over the components that did score
    would silently drop, say, a failed safety judge and inflate the result. No parts at all is
    unscored "no_components". Weights are validated (Unprocessable) as in
    `validate_composite_weights`. The mean (`weighted_mean`, safe for weights of any size) is
    rounded to 12 decimals, so three components at 0.7 combine to 0.7 rather than
    0.6999999999999998 (which would be shown, stored and compared as noise), and clamped to
    [0, 1]."""
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
    score = min(1.0, max(0.0, round(weighted_mean(weights, scores), 12)))
    terms = ", ".join(
        f"{safe_label(name)} {s:.2f} × {w:g}"
        for w, (_, name, _), s in zip(weights, parts, scores, strict=True)
    )
    return Verdict.scored(score, f"weighted mean {score:.2f} of {terms}")
