"""The sweep decision: which arm to ship, at what bar, at what cost per case, per agent.

(The inputs and results are in `decision_types`, the verdict's wording in `decision_verdict`;
this module, a little over 500 lines, is the rules and the one pass over arrays that applies
them, which reads best in one place.)

`compare_sweep` turns a sweep's evidence (every captured answer of every arm's k runs over one
frozen dataset version) into the numbers, the ranking and the one-sentence verdict that the API,
the CLI, the MCP tools and the share page render. Nothing downstream re-derives any of them.

Each rule exists because the alternative is a number that reads like a fact and is not:

- **An item passes only when every scored repeat passed.** An item with passes and failures
  among its scored repeats is *flaky*: counted in `flaky_items` and not a pass (it stays in n as
  a failure). `n` is the items with at least one scored repeat; an item nothing scored is not in
  n, and `rate` is None when n = 0: no data, never 0%.
- **pass^k is estimated without bias.** Beside the strict `rate`, each arm reports the unbiased
  pass^k at its k, C(c, k) / C(n, k) averaged over the items with at least k scored repeats
  (`neens.domain.pass_k`), never the biased (c/n)^k.
- **Intervals are over items.** The 95% Wilson interval (`neens.domain.stats.wilson_interval`)
  is computed on passed items of n items, never on pooled repeats: the k answers to one prompt
  are one cluster, not k trials.
- **Unpriced is not free.** `cost_per_case_usd` is the mean cost over priced cases only
  (`math.fsum`), None when no case is priced; `priced_cases` against `cases` says how much of the
  arm it covers. A cost delta is None when either side is unknown, and its percentage also when
  the baseline costs 0, and when the baseline arm failed or was cancelled (its cost would be
  that of the runs it happened to finish).
- **The baseline is declared, never chosen after the fact.** It is the arm at the lowest
  position (0: the first arm listed at create) unless `baseline_arm_id` names another. It is never
  the best performer.
- **Regressions and new passes.** A regression is an item the baseline passed on every one of
  its k runs (scored on at least k distinct runs, every scored repeat passed) that this arm,
  scored at least once, did not pass. An item this arm never captured or never scored is missing
  evidence, not a regression. A new pass is the inverse: this arm passed it on all of its own k
  runs, and the baseline, scored at least once, did not pass it.
- **The paired test is a second line.** Exact McNemar on the items both this arm and the
  baseline scored (`neens.domain.stats.mcnemar_exact`), labelled as such in its sentence; the
  ranking and the verdict never use it. With no discordant item it reports p = 1 and
  `discordant = 0`; with no item scored by both it is None (no data, not p = 1).
- **Exclusion**, checked in this order: `not_terminal` (pending or running: never judged on the
  runs it happens to have finished), `failed` (failed or cancelled), `not_pass_k` (`passed` is
  not True: an arm green on 2 of 3 runs has not passed). Excluded arms are not ranked and cannot
  be recommended; their own numbers are still reported.
- **The bar is cleared on the lower bound** (Wilson low >= bar), **on the point estimate only**
  (rate >= bar, Wilson low < bar: the verdict says so and asks for more golden items), or not.
- **A void sweep names no winner.** `comparable=False`: outcome `unavailable`, an empty
  leaderboard, no winner; each arm's own numbers (rate, n, interval, flaky items, cost, cases,
  exclusion, bar clearance) are still computed, but every cross-arm number (cost delta,
  regressions, new passes, McNemar, the not-distinguishable annotation) is None.

The ranking orders the non-excluded arms by rate (highest first, no data last), then cost per
case (cheapest first, unpriced last), then position. Once no arm is running, its top arm with
data is the *winner*; a
ranked arm whose Wilson interval overlaps the winner's is annotated "not distinguishable". The
overlap rule is a conservative heuristic, not a 5% test (stats-methods §2); arms without data
are not annotated. The verdict recommends the *cheapest* arm that is not excluded and clears the
bar (unpriced last: an unpriced arm is recommended only when no priced arm clears, and its
sentence says its cost is unknown), ties by position. While any arm is not terminal there is no
recommendation (`not_finished`).

**Agents.** The same comparison is made per agent, on only that agent's items. An item belongs
to the agent name its captured sessions report, across all arms; a session with no name (None or
empty) does not vote. An item whose sessions name no agent, or name two different agents (exact,
case-sensitive comparison: "Refund" and "refund" conflict), goes to *Unattributed*, never to a
named agent: a conflict is a fact about the evidence, and picking a majority would move items
(and a verdict) onto an agent that may never have run them. An agent that calls itself
"Unattributed" stays a named agent (`agent_name` set); the Unattributed group has
`agent_name=None`. An item no arm captured has no agent at all and belongs to no group (it is
counted in `uncaptured_items`). Groups are ordered by name (case-insensitively, then exactly),
Unattributed last, and it is listed only when it holds an item. pass^k, status and exclusion are
each arm's own in every group.

Speed: the API calls this over 6 arms × 3 runs × 10,000 items (180,000 repeats). What the rules
read of an arm's answers comes added up per item as arrays over the frozen items (`ItemArrays`:
answers, scored, passed, distinct scored runs, the lowest and highest agent name as codes, and
each priced answer's cost), built with numpy from each run's answers (`ItemArrays.add_up`), so
nothing here works per answer or maps an item id; everything after that is numpy over arrays (a
verdict byte per item, bincounts per agent group). The readable forms, item id -> `Repeat`s, one
row per answer (`RepeatColumns`) and per-item tallies (`ItemTallies`), are turned into the same
arrays first. Costs are kept one by one and summed with `math.fsum` over Python floats, so the
mean does not depend on the order or on the form given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from neens.domain.decision_frontier import cost_quality_frontier
from neens.domain.decision_types import (
    DEFAULT_BAR,
    UNATTRIBUTED,
    AgentComparison,
    ArmComparison,
    ArmEvidence,
    Bar,
    BarSource,
    ClearsBar,
    Excluded,
    ItemArrays,
    ItemTallies,
    McNemar,
    Outcome,
    Repeat,
    RepeatColumns,
    SweepComparison,
    Verdict,
)
from neens.domain.decision_verdict import (
    _p,
    _scoped,
    _verdict,
)
from neens.domain.pass_k import case_pass_hat_k
from neens.domain.stats import Interval, mcnemar_exact, mean, proportion, wilson_interval
from neens.domain.sweeps import ARM_TERMINAL
from neens.errors import Unprocessable

__all__ = [
    "DEFAULT_BAR",
    "UNATTRIBUTED",
    "AgentComparison",
    "ArmComparison",
    "ArmEvidence",
    "Bar",
    "BarSource",
    "ClearsBar",
    "Excluded",
    "ItemArrays",
    "ItemTallies",
    "McNemar",
    "Outcome",
    "Repeat",
    "RepeatColumns",
    "SweepComparison",
    "Verdict",
    "compare_sweep",
    "regression_items",
]

# --- the computation ------------------------------------------------------------------------------

# Item verdicts, one byte per item and arm.
_UNSCORED, _PASS, _PASS_ALL_K, _FAIL, _FLAKY = 0, 1, 2, 3, 4

_Ints = npt.NDArray[np.intp]
_Floats = npt.NDArray[np.float64]
_Bools = npt.NDArray[np.bool_]


@dataclass(slots=True)
class _Counts:
    """An arm's raw counts over one group of items."""

    n: int = 0
    passed: int = 0
    flaky: int = 0
    cases: int = 0
    costs: list[float] = field(default_factory=list)
    regressions: int = 0
    new_passes: int = 0
    b: int = 0
    c: int = 0
    n11: int = 0
    n00: int = 0
    pass_hat_k: list[float] = field(default_factory=list)
    """Per item with at least k scored repeats: its unbiased pass^k, C(c, k) / C(n, k)."""


