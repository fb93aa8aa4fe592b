"""`exp compare`: two runs paired by case, B − A, and what may be concluded from it.

How it decides (docs/exp.md has the user's version):

- **Pairing.** A case is paired when both runs graded it (at least one case-trial with a
  verdict on each side). Its outcome on a side is its pass rate over its graded case-trials;
  d = rate_B − rate_A. Errored and ungraded case-trials are left out and counted.
- **Interval.** B − A = mean(d) with the 95% percentile paired bootstrap
  (`neens.domain.paired.paired_bootstrap`), seeded from the paired outcomes unless a seed is
  given, so the same two runs always print the same interval. With --cluster, whole groups of
  related cases are resampled instead (`neens.domain.paired.cluster_bootstrap`). The interval
  describes how big the difference is; it does not decide alone: the percentile bootstrap can
  only resample what was seen, so with few changed cases it is too narrow (2 cases that both
  went fail → pass give [+100pp, +100pp]), and it under-covers at small discordant counts
  (b = 2, c = 9 of 50 gives about [+2pp, +26pp] where exact McNemar has p = 0.065).
- **Test.** The exact two-sided sign test on the nonzero d
  (`scipy.stats.binomtest(#d>0, #d≠0, 0.5)`, `neens.domain.stats.sign_test`), ties (d = 0)
  left out. With one graded trial per case on each side d ∈ {−1, 0, 1} and this is exactly
  the exact McNemar test (b = #d<0, c = #d>0). With several trials it is the test on the same
  d as the interval, so the two speak of the same quantity; McNemar on "passed every trial"
  would not: it ignores a case that went 0/3 → 2/3, and it can point the other way from
  mean(d) (a case 3/3 → 2/3 counts, cases 0/3 → 2/3 do not). Under "A and B are the same
  config" the two sides of a case are exchangeable, so a nonzero d is as likely up as down
  whatever the trials, as long as both sides graded as many (with unequal counts that is only
  approximate; the test then errs either way, which the rule below makes harmless: the test
  can only turn a verdict into inconclusive, never make one). With --cluster the test's units
  are the groups (the sign of each group's summed d), the units the interval resamples:
  related cases counted one by one would overstate the evidence in the test as they would in
  the interval.
- **Verdict.** better when the interval's lower end is above 0 AND the test rejects at 5%
  with more cases up than down; worse the mirror image; inconclusive otherwise (always when
  the interval includes 0, and when A and B agree on every case). When the two disagree (the
  interval excludes 0 but the test does not reject, or points the other way; or the test
  rejects while the interval includes 0) the verdict is inconclusive and `disagreement` says
  so: the "borderline" line. When B ran only A's failing cases (`exp run --failing A`), it is
  inconclusive whatever the evidence: cases picked for failing once tend to pass the next
  time by chance (regression to the mean).
- **McNemar.** The exact test on the paired binary outcomes (a case passes on a side when every
  graded case-trial passed: with one trial, simply passed) is reported, as the spec asks; it is
  the sign test with one trial, and descriptive with several.
- **Gate.** "Ship it" only when the verdict is better and nothing holds it: regression to the
  mean, a partial run, a grader that changed version or graded one side only, or no paired
  case. Running A and B one after the other is a warning, not a hold.
- **Margin** (non-inferiority, --margin M): "Ship it" when the lower ends of BOTH the score
  interval and the bootstrap interval are above −M and nothing else holds; the sign test does
  not take part (it tests d = 0, which is not the question: requiring it to reject would ask B
  to be better, which a margin is there not to ask, and holding when it rejects against B would
  refuse a loss the margin allows). The bootstrap alone cannot carry it: it only resamples what
  it saw, so 2 cases where A and B agree give [0, 0], above any margin. The score interval is
  Tango's (1998) for the paired difference of proportions (`neens.domain.paired.tango_interval`,
  why Tango and not Newcombe's method 10 is there): its lower end above −M is Tango's one-sided
  score test of B − A ≤ −M at 2.5%, and it is wide when the cases are few, whether or not any
  changed (2 agreeing cases: about −66pp). Exact enumeration over every outcome of 10, 20 and
  30 cases with a true B − A of exactly −M puts its chance of declaring non-inferiority at
  about 2.7% at most, slightly above the nominal 2.5% (it is an approximate, not an exact,
  test); requiring the bootstrap as well can only lower that. Requiring the bootstrap keeps the
  spec's wording true: the interval shown is above −M.
  With one graded trial per case the score interval's counts are b (pass → fail) and c
  (fail → pass). With several trials they are the sums of the negative and of the positive
  parts of the per-case d = rate_B − rate_A (a case 1/3 → 2/3 adds 1/3 to c), the same d as the
  interval's: a d in [−1, 1] with those parts varies at most as much as a binary one, so the
  interval stays wide enough (by enumeration with 2 trials a side, 10 and 20 cases: at most
  about 3% against 2.5%). "Passed every trial" would not do: a case 2/3 → 0/3 would not count
  as a loss. With --cluster the score interval still counts cases as independent, which
  related cases are not; the cluster bootstrap carries the grouping, and both must clear.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Final, Literal

from neens.domain.paired import (
    ALPHA,
    POWER_TARGET,
    PpiEstimate,
    cluster_bootstrap,
    mcnemar_ceiling,
    mcnemar_mde,
    paired_bootstrap,
    ppi_mean,
    prob_b_beats_a,
    tango_interval,
)
from neens.domain.stats import Interval, fewest_changed_to_reject, mcnemar_exact, sign_test

Verdict = Literal["better", "worse", "inconclusive"]
BAYES_BELOW: Final = 100
"""P(B>A) is reported below this many paired cases, where intervals are least trustworthy."""
FEW_GROUPS: Final = 10
"""Below this many groups a cluster bootstrap is not to be trusted (Cameron & Miller 2015)."""


@dataclass(frozen=True, slots=True)
class TrialOutcome:
    case_id: str
    passed: bool | None
    """None: no grader verdict (ungraded), or the case-trial errored."""
    error_kind: str | None = None
    """"infra" or "agent" for an errored case-trial."""
    seq_passed: bool | None = None
    """With --seq: whether it passed within its attempts (None when ungraded or errored)."""


@dataclass(frozen=True, slots=True)
class Side:
    """One run, as the comparison needs it."""

    id: str
    name: str
    trials: int
    outcomes: Sequence[TrialOutcome]
    graders: Mapping[str, str]
    """Each grader's name and version."""
    started_at: datetime
    ended_at: datetime | None
    """When its last case-trial was saved; None before any."""
    planned: int
    finished: bool
    failing_of: str | None = None


