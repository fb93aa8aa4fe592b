"""E-detectors for sequential change detection (Shin, Ramdas & Rinaldo 2024).

The observations are X_t ∈ [0, 1]. Before the change ("still improving") their conditional
mean is at least m₀: E[X_t | past] ≥ m₀. The one-step e-value

    L_t(λ) = 1 + λ(m₀ − X_t),   λ ∈ [0, 1/(1 − m₀)]

is then non-negative with E[L_t | past] ≤ 1, and grows when X_t falls below m₀. Two detectors
accumulate it, both from M₀ = 0:

    Shiryaev–Roberts (SR)   M_t = L_t · (M_{t−1} + 1)
    CUSUM                   M_t = L_t · max(M_{t−1}, 1)

An alarm at the first t with M_t ≥ 1/δ has, under any pre-change distribution of this class and
without assuming independence, an average run length to a false alarm of at least 1/δ
(Shin, Ramdas & Rinaldo, NEJSDS 2024, doi:10.51387/23-NEJSDS51; the same recursions as the
R package `edetect`). That is an average run length, not a probability of a false alarm.

For a drop of unknown size the detector averages SR detectors over a grid of λ: a convex
mixture of e-detectors is an e-detector, so the same threshold keeps the same guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Recursion = Literal["sr", "cusum"]


def e_value(x: float, m0: float, lam: float) -> float:
    """The one-step e-value L(λ) = 1 + λ(m₀ − x) for an observation x ∈ [0, 1]."""
    if not 0 <= x <= 1:
        raise ValueError(f"an observation must be in [0, 1], got {x}")
    if not 0 < m0 < 1:
        raise ValueError(f"m0 must be between 0 and 1 exclusive, got {m0}")
    if not 0 <= lam <= 1 / (1 - m0):
        raise ValueError(f"lambda must be in [0, 1/(1 − m0)] = [0, {1 / (1 - m0)}], got {lam}")
    return 1 + lam * (m0 - x)


def step(previous: float, e: float, recursion: Recursion) -> float:
    """One step of the SR (`M·` = e·(M + 1)) or CUSUM (e·max(M, 1)) recursion."""
    if recursion == "sr":
        return e * (previous + 1)
    return e * max(previous, 1.0)


@dataclass(slots=True)
class MixtureDetector:
    """An average of SR (or CUSUM) e-detectors, one per λ of `lambdas`, started at M₀ = 0."""

    m0: float
    lambdas: tuple[float, ...]
    recursion: Recursion = "sr"
    values: list[float] = field(default_factory=list)
    """Each λ's current M_t."""

    def __post_init__(self) -> None:
        if not self.lambdas:
            raise ValueError("a mixture needs at least one lambda")
        for lam in self.lambdas:
            e_value(self.m0, self.m0, lam)  # checks m0 and lam
        self.values = [0.0] * len(self.lambdas)

    @property
    def value(self) -> float:
        """The mixture's M_t: the mean over λ (0 before any observation)."""
        return math.fsum(self.values) / len(self.values)

    def update(self, x: float) -> float:
        """Take observation X_t and return the new M_t."""
        self.values = [
            step(m, e_value(x, self.m0, lam), self.recursion)
            for m, lam in zip(self.values, self.lambdas, strict=True)
        ]
        return self.value


def changepoint(xs: Sequence[float], m0: float, lambdas: Sequence[float]) -> int:
    """The most likely start of the change, as an index into `xs`.

    The k maximising the mixture e-process started at k, mean over λ of ∏_{i=k}^{t} L_i(λ):
    the SR statistic is the sum of these terms over k, and CUSUM's maximum for one λ. Ties go
    to the earliest k.
    """
    if not xs:
        raise ValueError("a changepoint needs at least one observation")
    products = [1.0] * len(lambdas)
    best_k, best = len(xs) - 1, -1.0
    for k in range(len(xs) - 1, -1, -1):
        products = [p * e_value(xs[k], m0, lam) for p, lam in zip(products, lambdas, strict=True)]
        value = math.fsum(products) / len(products)
        if value >= best:
            best_k, best = k, value
    return best_k