def compare_sweep(
    arms: Sequence[ArmEvidence],
    item_ids: Sequence[str],
    *,
    comparable: bool,
    void_reason: str | None,
    bar: Bar,
    baseline_arm_id: str | None,
) -> SweepComparison:
    """The comparison of a sweep's arms, overall and per agent (see the module docstring).

    Unprocessable (422, field `baselineArm`) when `baseline_arm_id` names no arm of the sweep;
    ValueError when the evidence contradicts itself (no arm, duplicate arm ids, positions or
    items, repeats for items outside `item_ids`, a scored repeat with no verdict).
    """
    if not arms:
        raise ValueError("a sweep comparison needs at least one arm")
    ordered = sorted(arms, key=lambda arm: arm.position)
    if len({arm.id for arm in ordered}) != len(ordered):
        raise ValueError("two arms share an id")
    if len({arm.position for arm in ordered}) != len(ordered):
        raise ValueError("two arms share a position")
    if baseline_arm_id is None:
        base = 0
    else:
        found = [i for i, arm in enumerate(ordered) if arm.id == baseline_arm_id]
        if not found:
            raise Unprocessable(
                f"baselineArm {baseline_arm_id!r} is not an arm of this sweep; "
                f"use one of {', '.join(arm.id for arm in ordered)}",
                field="baselineArm",
            )
        base = found[0]

    index = {item_id: i for i, item_id in enumerate(item_ids)}
    if len(index) != len(item_ids):
        raise ValueError("item_ids lists an item twice")
    evidence = [_Evidence.of(arm, index, item_ids) for arm in ordered]
    attribution = _attribute(evidence, len(item_ids))
    groups = len(attribution.names) + 2  # the named agents, Unattributed, never captured
    per_group = _count(evidence, base, attribution.group, groups)

    overall = [_sum_counts(counts) for counts in per_group]
    arms_out, leaderboard, winner, verdict = _judge(
        ordered, overall, base, comparable=comparable, void_reason=void_reason, bar=bar, scope=None
    )

    agents: list[AgentComparison] = []
    labels: list[tuple[str | None, str]] = [(name, name) for name in attribution.names]
    labels.append((None, UNATTRIBUTED))
    for g, (agent_name, label) in enumerate(labels):
        items = attribution.items[g]
        if items == 0:
            continue
        group_arms, group_board, group_winner, group_verdict = _judge(
            ordered,
            [counts[g] for counts in per_group],
            base,
            comparable=comparable,
            void_reason=void_reason,
            bar=bar,
            scope=label,
        )
        agents.append(
            AgentComparison(
                agent_name=agent_name,
                label=label,
                items=items,
                unnamed_items=attribution.unnamed if agent_name is None else 0,
                conflicting_items=attribution.conflicting if agent_name is None else 0,
                arms=group_arms,
                leaderboard=group_board,
                winner_arm_id=group_winner,
                verdict=group_verdict,
            )
        )

    return SweepComparison(
        comparable=comparable,
        void_reason=void_reason,
        bar=bar,
        baseline_arm_id=ordered[base].id,
        item_count=len(item_ids),
        uncaptured_items=attribution.items[-1],
        arms=arms_out,
        leaderboard=leaderboard,
        winner_arm_id=winner,
        verdict=verdict,
        agents=tuple(agents),
        frontier=cost_quality_frontier(arms_out, verdict, comparable=comparable),
    )