@dataclass(frozen=True, slots=True)
class SideSummary:
    id: str
    name: str
    trials: int
    graded: int
    passed: int
    infra_errors: int
    agent_errors: int
    ungraded: int
    done: int
    planned: int
    finished: bool

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.graded if self.graded else None


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One paired case: passes and graded case-trials on each side."""

    case_id: str
    a_passes: int
    a_graded: int
    b_passes: int
    b_graded: int

    @property
    def a_rate(self) -> float:
        return self.a_passes / self.a_graded

    @property
    def b_rate(self) -> float:
        return self.b_passes / self.b_graded

    @property
    def delta(self) -> float:
        return self.b_rate - self.a_rate

    @property
    def a_pass(self) -> bool:
        return self.a_passes == self.a_graded

    @property
    def b_pass(self) -> bool:
        return self.b_passes == self.b_graded


@dataclass(frozen=True, slots=True)
class Power:
    """The exact McNemar power at this n and the observed share of flipped cases."""

    n: int
    discordance: float
    ceiling: float
    mde: float | None
    """None when the ceiling is below the 80% target. Never below the A/A flip rate when
    there is one: a difference smaller than the churn of one config against itself is not
    one to act on."""
    raw_mde: float | None = None
    """The exact MDE before the A/A floor."""


@dataclass(frozen=True, slots=True)
class Matrix:
    """Paired cases by passes out of k: `counts[i][j]` cases passed i times in A, j in B."""

    k_a: int
    k_b: int
    counts: list[list[int]]
    left_out: int
    """Paired cases without all k case-trials graded on both sides."""


@dataclass(frozen=True, slots=True)
class KindRow:
    """The paired cases of one kind: their mean pass rate on each side."""

    kind: str
    cases: int
    a_rate: float
    b_rate: float


@dataclass(frozen=True, slots=True)
class Kinds:
    """What case kinds show: each kind's pass rates, the "bad" cases (those showing the bug
    being fixed) that B still fails, and the "guard" and "control" cases (which must keep
    passing) that passed in A and fail in B."""

    rows: list[KindRow]
    not_fixed: list[str]
    broken_guards: list[str]
    broken_controls: list[str]


@dataclass(frozen=True, slots=True)
class AaFloor:
    """The A/A flip rate (`exp aa`: one config run twice) that floors the reported MDE."""

    first: str
    second: str
    flipped: int
    paired: int

    @property
    def flip_rate(self) -> float:
        return self.flipped / self.paired if self.paired else 0.0


@dataclass(frozen=True, slots=True)
class Clusters:
    """How --cluster grouped the paired cases."""

    field: str
    groups: int
    ungrouped: int
    """Paired cases without the field: each is a group of its own."""


@dataclass(frozen=True, slots=True)
class PairedTest:
    """The exact two-sided sign test on the nonzero per-case (or, with --cluster, per-group)
    differences: `scipy.stats.binomtest(up, up + down, 0.5)`; p = 1 when nothing changed."""

    units: Literal["cases", "groups"]
    up: int
    """Cases (groups) with B − A above 0."""
    down: int
    """Cases (groups) with B − A below 0."""
    unchanged: int
    """Cases (groups) with B − A = 0, left out of the test."""
    p: float
    same_as_mcnemar: bool
    """One graded trial per case on each side and no clusters: the exact McNemar test."""

    @property
    def changed(self) -> int:
        return self.up + self.down

    @property
    def rejects(self) -> bool:
        return self.p < ALPHA

    def on(self) -> str:
        """ "2 changed cases" """
        unit = self.units if self.changed != 1 else self.units[:-1]
        return f"{self.changed} changed {unit}"


@dataclass(frozen=True, slots=True)
class ScoreEvidence:
    """Tango's score interval for B − A (`tango_interval`) and the counts it was built from."""

    interval: Interval
    down: float
    """b: cases pass → fail; with several trials, the sum of the negative parts of d."""
    up: float
    """c: cases fail → pass; with several trials, the sum of the positive parts of d."""
    n: int


