"""One experiment's numbers, from its case-trials: what `neens exp export` states as the
experiment's decision, and what the bundle's verify.py recomputes.

- Counts as `exp status` has them: case-trials saved, graded (with a grader verdict), passed,
  errored (infra or agent) and ungraded; the pass rate is passed over graded case-trials.
- Cost: the sum and the mean over the priced case-trials only (`math.fsum`); None when none
  is priced (unpriced is never free), and a sum too large to represent is None too, flagged
  as `cost_overflow`, never infinity.
- The strict case rate: the cases that passed every graded trial, over the cases with at
  least one graded trial, with its 95% Wilson interval over cases (never over pooled trials).
- pass^k for every k from 1 to the experiment's trials: the unbiased C(c,k)/C(n,k) averaged
  over the cases with at least k graded trials (`neens.domain.pass_k`), never (c/n)^k; the
  cases with fewer are counted as left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from neens.domain.pass_k import PassHatK, pass_hat_k
from neens.domain.stats import Interval, exact_sum, mean, wilson_interval


@dataclass(frozen=True, slots=True)
class TrialFact:
    case_id: str
    passed: bool | None
    """None: no grader verdict (ungraded), or the case-trial errored."""
    error_kind: str | None
    cost_usd: float | None


@dataclass(frozen=True, slots=True)
class ExperimentSummary:
    trials: int
    done: int
    graded: int
    passed: int
    infra_errors: int
    agent_errors: int
    ungraded: int
    priced: int
    cost_usd: float | None
    """None when none is priced, or when the sum is too large to represent (`cost_overflow`)."""
    cost_per_trial_usd: float | None
    graded_cases: int
    cases_passed_every_trial: int
    strict_interval: Interval | None
    pass_hat_k: tuple[PassHatK, ...]

    @property
    def cost_overflow(self) -> bool:
        """Some case-trials are priced, and their summed cost is too large to represent."""
        return self.priced > 0 and self.cost_usd is None

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.graded if self.graded else None

    @property
    def strict_rate(self) -> float | None:
        return self.cases_passed_every_trial / self.graded_cases if self.graded_cases else None


def summarize(trials: int, facts: Sequence[TrialFact]) -> ExperimentSummary:
    """The experiment's numbers (see the module docstring)."""
    per_case: dict[str, list[int]] = {}
    graded = passed = infra = agent = ungraded = 0
    costs: list[float] = []
    for fact in facts:
        if fact.error_kind == "infra":
            infra += 1
        elif fact.error_kind == "agent":
            agent += 1
        elif fact.passed is None:
            ungraded += 1
        if fact.cost_usd is not None and not math.isnan(fact.cost_usd):
            costs.append(fact.cost_usd)
        counts = per_case.setdefault(fact.case_id, [0, 0])
        if fact.passed is None:
            continue
        graded += 1
        passed += fact.passed
        counts[0] += fact.passed
        counts[1] += 1
    cases = [(hits, count) for hits, count in per_case.values() if count]
    strict = sum(hits == count for hits, count in cases)
    return ExperimentSummary(
        trials=trials,
        done=len(facts),
        graded=graded,
        passed=passed,
        infra_errors=infra,
        agent_errors=agent,
        ungraded=ungraded,
        priced=len(costs),
        cost_usd=exact_sum(costs) if costs else None,
        cost_per_trial_usd=mean(costs),
        graded_cases=len(cases),
        cases_passed_every_trial=strict,
        strict_interval=wilson_interval(strict, len(cases)),
        pass_hat_k=tuple(pass_hat_k(cases, k) for k in range(1, trials + 1)),
    )