# --- one arm's evidence, as arrays ----------------------------------------------------------------


def _codes(values: Sequence[str], lookup: Mapping[str, int]) -> _Ints:
    return np.fromiter(map(lookup.__getitem__, values), dtype=np.intp, count=len(values))


def _spread(size: int, item: _Ints, values: Sequence[int]) -> npt.NDArray[np.int64]:
    """A tally column spread over all items (0 where the arm has no tally)."""
    weights = np.asarray(values, dtype=np.float64)  # counts: exact in a float64
    return np.bincount(item, weights=weights, minlength=size).astype(np.int64)


def _arrays(arm: ArmEvidence, index: Mapping[str, int]) -> ItemArrays:
    """The arm's answers as arrays over the items of `index`, whatever form they were given in."""
    repeats = arm.repeats
    size = len(index)
    if isinstance(repeats, ItemArrays):
        if len(repeats) != size:
            raise ValueError(f"arm {arm.id} has arrays over {len(repeats)} items, not {size}")
        return repeats
    if isinstance(repeats, ItemTallies):
        tallies = repeats
    else:
        columns = repeats if isinstance(repeats, RepeatColumns) else RepeatColumns.of(repeats)
        tallies = columns.tallies()
    try:
        item = _codes(tallies.item_id, index)
    except KeyError as error:
        raise ValueError(f"arm {arm.id} has repeats of an item not in item_ids: {error}") from None
    names = sorted({name for name in (*tallies.lowest_agent, *tallies.highest_agent) if name})
    code = {name: i for i, name in enumerate(names)}
    none = len(names)
    lowest = np.full(size, none, dtype=np.int64)
    highest = np.full(size, -1, dtype=np.int64)
    for column, target, ufunc in (
        (tallies.lowest_agent, lowest, np.minimum),
        (tallies.highest_agent, highest, np.maximum),
    ):
        named = [i for i, name in enumerate(column) if name]
        ufunc.at(target, item[named], [code[column[i]] for i in named])  # type: ignore[index]
    lowest[lowest == none] = -1
    if tallies.costs:
        table = np.array(
            [np.asarray(column, dtype=np.float64) for column in tallies.costs], dtype=np.float64
        )
    else:
        table = np.zeros((0, len(item)), dtype=np.float64)
    priced = ~np.isnan(table)
    return ItemArrays(
        names=tuple(names),
        cases=_spread(size, item, tallies.cases),
        scored=_spread(size, item, tallies.scored),
        passed=_spread(size, item, tallies.passed),
        unjudged=_spread(size, item, tallies.unjudged),
        scored_runs=_spread(size, item, tallies.scored_runs),
        lowest_agent=lowest,
        highest_agent=highest,
        cost_item=np.broadcast_to(item, table.shape)[priced].astype(np.int64),
        cost=table[priced],
    )