@dataclass(frozen=True, slots=True)
class Comparison:
    a: SideSummary
    b: SideSummary
    cases: list[CaseResult]
    diff: float | None
    interval: Interval | None
    seed: int
    n11: int
    n10: int
    n01: int
    n00: int
    mcnemar_p: float | None
    interval_verdict: Verdict
    verdict: Verdict
    verdict_reason: str
    disagreement: str | None
    prob_b_beats_a: float | None
    power: Power | None
    regressed: list[CaseResult]
    improved: list[CaseResult]
    gained: list[str] | None
    lost: list[str] | None
    matrix: Matrix | None
    margin: float | None
    holds: list[str]
    warnings: list[str]
    only_a: int
    only_b: int
    ungraded_a: int
    ungraded_b: int
    uneven_errors: bool
    ran_one_after_the_other: bool
    regression_to_the_mean: bool
    grader_changes: list[str] = field(default_factory=list)
    cluster: Clusters | None = None
    aa: AaFloor | None = None
    kinds: Kinds | None = None
    seq_attempts: int | None = None
    """Set when the outcomes are Seq@K (--verdict seq)."""
    test: PairedTest | None = None
    """The exact sign test that decides with the interval; None without paired cases."""
    score: ScoreEvidence | None = None
    """Tango's score interval the margin rests on; None without paired cases."""
    margin_held_by: list[str] | None = None
    """With --margin: the intervals whose lower end is not above −M ("score", "bootstrap");
    empty when both clear it. None without --margin."""

    @property
    def ship(self) -> bool:
        return not self.holds

    @property
    def borderline(self) -> bool:
        """The interval and the test disagree (`disagreement` says how)."""
        return self.disagreement is not None


