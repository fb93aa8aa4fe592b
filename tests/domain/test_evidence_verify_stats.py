"""The standard-library statistics of a bundle's verify.py against the libraries the server
uses: Wilson against statsmodels, McNemar against statsmodels, P(B>A) against SciPy's Beta,
the power ceiling against `neens.domain.paired`, and its bootstrap against the server's
within the tolerance it documents."""

from __future__ import annotations

import random

import pytest
from neens_eval import evidence_verify as v
from scipy.stats import beta
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from neens.domain.paired import mcnemar_ceiling, paired_bootstrap


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (0, 30), (3, 30), (29, 30), (500, 1000)])
def test_wilson_matches_statsmodels(k: int, n: int) -> None:
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    ours = v.wilson(k, n)
    assert ours is not None
    assert ours[0] == pytest.approx(0.0 if k == 0 else low, rel=1e-12, abs=1e-15)
    assert ours[1] == pytest.approx(1.0 if k == n else high, rel=1e-12)
    assert v.wilson(0, 0) is None


@pytest.mark.parametrize(("b", "c"), [(0, 0), (0, 5), (2, 9), (9, 2), (40, 31), (0, 6)])
def test_mcnemar_and_prob_b_beats_a_match_the_libraries(b: int, c: int) -> None:
    expected = mcnemar([[10, b], [c, 7]], exact=True).pvalue
    assert v.mcnemar_p(b, c) == pytest.approx(expected, rel=1e-12)
    assert v.prob_b_beats_a(b, c) == pytest.approx(beta.sf(0.5, 1 + c, 1 + b), rel=1e-10)


@pytest.mark.parametrize(("n", "q"), [(11, 0.5), (30, 0.2), (100, 0.05), (300, 0.01)])
def test_the_power_ceiling_matches_the_servers_enumeration(n: int, q: float) -> None:
    assert v.mcnemar_ceiling(n, q) == pytest.approx(mcnemar_ceiling(n, q), rel=1e-9, abs=1e-12)


def test_the_bootstrap_agrees_with_the_servers_within_the_documented_tolerance() -> None:
    rng = random.Random(7)
    for n in (5, 12, 40, 100):
        for _ in range(3):
            diffs = [rng.choice([-1.0, 0.0, 0.0, 1.0, 1 / 3]) for _ in range(n)]
            seed = rng.randrange(2**63)
            server = paired_bootstrap(diffs, seed=seed)
            assert server is not None
            low, high = v.percentile_bootstrap(diffs, seed, v.RESAMPLES)
            tolerance = max(0.0125, 1 / n + 0.005)
            assert abs(server.low - low) <= tolerance / 2, (n, server, low)
            assert abs(server.high - high) <= tolerance / 2, (n, server, high)