@dataclass(slots=True)
class _Evidence:
    arm: ArmEvidence
    arrays: ItemArrays
    cases: npt.NDArray[np.int64]
    """Per item: captured answers."""
    verdicts: npt.NDArray[np.uint8]
    """Per item: _UNSCORED, _PASS, _PASS_ALL_K, _FAIL or _FLAKY."""
    cost_item: npt.NDArray[np.int64]
    """Per priced answer: its item's position."""
    cost: _Floats
    """Per priced answer: its cost."""
    scored_n: npt.NDArray[np.int64]
    """Per item: scored repeats."""
    hits_n: npt.NDArray[np.int64]
    """Per item: scored repeats that passed."""

    @classmethod
    def of(cls, arm: ArmEvidence, index: Mapping[str, int], item_ids: Sequence[str]) -> _Evidence:
        arrays = _arrays(arm, index)
        if arrays.unjudged.any():
            where = int(np.flatnonzero(arrays.unjudged)[0])
            raise ValueError(
                f"arm {arm.id}, item {item_ids[where]}: a scored repeat has no verdict "
                "(passed is None)"
            )
        scored_n, hits_n = arrays.scored, arrays.passed
        # "Passed on every one of its k runs" counts distinct runs, not repeats.
        runs_n = arrays.scored_runs

        verdicts = np.zeros(len(arrays), dtype=np.uint8)
        is_scored = scored_n > 0
        all_passed = is_scored & (hits_n == scored_n)
        verdicts[is_scored] = _FAIL
        verdicts[is_scored & (hits_n > 0) & ~all_passed] = _FLAKY
        verdicts[all_passed] = _PASS
        verdicts[all_passed & (runs_n >= arm.runs)] = _PASS_ALL_K
        return cls(
            arm, arrays, arrays.cases, verdicts, arrays.cost_item, arrays.cost, scored_n, hits_n
        )


# --- agents ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Attribution:
    names: list[str]
    """Named agents in display order: group g < len(names) is names[g]; then Unattributed,
    then the items no arm captured."""
    group: _Ints
    """Per item: its group."""
    items: list[int]
    """Items per group."""
    unnamed: int
    conflicting: int