def _tally(side: Side) -> tuple[SideSummary, dict[str, tuple[int, int]]]:
    per_case: dict[str, tuple[int, int]] = {}
    graded = passed = infra = agent = ungraded = 0
    for outcome in side.outcomes:
        if outcome.error_kind == "infra":
            infra += 1
        elif outcome.error_kind == "agent":
            agent += 1
        elif outcome.passed is None:
            ungraded += 1
        if outcome.passed is None:
            per_case.setdefault(outcome.case_id, (0, 0))
            continue
        graded += 1
        passed += int(outcome.passed)
        passes, count = per_case.get(outcome.case_id, (0, 0))
        per_case[outcome.case_id] = (passes + int(outcome.passed), count + 1)
    summary = SideSummary(
        id=side.id,
        name=side.name,
        trials=side.trials,
        graded=graded,
        passed=passed,
        infra_errors=infra,
        agent_errors=agent,
        ungraded=ungraded,
        done=len(side.outcomes),
        planned=side.planned,
        finished=side.finished,
    )
    return summary, per_case


def default_seed(cases: Sequence[CaseResult]) -> int:
    """A seed derived from the paired outcomes: the same two runs (or a resumed run and an
    uninterrupted one with the same outcomes) get the same interval."""
    text = json.dumps(
        [[c.case_id, c.a_passes, c.a_graded, c.b_passes, c.b_graded] for c in cases],
        separators=(",", ":"),
    )
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def p_text(p: float) -> str:
    """ "p=0.065", or "p<0.001" below that."""
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def _pp(value: float) -> str:
    return f"{value * 100:.1f}pp"


