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


def composite(parts: Sequence[tuple[float, str, Verdict]]) -> Verdict:
    """The weighted mean of the components' scores; each part is (weight, judge name, verdict).

    If any component is unscored (or is a classifier label, which has no score), the composite
    is unscored "component_unscored", naming them: averaging over the components that did score
    would silently drop, say, a failed safety judge and inflate the result. No parts at all is
    unscored "no_components". Weights are validated (Unprocessable) as in
    `validate_composite_weights`. The mean uses `math.fsum` and is rounded to 12 decimals, so
    three components at 0.7 combine to 0.7 rather than 0.6999999999999998 (which would be shown,
    stored and compared as noise), and clamped to [0, 1].
    """
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
    mean = math.fsum(w * s for w, s in zip(weights, scores, strict=True)) / math.fsum(weights)
    score = min(1.0, max(0.0, round(mean, 12)))
    terms = ", ".join(
        f"{safe_label(name)} {s:.2f} × {w:g}"
        for w, (_, name, _), s in zip(weights, parts, scores, strict=True)
    )
    return Verdict.scored(score, f"weighted mean {score:.2f} of {terms}")