def _attribute(evidence: Sequence[_Evidence], size: int) -> _Attribution:
    """Each item's agent: the one name its sessions report across all arms (see the module
    docstring for no name and conflicting names)."""
    lookup: dict[str, int] = {}
    captured = np.zeros(size, dtype=np.bool_)
    # Per item, the lowest and the highest name code its sessions reported across the arms:
    # equal when they agree, different when they conflict, and still at their initial values
    # when none did.
    unset = np.iinfo(np.int64).max
    lowest = np.full(size, unset, dtype=np.int64)
    highest = np.full(size, -1, dtype=np.int64)
    for arm in evidence:
        captured |= arm.cases > 0
        arrays = arm.arrays
        remap = np.array(
            [*(lookup.setdefault(name, len(lookup)) for name in arrays.names), -1], dtype=np.int64
        )
        for column in (arrays.lowest_agent, arrays.highest_agent):
            code = remap[column]  # -1 (none) picks the trailing -1
            lowest = np.minimum(lowest, np.where(code >= 0, code, unset))
            highest = np.maximum(highest, code)
    voted = highest >= 0
    conflict = voted & (lowest != highest)
    name_of = np.where(voted & ~conflict, lowest, -1)

    holds_items = np.bincount(name_of[voted & ~conflict], minlength=len(lookup)) > 0
    used = [name for name, code in lookup.items() if holds_items[code]]
    names = sorted(used, key=lambda name: (name.casefold(), name))
    regroup = np.full(max(len(lookup), 1), len(names), dtype=np.intp)
    for g, name in enumerate(names):
        regroup[lookup[name]] = g
    group = np.where(name_of >= 0, regroup[np.maximum(name_of, 0)], len(names))
    group[~captured] = len(names) + 1
    items: list[int] = np.bincount(group, minlength=len(names) + 2).tolist()
    conflicting = int(np.count_nonzero(conflict))
    return _Attribution(
        names=names,
        group=group,
        items=items,
        unnamed=items[len(names)] - conflicting,
        conflicting=conflicting,
    )


# --- counts per arm and group ---------------------------------------------------------------------


def _regression_masks(
    verdicts: npt.NDArray[np.uint8], baseline: npt.NDArray[np.uint8]
) -> tuple[_Bools, _Bools]:
    """Per item: regressed (the baseline passed it on all its k runs; this arm, scored, did not
    pass it) and newly passed (the inverse)."""
    passed = (verdicts == _PASS) | (verdicts == _PASS_ALL_K)
    base_passed = (baseline == _PASS) | (baseline == _PASS_ALL_K)
    regressed = (baseline == _PASS_ALL_K) & (verdicts != _UNSCORED) & ~passed
    newly = (verdicts == _PASS_ALL_K) & (baseline != _UNSCORED) & ~base_passed
    return regressed, newly


def regression_items(
    arm: ArmEvidence, baseline: ArmEvidence, item_ids: Sequence[str]
) -> tuple[list[str], list[str]]:
    """(regressed items, newly passed items) of `arm` against `baseline`, in item order: the
    items `compare_sweep` counts as `regressions` and `new_passes`, by the same rule."""
    index = {item_id: i for i, item_id in enumerate(item_ids)}
    regressed, newly = _regression_masks(
        _Evidence.of(arm, index, item_ids).verdicts,
        _Evidence.of(baseline, index, item_ids).verdicts,
    )
    return (
        [item_ids[i] for i in np.flatnonzero(regressed).tolist()],
        [item_ids[i] for i in np.flatnonzero(newly).tolist()],
    )


def _count(
    evidence: Sequence[_Evidence], base: int, group: _Ints, groups: int
) -> list[list[_Counts]]:
    """Per arm, per group: the arm's own counts and its cross-tabulation with the baseline."""

    def count(mask: _Bools) -> list[int]:
        counted: list[int] = np.bincount(group[mask], minlength=groups).tolist()
        return counted

    baseline = evidence[base].verdicts
    base_scored = baseline != _UNSCORED
    base_pass = (baseline == _PASS) | (baseline == _PASS_ALL_K)
    base_failed = base_scored & ~base_pass
    out: list[list[_Counts]] = []
    for j, arm in enumerate(evidence):
        verdicts = arm.verdicts
        scored = verdicts != _UNSCORED
        passed = (verdicts == _PASS) | (verdicts == _PASS_ALL_K)
        failed = scored & ~passed
        n, hits, flaky = count(scored), count(passed), count(verdicts == _FLAKY)
        if j == base:
            regressions = new_passes = b = c = n11 = n00 = [0] * groups
        else:
            regressed, newly = _regression_masks(verdicts, baseline)
            regressions, new_passes = count(regressed), count(newly)
            b, c = count(base_pass & failed), count(base_failed & passed)
            n11, n00 = count(base_pass & passed), count(base_failed & failed)
        cases: list[int] = (
            np.bincount(group, weights=arm.cases, minlength=groups).astype(np.int64).tolist()
        )
        costs = _costs_by_group(arm.cost, group[arm.cost_item], groups)
        k = arm.arm.runs
        eligible = np.flatnonzero(arm.scored_n >= k) if k >= 1 else np.zeros(0, np.intp)
        estimates = _pass_hat_k(arm.hits_n[eligible], arm.scored_n[eligible], k)
        pass_hat = _costs_by_group(estimates, group[eligible], groups)
        out.append(
            [
                _Counts(
                    n=n[g],
                    passed=hits[g],
                    flaky=flaky[g],
                    cases=cases[g],
                    costs=costs[g],
                    regressions=regressions[g],
                    new_passes=new_passes[g],
                    b=b[g],
                    c=c[g],
                    n11=n11[g],
                    n00=n00[g],
                    pass_hat_k=pass_hat[g],
                )
                for g in range(groups)
            ]
        )
    return out