def compare(
    a: Side,
    b: Side,
    *,
    seed: int | None = None,
    margin: float | None = None,
    with_matrix: bool = False,
    cluster_field: str | None = None,
    groups: Mapping[str, str] | None = None,
    aa: AaFloor | None = None,
    kinds: Mapping[str, str] | None = None,
    seq_attempts: int | None = None,
) -> Comparison:
    """Compare run B with run A; see the module docstring for every rule.

    With `cluster_field`, `groups` maps case ids to their group (the field's value): the
    interval then resamples whole groups (`cluster_bootstrap`); a case without a group is a
    group of its own. With `seq_attempts` (--verdict seq) every outcome is the case-trial's
    Seq@K (passed within its attempts) instead of its first attempt's."""
    if seq_attempts is not None:
        a, b = _seq_side(a), _seq_side(b)
    summary_a, cases_a = _tally(a)
    summary_b, cases_b = _tally(b)
    graded_a = {case for case, (_, count) in cases_a.items() if count}
    graded_b = {case for case, (_, count) in cases_b.items() if count}
    paired_ids = sorted(graded_a & graded_b)
    cases = [CaseResult(case, *cases_a[case], *cases_b[case]) for case in paired_ids]
    n = len(cases)
    chosen_seed = default_seed(cases) if seed is None else seed
    diffs = [c.delta for c in cases]
    clusters = None
    # The test's units: each case's exact d, or each group's exact summed d.
    exact: dict[str, Fraction] = {}
    if cluster_field is None:
        interval = paired_bootstrap(diffs, seed=chosen_seed)
        for c in cases:
            exact[c.case_id] = _exact_delta(c)
    else:
        known = groups or {}
        totals: dict[str, float] = {}
        sizes: dict[str, int] = {}
        for c in cases:
            key = f"g:{known[c.case_id]}" if c.case_id in known else f"c:{c.case_id}"
            totals[key] = totals.get(key, 0.0) + c.delta
            sizes[key] = sizes.get(key, 0) + 1
            exact[key] = exact.get(key, Fraction(0)) + _exact_delta(c)
        interval = cluster_bootstrap(list(totals.values()), list(sizes.values()), seed=chosen_seed)
        clusters = Clusters(cluster_field, len(totals), sum(c.case_id not in known for c in cases))
    test = None
    if n:
        signs = sign_test([(value > 0) - (value < 0) for value in exact.values()])
        test = PairedTest(
            units="cases" if clusters is None else "groups",
            up=signs.positive,
            down=signs.negative,
            unchanged=signs.ties,
            p=signs.p,
            same_as_mcnemar=clusters is None
            and all(c.a_graded == 1 and c.b_graded == 1 for c in cases),
        )
    diff = sum(diffs) / n if n else None
    n11 = sum(c.a_pass and c.b_pass for c in cases)
    n10 = sum(c.a_pass and not c.b_pass for c in cases)
    n01 = sum(not c.a_pass and c.b_pass for c in cases)
    n00 = n - n11 - n10 - n01
    p_value = mcnemar_exact(n10, n01, n11, n00) if n else None

    if interval is None:
        interval_verdict: Verdict = "inconclusive"
        reason = "no paired cases"
    elif all(d == 0 for d in diffs):
        interval_verdict, reason = "inconclusive", "A and B agree on every case"
    elif interval.low > 0:
        interval_verdict, reason = "better", "CI above 0"
    elif interval.high < 0:
        interval_verdict, reason = "worse", "CI below 0"
    else:
        interval_verdict, reason = "inconclusive", "CI includes 0"

    verdict = interval_verdict
    disagreement = None
    if test is not None and reason != "A and B agree on every case":
        verdict, reason, disagreement = _with_test(interval_verdict, reason, test)

    # What the evidence shows, before regression to the mean has its say.
    shown, shown_reason = verdict, reason
    warnings: list[str] = []
    holds: list[str] = []
    regression_to_the_mean = b.failing_of == a.id
    if regression_to_the_mean:
        verdict = "inconclusive"
        reason = "regression to the mean: B ran only A's failing cases"
        warnings.append(
            f"B ran with --failing {a.id}: cases chosen for failing once tend to pass the next "
            "time by chance (regression to the mean), so B's gain on them says little; compare "
            "runs of the same cases"
        )
        holds.append("B ran only A's failing cases (regression to the mean)")

    for side in (summary_a, summary_b):
        if not side.finished:
            label = "A" if side is summary_a else "B"
            holds.append(f"{label} is partial ({side.done}/{side.planned} case runs)")
            warnings.append(
                f"{label} ({side.id}) is partial: {side.done} of {side.planned} case runs saved; "
                f"resume it with neens exp run … --resume {side.id}"
            )

    grader_changes: list[str] = []
    for name in sorted(a.graders.keys() | b.graders.keys()):
        if name not in b.graders:
            grader_changes.append(f"grader {name} graded A only")
        elif name not in a.graders:
            grader_changes.append(f"grader {name} graded B only")
        elif a.graders[name] != b.graders[name]:
            grader_changes.append(
                f"grader {name} changed version between A and B "
                f"({a.graders[name]} → {b.graders[name]})"
            )
    if grader_changes:
        warnings.append(
            f"{'; '.join(grader_changes)}: A and B were not graded alike, so part of B − A may "
            "be the graders' doing"
        )
        holds.append("the graders differ between A and B")

    if n == 0:
        holds.append("no paired cases")
    score = None
    if n:
        down = sum((max(-_exact_delta(c), Fraction(0)) for c in cases), Fraction(0))
        up = sum((max(_exact_delta(c), Fraction(0)) for c in cases), Fraction(0))
        score_interval = tango_interval(float(down), float(up), n)
        assert score_interval is not None
        score = ScoreEvidence(score_interval, float(down), float(up), n)
    margin_held_by = None
    if interval is not None and score is not None and margin is not None:
        margin_held_by = []
        if not score.interval.low > -margin:
            margin_held_by.append("score")
            cases_text = f"{n} paired case{'s' if n != 1 else ''}"
            why = (
                f"too few to show B is at most {_pp(margin)} worse"
                if diff is not None and diff > -margin
                else f"B − A is {_pp(diff or 0.0)}"
            )
            holds.append(
                f"the score interval for B − A (Tango) reaches {_pp(score.interval.low)} at "
                f"{cases_text}, not above {_pp(-margin)}: {why} (non-inferiority margin)"
            )
        if not interval.low > -margin:
            margin_held_by.append("bootstrap")
            holds.append(
                f"the interval's lower end {_pp(interval.low)} is not above {_pp(-margin)} "
                "(non-inferiority margin)"
            )
    elif interval is not None and shown != "better":
        holds.append(f"B is not shown better ({shown_reason})")

    errors_a = (summary_a.infra_errors, summary_a.agent_errors)
    errors_b = (summary_b.infra_errors, summary_b.agent_errors)
    uneven = errors_a != errors_b
    if uneven:
        warnings.append(
            f"errors are uneven: A lost {errors_a[0]} infra + {errors_a[1]} agent case-trials, "
            f"B lost {errors_b[0]} infra + {errors_b[1]} agent; infra errors say nothing about "
            "the agent (run them again with --resume --retry-errors)"
        )

    sequential = (
        a.ended_at is not None
        and b.ended_at is not None
        and (a.ended_at <= b.started_at or b.ended_at <= a.started_at)
    )
    if sequential:
        warnings.append(
            "A and B ran one after the other: anything that drifted in between (the provider, "
            "a cache, the time of day) counts as a difference between them"
        )

    if clusters is not None and clusters.groups < FEW_GROUPS:
        warnings.append(
            f"only {clusters.groups} groups of {clusters.field}: a cluster bootstrap needs at "
            f"least {FEW_GROUPS} (30 or more to be trusted), so the interval is rough"
        )

    if test is not None and len(exact) < (fewest := fewest_changed_to_reject(ALPHA)):
        unit = test.units if len(exact) != 1 else test.units[:-1]
        warnings.append(
            f"only {len(exact)} paired {unit}: the exact sign test cannot reject at 5% with "
            f"fewer than {fewest} changed {test.units}, so B can be shown neither better nor "
            f"worse, however the {test.units} turn out; compare at least {fewest}"
        )

    power = None
    if n:
        q = (n10 + n01) / n
        if q > 0:
            ceiling = mcnemar_ceiling(n, q)
            raw = mcnemar_mde(n, q) if ceiling >= POWER_TARGET else None
            floored = raw if raw is None or aa is None else max(raw, aa.flip_rate)
            power = Power(n, q, ceiling, floored, raw)

    multi = max(a.trials, b.trials) >= 2
    gained = sorted(c.case_id for c in cases if c.a_passes == 0 and c.b_passes > 0)
    lost = sorted(c.case_id for c in cases if c.a_passes > 0 and c.b_passes == 0)

    matrix = None
    if with_matrix:
        counts = [[0] * (b.trials + 1) for _ in range(a.trials + 1)]
        left_out = 0
        for c in cases:
            if c.a_graded == a.trials and c.b_graded == b.trials:
                counts[c.a_passes][c.b_passes] += 1
            else:
                left_out += 1
        matrix = Matrix(a.trials, b.trials, counts, left_out)

    def by_delta(rows: list[CaseResult]) -> list[CaseResult]:
        return sorted(rows, key=lambda c: (c.delta if c.delta < 0 else -c.delta, c.case_id))

    return Comparison(
        a=summary_a,
        b=summary_b,
        cases=cases,
        diff=diff,
        interval=interval,
        seed=chosen_seed,
        n11=n11,
        n10=n10,
        n01=n01,
        n00=n00,
        mcnemar_p=p_value,
        interval_verdict=interval_verdict,
        verdict=verdict,
        verdict_reason=reason,
        disagreement=disagreement,
        prob_b_beats_a=prob_b_beats_a(n10, n01) if 0 < n < BAYES_BELOW else None,
        power=power,
        regressed=by_delta([c for c in cases if c.delta < 0]),
        improved=by_delta([c for c in cases if c.delta > 0]),
        gained=gained if multi else None,
        lost=lost if multi else None,
        matrix=matrix,
        margin=margin,
        holds=holds,
        warnings=warnings,
        only_a=len(graded_a - graded_b),
        only_b=len(graded_b - graded_a),
        ungraded_a=len(set(cases_a) - graded_a),
        ungraded_b=len(set(cases_b) - graded_b),
        uneven_errors=uneven,
        ran_one_after_the_other=sequential,
        regression_to_the_mean=regression_to_the_mean,
        grader_changes=grader_changes,
        cluster=clusters,
        aa=aa,
        kinds=_kinds(cases, kinds) if kinds else None,
        seq_attempts=seq_attempts,
        test=test,
        score=score,
        margin_held_by=margin_held_by,
    )


def _exact_delta(c: CaseResult) -> Fraction:
    return Fraction(c.b_passes, c.b_graded) - Fraction(c.a_passes, c.a_graded)


def _with_test(
    interval_verdict: Verdict, reason: str, test: PairedTest
) -> tuple[Verdict, str, str | None]:
    """The verdict once the sign test has had its say: (verdict, reason, disagreement)."""
    p = f"exact sign test {p_text(test.p)}"
    if interval_verdict == "inconclusive":
        if test.rejects:
            return (
                "inconclusive",
                reason,
                f"the exact sign test rejects at 5% ({p_text(test.p)} on {test.on()}) but the "
                "interval includes 0",
            )
        return "inconclusive", reason, None
    side = "above" if interval_verdict == "better" else "below"
    agrees = test.up > test.down if interval_verdict == "better" else test.down > test.up
    if test.rejects and agrees:
        return interval_verdict, f"CI {side} 0, {p}", None
    if not test.rejects:
        return (
            "inconclusive",
            f"CI {side} 0 but {p} on {test.on()}",
            f"the interval excludes 0 but the exact sign test does not reject at 5% "
            f"({p_text(test.p)} on {test.on()})",
        )
    return (
        "inconclusive",
        f"CI {side} 0 but the exact sign test points the other way ({test.up} {test.units} up, "
        f"{test.down} down)",
        f"the interval is {side} 0 but the exact sign test rejects the other way "
        f"({p_text(test.p)}: {test.up} {test.units} up, {test.down} down)",
    )