def _pass_hat_k(hits: npt.NDArray[np.int64], scored: npt.NDArray[np.int64], k: int) -> _Floats:
    """Per item, `case_pass_hat_k` of its (hits, scored) counts: worked out once per distinct
    pair (an arm's items take a handful of them) and spread back over the items."""
    if not len(scored):
        return np.zeros(0, dtype=np.float64)
    width = int(scored.max()) + 1
    pairs, where = np.unique(hits * width + scored, return_inverse=True)
    values = [case_pass_hat_k(pair // width, pair % width, k) for pair in pairs.tolist()]
    spread: _Floats = np.asarray(values, dtype=np.float64)[where.reshape(-1)]
    return spread


def _costs_by_group(cost: _Floats, owner: _Ints, groups: int) -> list[list[float]]:
    """The priced costs (`owner`: each one's group) of each group, as floats for an exactly
    rounded sum."""
    values = cost
    order = np.argsort(owner, kind="stable")
    bounds = np.cumsum(np.bincount(owner, minlength=groups))[:-1]
    return [part.tolist() for part in np.split(values[order], bounds)]


def _sum_counts(counts: Sequence[_Counts]) -> _Counts:
    costs: list[float] = []
    for part in counts:
        costs.extend(part.costs)
    return _Counts(
        n=sum(part.n for part in counts),
        passed=sum(part.passed for part in counts),
        flaky=sum(part.flaky for part in counts),
        cases=sum(part.cases for part in counts),
        costs=costs,
        regressions=sum(part.regressions for part in counts),
        new_passes=sum(part.new_passes for part in counts),
        b=sum(part.b for part in counts),
        c=sum(part.c for part in counts),
        n11=sum(part.n11 for part in counts),
        n00=sum(part.n00 for part in counts),
        pass_hat_k=[value for part in counts for value in part.pass_hat_k],
    )


# --- numbers, ranking and verdict of one group ----------------------------------------------------


def _excluded(arm: ArmEvidence) -> Excluded | None:
    if arm.status not in ARM_TERMINAL:
        return "not_terminal"
    if arm.status != "completed":
        return "failed"
    if arm.passed is not True:
        return "not_pass_k"
    return None


def _judge(
    arms: Sequence[ArmEvidence],
    counts: Sequence[_Counts],
    base: int,
    *,
    comparable: bool,
    void_reason: str | None,
    bar: Bar,
    scope: str | None,
) -> tuple[tuple[ArmComparison, ...], tuple[str, ...], str | None, Verdict]:
    """The arms of one group (the sweep, or one agent's items), their ranking and verdict."""
    rates: list[float | None] = []
    intervals: list[Interval | None] = []
    costs: list[float | None] = []
    for part in counts:
        rates.append(proportion(part.passed, part.n))
        intervals.append(wilson_interval(part.passed, part.n))
        costs.append(mean(part.costs))
    excluded = [_excluded(arm) for arm in arms]
    clears = [
        _clears(rate, interval, bar.value) for rate, interval in zip(rates, intervals, strict=True)
    ]

    ranked: list[int] = []
    if comparable:
        ranked = sorted(
            (j for j in range(len(arms)) if excluded[j] is None),
            key=lambda j: (
                rates[j] is None,
                -(rates[j] or 0.0),
                costs[j] is None,
                costs[j] or 0.0,
                arms[j].position,
            ),
        )
    # No winner while an arm runs: it would be named on the arms that happen to be done, and
    # the running one (the baseline, say) may take its place when it finishes.
    unfinished = "not_terminal" in excluded
    winner = ranked[0] if ranked and rates[ranked[0]] is not None and not unfinished else None
    rank = {j: place for place, j in enumerate(ranked, start=1)}

    out: list[ArmComparison] = []
    # A baseline that failed or was cancelled costs what the runs it happened to finish cost:
    # savings against it would be measured on part of the evidence.
    base_cost = costs[base] if excluded[base] != "failed" else None
    for j, (arm, part) in enumerate(zip(arms, counts, strict=True)):
        interval = intervals[j]
        cross = comparable
        delta_usd = delta_pct = None
        if cross and costs[j] is not None and base_cost is not None:
            delta_usd = costs[j] - base_cost  # type: ignore[operator]
            delta_pct = delta_usd / base_cost * 100 if base_cost else None
        close = (
            winner is not None
            and j != winner
            and j in rank
            and interval is not None
            and _overlap(interval, intervals[winner])
        )
        out.append(
            ArmComparison(
                arm_id=arm.id,
                label=arm.label,
                position=arm.position,
                status=arm.status,
                passed=arm.passed,
                runs=arm.runs,
                is_baseline=j == base,
                n=part.n,
                passed_items=part.passed,
                flaky_items=part.flaky,
                rate=rates[j],
                pass_hat_k=mean(part.pass_hat_k),
                pass_hat_k_items=len(part.pass_hat_k),
                wilson_low=interval.low if interval else None,
                wilson_high=interval.high if interval else None,
                cases=part.cases,
                priced_cases=len(part.costs),
                cost_per_case_usd=costs[j],
                cost_delta_usd=delta_usd,
                cost_delta_pct=delta_pct,
                regressions=part.regressions if cross else None,
                new_passes=part.new_passes if cross else None,
                mcnemar=_mcnemar(arm, arms[base], part) if cross and j != base else None,
                excluded=excluded[j],
                clears_bar=clears[j],
                rank=rank.get(j),
                not_distinguishable_from_winner=close,
                not_distinguishable=(
                    _not_distinguishable(part.n, arms[winner].label, counts[winner].n)  # type: ignore[index]
                    if close
                    else None
                ),
            )
        )
    verdict = _verdict(out, base, comparable=comparable, void_reason=void_reason, bar=bar)
    if scope is not None:
        verdict = _scoped(verdict, scope)
    return (
        tuple(out),
        tuple(arms[j].id for j in ranked),
        arms[winner].id if winner is not None else None,
        verdict,
    )


def _clears(rate: float | None, interval: Interval | None, bar: float) -> ClearsBar:
    if rate is None or interval is None or rate < bar:
        return "no"
    return "lower_bound" if interval.low >= bar else "point"


def _overlap(one: Interval, other: Interval | None) -> bool:
    return other is not None and one.low <= other.high and other.low <= one.high


def _not_distinguishable(n: int, winner: str, winner_n: int) -> str:
    at = f"n={n}" if n == winner_n else f"n={n} against n={winner_n}"
    return f"not distinguishable from {winner} at {at}"


def _mcnemar(arm: ArmEvidence, baseline: ArmEvidence, part: _Counts) -> McNemar | None:
    shared = part.n11 + part.b + part.c + part.n00
    if shared == 0:
        return None
    p_value = mcnemar_exact(part.b, part.c, part.n11, part.n00)
    discordant = part.b + part.c
    lead = (
        f"Paired check (exact McNemar, not the ranking rule) against {baseline.label}, "
        f"the baseline, on the {shared} items both scored: "
    )
    if discordant == 0:
        body = "they agree on every one (no discordant item), p = 1."
    else:
        body = (
            f"{part.b} passed only by {baseline.label}, {part.c} only by {arm.label}, "
            f"p = {_p(p_value)}."
        )
    return McNemar(
        b=part.b,
        c=part.c,
        n11=part.n11,
        n00=part.n00,
        discordant=discordant,
        shared_items=shared,
        p_value=p_value,
        sentence=lead + body,
    )