def _seq_side(side: Side) -> Side:
    outcomes = [
        TrialOutcome(o.case_id, o.seq_passed if o.passed is not None else None, o.error_kind)
        for o in side.outcomes
    ]
    return dataclasses.replace(side, outcomes=outcomes)


def _kinds(cases: Sequence[CaseResult], kinds: Mapping[str, str]) -> Kinds | None:
    by_kind: dict[str, list[CaseResult]] = {}
    for c in cases:
        if c.case_id in kinds:
            by_kind.setdefault(kinds[c.case_id], []).append(c)
    if not by_kind:
        return None
    rows = [
        KindRow(
            kind,
            len(group),
            sum(c.a_rate for c in group) / len(group),
            sum(c.b_rate for c in group) / len(group),
        )
        for kind, group in sorted(by_kind.items())
    ]

    def broken(kind: str) -> list[str]:
        return [c.case_id for c in by_kind.get(kind, []) if c.a_pass and not c.b_pass]

    return Kinds(
        rows=rows,
        not_fixed=[c.case_id for c in by_kind.get("bad", []) if not c.b_pass],
        broken_guards=broken("guard"),
        broken_controls=broken("control"),
    )


def flips(a: Side, b: Side) -> tuple[int, int]:
    """How many paired cases flipped between two runs (pass on one side, fail on the other),
    out of how many paired cases: for two runs of one config, the A/A flip rate."""
    result = compare(a, b, seed=0)
    return result.n10 + result.n01, len(result.cases)


@dataclass(frozen=True, slots=True)
class JudgeCorrection:
    """One LLM judge's B − A, and the same corrected with people's labels (PPI++)."""

    grader: str
    labeled: int
    """Cases judged in both runs and labeled by people in both."""
    unlabeled: int
    """Cases judged in both runs without labels on both sides."""
    judge_diff: float | None
    """The judge's own B − A over every case it judged in both runs."""
    corrected: PpiEstimate | None
    problem: str | None = None
    """Why there is no corrected estimate."""


def judge_corrections(
    judges_a: Mapping[str, Mapping[str, float]],
    judges_b: Mapping[str, Mapping[str, float]],
    labels_a: Mapping[str, float],
    labels_b: Mapping[str, float],
) -> list[JudgeCorrection]:
    """Each judge's B − A corrected with human labels (`neens.domain.paired.ppi_mean`).

    `judges_x[grader][case]` is the judge's pass rate for the case in run x (1 or 0 with one
    trial) and `labels_x[case]` people's. For the cases a judge graded in both runs,
    Y = label_B − label_A on the cases labeled on both sides, Ŷ = judge_B − judge_A on the same
    cases, and Ŷ_u = judge_B − judge_A on the others. The labeled cases must be a uniformly
    random sample of the cases (PPI's assumption): label a random subset, not the hard ones.
    """
    corrections: list[JudgeCorrection] = []
    for grader in sorted(judges_a.keys() & judges_b.keys()):
        a, b = judges_a[grader], judges_b[grader]
        both = sorted(a.keys() & b.keys())
        labeled = [c for c in both if c in labels_a and c in labels_b]
        unlabeled = [c for c in both if not (c in labels_a and c in labels_b)]
        judge_diff = sum(b[c] - a[c] for c in both) / len(both) if both else None
        corrected = None
        problem = None
        if len(labeled) < 2:
            count = f"{len(labeled)} case{'s' if len(labeled) != 1 else ''}"
            problem = f"{count} labeled in both runs (PPI++ needs 2 or more)"
        elif not unlabeled:
            problem = "every case is labeled: the labels alone give B − A"
        else:
            corrected = ppi_mean(
                [labels_b[c] - labels_a[c] for c in labeled],
                [b[c] - a[c] for c in labeled],
                [b[c] - a[c] for c in unlabeled],
            )
        corrections.append(
            JudgeCorrection(grader, len(labeled), len(unlabeled), judge_diff, corrected, problem)
        )
    return corrections


@dataclass(frozen=True, slots=True)
class PairwiseVerdict:
    """A pairwise judge's labels for one case-trial: with A's answer shown first, then B's."""

    case_id: str
    trial: int
    a_first: str | None
    """"first" (A better), "second" (B better), "tie", or None (no label)."""
    b_first: str | None
    """"first" (B better), "second" (A better), "tie", or None."""


@dataclass(frozen=True, slots=True)
class PairwiseSummary:
    judge: str
    b_wins: int
    a_wins: int
    ties: int
    order_dependent: int
    """The two orders disagreed: the judge preferred a position, not an answer."""
    unjudged: int
    p_value: float | None
    """Two-sided sign test of B's wins against A's (ties and the rest left out)."""
    b_share: float | None
    """B's share of the decided pairs."""
    b_share_interval: Interval | None


def pairwise_summary(judge: str, verdicts: Sequence[PairwiseVerdict]) -> PairwiseSummary:
    """Who a pairwise judge preferred, asked in both orders.

    A pair is B's when B wins in both orders ("second" with A first, "first" with B first), A's
    when A wins in both, a tie when both say tie, unjudged when a label is missing, and order
    dependent otherwise. B's wins against A's get the exact sign test
    (`scipy.stats.binomtest(b_wins, b_wins + a_wins, 0.5)`) and B's share its Wilson interval.
    """
    from neens.domain.stats import wilson_interval

    b_wins = a_wins = ties = order_dependent = unjudged = 0
    for v in verdicts:
        if v.a_first is None or v.b_first is None:
            unjudged += 1
        elif v.a_first == "second" and v.b_first == "first":
            b_wins += 1
        elif v.a_first == "first" and v.b_first == "second":
            a_wins += 1
        elif v.a_first == "tie" and v.b_first == "tie":
            ties += 1
        else:
            order_dependent += 1
    decided = b_wins + a_wins
    p_value = None
    if decided:
        from scipy.stats import binomtest

        p_value = float(binomtest(b_wins, decided, 0.5).pvalue)
    return PairwiseSummary(
        judge=judge,
        b_wins=b_wins,
        a_wins=a_wins,
        ties=ties,
        order_dependent=order_dependent,
        unjudged=unjudged,
        p_value=p_value,
        b_share=b_wins / decided if decided else None,
        b_share_interval=wilson_interval(b_wins, decided),
    )
