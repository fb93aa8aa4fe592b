"""The sweep decision's evidence and results: what `decision.compare_sweep` takes and gives
(the rules are in `neens.domain.decision`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from neens.domain.sweeps import ArmStatus
from neens.errors import Unprocessable

if TYPE_CHECKING:
    from neens.domain.decision_frontier import Frontier

DEFAULT_BAR = 0.9
"""The pass-rate bar used when neither the query nor the sweep's pinned gate sets one: 90% of
the items scored, each passed on every scored repeat."""

UNATTRIBUTED = "Unattributed"
"""The label of the group of items no single agent name can be given to."""

BarSource = Literal["query", "gate", "default"]
Excluded = Literal["not_terminal", "failed", "not_pass_k"]
ClearsBar = Literal["lower_bound", "point", "no"]
Outcome = Literal["unavailable", "not_finished", "recommended", "no_arm_clears"]


# --- evidence -------------------------------------------------------------------------------------


class Repeat(NamedTuple):
    """One captured answer to one item by one child run: one session."""

    run_id: str
    session_id: str
    scored: bool
    """The item has a verdict from this run."""
    passed: bool | None
    """The verdict; None unless scored (a scored repeat without one is a ValueError)."""
    score: float | None
    cost_usd: float | None
    """None when the session is unpriced: unknown, never 0."""
    agent_name: str | None
    """The agent name the session itself reported; None when it reported none."""


@dataclass(frozen=True, slots=True)
class RepeatColumns:
    """An arm's repeats as parallel columns, one entry per captured answer (session).

    The columns of a SELECT of one row per answer (`from_rows`). Absent values are None:
    `passed` None unless scored, `cost_usd` None when unpriced (NaN reads as unpriced too),
    `agent_name` None (or empty) when none was reported. `tallies` adds them up per item.
    """

    item_id: Sequence[str]
    run_id: Sequence[str]
    scored: Sequence[bool]
    passed: Sequence[bool | None]
    cost_usd: Sequence[float | None]
    agent_name: Sequence[str | None]

    def __post_init__(self) -> None:
        lengths = {len(column) for column in self._columns()}
        if len(lengths) > 1:
            raise ValueError(f"the repeat columns differ in length: {sorted(lengths)}")

    def _columns(self) -> tuple[Sequence[object], ...]:
        return (
            self.item_id,
            self.run_id,
            self.scored,
            self.passed,
            self.cost_usd,
            self.agent_name,
        )

    def __len__(self) -> int:
        return len(self.item_id)

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]]) -> RepeatColumns:
        """From rows of (item_id, run_id, scored, passed, cost_usd, agent_name), in that order:
        the rows of a SELECT of those six columns, one per captured session."""
        table = rows if isinstance(rows, Sequence) else list(rows)
        if not table:
            return cls((), (), (), (), (), ())
        if len(table[0]) != 6:
            raise ValueError(
                "a repeat row is (item_id, run_id, scored, passed, cost_usd, agent_name), "
                f"got {len(table[0])} columns"
            )
        item_id, run_id, scored, passed, cost_usd, agent_name = (
            list(map(itemgetter(column), table)) for column in range(6)
        )
        return cls(item_id, run_id, scored, passed, cost_usd, agent_name)

    @classmethod
    def of(cls, repeats: Mapping[str, Sequence[Repeat]]) -> RepeatColumns:
        """From the readable form: item id -> its repeats."""
        item_ids: list[str] = []
        flat: list[Repeat] = []
        for item_id, reps in repeats.items():
            item_ids.extend(repeat(item_id, len(reps)))
            flat.extend(reps)
        if not flat:
            return cls((), (), (), (), (), ())
        run_id, _session_id, scored, passed, _score, cost_usd, agent_name = zip(*flat, strict=True)
        return cls(item_ids, run_id, scored, passed, cost_usd, agent_name)

    def tallies(self) -> ItemTallies:
        """The answers added up per item, in the order items first appear: one pass over the
        answers, the plain definition of each tally (the store computes the same in SQL)."""
        order: dict[str, int] = {}
        for item_id in self.item_id:
            order.setdefault(item_id, len(order))
        size = len(order)
        cases, scored, passed, unjudged = [0] * size, [0] * size, [0] * size, [0] * size
        runs: list[set[str]] = [set() for _ in range(size)]
        lowest: list[str | None] = [None] * size
        highest: list[str | None] = [None] * size
        costs: list[list[float]] = [[] for _ in range(size)]
        for item_id, run_id, was_scored, verdict, cost, agent in zip(*self._columns(), strict=True):
            i = order[item_id]
            cases[i] += 1
            if was_scored:
                scored[i] += 1
                runs[i].add(run_id)
                if verdict is None:
                    unjudged[i] += 1
                elif verdict:
                    passed[i] += 1
            if agent:
                low, high = lowest[i], highest[i]
                lowest[i] = agent if low is None else min(low, agent)
                highest[i] = agent if high is None else max(high, agent)
            if cost is not None and not math.isnan(cost):
                costs[i].append(float(cost))
        width = max((len(found) for found in costs), default=0)
        return ItemTallies(
            item_id=list(order),
            cases=cases,
            scored=scored,
            passed=passed,
            unjudged=unjudged,
            scored_runs=[len(found) for found in runs],
            lowest_agent=lowest,
            highest_agent=highest,
            costs=[[found[j] if j < len(found) else None for found in costs] for j in range(width)],
        )


@dataclass(frozen=True, slots=True)
class ItemTallies:
    """An arm's captured answers added up per item, one entry per item it captured: everything
    `compare_sweep` reads of them, keyed by item id (`RepeatColumns.tallies` adds them up from
    one row per answer; the server gives `ItemArrays` instead)."""

    item_id: Sequence[str]
    cases: Sequence[int]
    """Captured answers (sessions)."""
    scored: Sequence[int]
    """Scored answers."""
    passed: Sequence[int]
    """Scored answers that passed."""
    unjudged: Sequence[int]
    """Scored answers without a verdict: evidence that contradicts itself (a ValueError)."""
    scored_runs: Sequence[int]
    """Distinct runs with a scored answer."""
    lowest_agent: Sequence[str | None]
    highest_agent: Sequence[str | None]
    """The lowest and the highest agent name the answers reported (by code point; None and empty
    names do not count): equal when they all agree, None when none reported one."""
    costs: Sequence[Sequence[float | None]]
    """The costs of the priced answers, as columns aligned with `item_id`: column j holds, per
    item, one priced answer's cost or None. Kept one by one, never summed per item, so a mean
    over many items is exactly rounded once. (The store gives one column per run: a run
    captures an item at most once.)"""

    def __post_init__(self) -> None:
        lengths = {
            len(column)
            for column in (
                self.item_id,
                self.cases,
                self.scored,
                self.passed,
                self.unjudged,
                self.scored_runs,
                self.lowest_agent,
                self.highest_agent,
                *self.costs,
            )
        }
        if len(lengths) > 1:
            raise ValueError(f"the item tallies differ in length: {sorted(lengths)}")

    def __len__(self) -> int:
        return len(self.item_id)


NO_TALLIES = ItemTallies((), (), (), (), (), (), (), (), ())
"""An arm that captured nothing."""


# A run's verdict on one captured answer, one byte each (`RunAnswers.verdict`).
NOT_SCORED: Final = 0
PASSED: Final = 1
FAILED: Final = 2
NO_VERDICT: Final = 3
"""Scored without a verdict: evidence that contradicts itself (a ValueError when compared)."""

_Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class RunAnswers:
    """One child run's captured answers as arrays, one entry per answer (a run answers an item
    at most once): the item's position in the sweep's frozen item order, the run's verdict
    (`NOT_SCORED`, `PASSED`, `FAILED` or `NO_VERDICT`), the session's cost (NaN when unpriced:
    unknown, never 0) and the agent name it reported (an index into `names`; -1 for none)."""

    item: npt.NDArray[np.int32]
    verdict: npt.NDArray[np.uint8]
    cost: npt.NDArray[np.float64]
    agent: npt.NDArray[np.int32]
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        lengths = {len(self.item), len(self.verdict), len(self.cost), len(self.agent)}
        if len(lengths) > 1:
            raise ValueError(f"the run's answer columns differ in length: {sorted(lengths)}")
        if len(self.agent) and int(self.agent.max(initial=-1)) >= len(self.names):
            raise ValueError("an answer names an agent outside the run's names")

    def __len__(self) -> int:
        return len(self.item)


@dataclass(frozen=True, slots=True, eq=False)
class ItemArrays:
    """An arm's answers added up per item, as arrays over the sweep's frozen items in order
    (zeros for an item the arm never captured): what `compare_sweep` computes on. `add_up`
    builds it from the arm's runs; `ItemTallies` and `RepeatColumns` are turned into it."""

    names: tuple[str, ...]
    """The agent names reported; `lowest_agent` and `highest_agent` index it."""
    cases: _Ints
    scored: _Ints
    passed: _Ints
    unjudged: _Ints
    scored_runs: _Ints
    lowest_agent: _Ints
    highest_agent: _Ints
    """Per item, the lowest and the highest agent name its answers reported (by code point),
    as indexes into `names`; -1 when none reported one."""
    cost_item: _Ints
    cost: npt.NDArray[np.float64]
    """One entry per priced answer: its item's position and its cost, kept one by one."""

    def __post_init__(self) -> None:
        sizes = {
            len(column)
            for column in (
                self.cases,
                self.scored,
                self.passed,
                self.unjudged,
                self.scored_runs,
                self.lowest_agent,
                self.highest_agent,
            )
        }
        if len(sizes) > 1:
            raise ValueError(f"the item arrays differ in length: {sorted(sizes)}")
        if len(self.cost_item) != len(self.cost):
            raise ValueError("the priced answers' items and costs differ in length")

    def __len__(self) -> int:
        return len(self.cases)

    @classmethod
    def add_up(cls, runs: Sequence[RunAnswers], size: int) -> ItemArrays:
        """The answers of an arm's runs (`runs`) added up over `size` items. ValueError when a
        run answers an item twice or an answer's item is outside the `size` items."""
        names = sorted({name for run in runs for name in run.names})
        code = {name: i for i, name in enumerate(names)}
        cases = np.zeros(size, dtype=np.int64)
        scored = np.zeros(size, dtype=np.int64)
        passed = np.zeros(size, dtype=np.int64)
        unjudged = np.zeros(size, dtype=np.int64)
        none = len(names)
        lowest = np.full(size, none, dtype=np.int64)
        highest = np.full(size, -1, dtype=np.int64)
        cost_items: list[npt.NDArray[np.int32]] = []
        costs: list[npt.NDArray[np.float64]] = []
        for run in runs:
            if not len(run):
                continue
            if int(run.item.min()) < 0 or int(run.item.max()) >= size:
                raise ValueError(f"a run answered an item outside the sweep's {size} items")
            answered = np.bincount(run.item, minlength=size)
            if int(answered.max()) > 1:
                raise ValueError("a run answered an item more than once")
            cases += answered
            scored += np.bincount(run.item[run.verdict != NOT_SCORED], minlength=size)
            passed += np.bincount(run.item[run.verdict == PASSED], minlength=size)
            unjudged += np.bincount(run.item[run.verdict == NO_VERDICT], minlength=size)
            remap = np.array([*(code[name] for name in run.names), -1], dtype=np.int64)
            agent = remap[run.agent]  # -1 (none) picks the trailing -1
            named = agent >= 0
            voter, vote = run.item[named], agent[named]
            # One answer per item and run, so these are elementwise over the run's items.
            lowest[voter] = np.minimum(lowest[voter], vote)
            highest[voter] = np.maximum(highest[voter], vote)
            priced = ~np.isnan(run.cost)
            cost_items.append(run.item[priced])
            costs.append(run.cost[priced])
        lowest[lowest == none] = -1
        return cls(
            names=tuple(names),
            cases=cases,
            scored=scored,
            passed=passed,
            unjudged=unjudged,
            scored_runs=scored.copy(),  # a run answers an item at most once
            lowest_agent=lowest,
            highest_agent=highest,
            cost_item=np.concatenate(cost_items).astype(np.int64)
            if cost_items
            else np.zeros(0, dtype=np.int64),
            cost=np.concatenate(costs) if costs else np.zeros(0, dtype=np.float64),
        )


@dataclass(frozen=True, slots=True)
class ArmEvidence:
    """One arm of the sweep as rolled up, with every answer its runs captured."""

    id: str
    label: str
    position: int
    status: ArmStatus
    passed: bool | None
    """pass^k from the sweep roll-up: True only when all k runs finished green."""
    runs: int
    """k."""
    repeats: Mapping[str, Sequence[Repeat]] | RepeatColumns | ItemTallies | ItemArrays
    """Item id -> the repeats captured for it (items never captured are absent), the same
    repeats as columns, already added up per item, or added up as arrays over the sweep's
    items in order."""


@dataclass(frozen=True, slots=True)
class Bar:
    """The pass-rate bar an arm has to clear, and where it came from (always said)."""

    value: float
    source: BarSource

    def __post_init__(self) -> None:
        if not 0.0 <= self.value <= 1.0:
            raise Unprocessable(
                f"the bar is a pass rate between 0 and 1 (0.9 is 90%), got {self.value}",
                field="bar",
            )


# --- results --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class McNemar:
    """Exact McNemar of this arm against the baseline on the items both scored: a second,
    labelled line next to the overlap annotation, never the ranking rule."""

    b: int
    """Items the baseline passed and this arm did not."""
    c: int
    """Items this arm passed and the baseline did not."""
    n11: int
    """Items both passed."""
    n00: int
    """Items neither passed."""
    discordant: int
    """b + c; 0 means the two agree on every shared item (and the p-value is 1)."""
    shared_items: int
    """Items scored in both arms: n11 + b + c + n00."""
    p_value: float
    sentence: str


@dataclass(frozen=True, slots=True)
class ArmComparison:
    """One arm, over the items of its group (the whole sweep, or one agent's items)."""

    arm_id: str
    label: str
    position: int
    status: ArmStatus
    passed: bool | None
    """pass^k as the sweep rolled it up (the arm's own in every group)."""
    runs: int
    is_baseline: bool
    n: int
    """Items with at least one scored repeat."""
    passed_items: int
    """Items every scored repeat of which passed."""
    flaky_items: int
    """Items with both passed and failed scored repeats: in n, not passes."""
    rate: float | None
    """passed_items / n; None when n = 0 (no data, never 0%). The strict rate: an item counts
    only when every scored repeat passed, however many it had."""
    pass_hat_k: float | None
    """The unbiased pass^k at this arm's k: the mean over items with at least k scored repeats
    of C(c, k) / C(n, k) (`neens.domain.pass_k`), never the biased (c/n)^k; None when no item
    has k scored repeats. Beside `rate`, not instead of it: items scored fewer than k times are
    in `rate` and left out here."""
    pass_hat_k_items: int
    """Items with at least k scored repeats: pass_hat_k's denominator."""
    wilson_low: float | None
    wilson_high: float | None
    """The 95% Wilson interval over items; None when n = 0."""
    cases: int
    """Captured repeats (sessions)."""
    priced_cases: int
    cost_per_case_usd: float | None
    """Mean cost over the priced cases; None when none is priced (unpriced, never free)."""
    cost_delta_usd: float | None
    """This arm's cost per case minus the baseline's; None when either is unknown or void."""
    cost_delta_pct: float | None
    """The delta in percent of the baseline's cost (-84.0 is 84% cheaper); None also when the
    baseline costs 0."""
    regressions: int | None
    """Items the baseline passed on all its k runs and this arm, scored, did not pass; None
    when the sweep is void."""
    new_passes: int | None
    mcnemar: McNemar | None
    """None for the baseline, on a void sweep, and when no item was scored by both."""
    excluded: Excluded | None
    clears_bar: ClearsBar
    rank: int | None
    """1-based place on the leaderboard; None when not ranked (excluded, or void)."""
    not_distinguishable_from_winner: bool
    not_distinguishable: str | None
    """The annotation, e.g. "not distinguishable from sonnet at n=40"; None when it does not
    apply."""


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    recommended_arm_id: str | None
    recommended_label: str | None
    cost_per_case_usd: float | None
    """The recommended arm's; None when it is unpriced (or nothing is recommended)."""
    savings_usd: float | None
    """Baseline cost per case minus the recommended arm's (positive: cheaper); None unknown."""
    savings_pct: float | None
    """savings_usd in percent of the baseline's cost; None unknown or when the baseline costs 0."""
    clears_on: Literal["lower_bound", "point"] | None
    sentence: str


@dataclass(frozen=True, slots=True)
class AgentComparison:
    """The comparison restricted to the items of one agent (or of Unattributed)."""

    agent_name: str | None
    """The name the sessions reported; None for Unattributed."""
    label: str
    items: int
    """Dataset items in this group."""
    unnamed_items: int
    """Unattributed only: items captured whose sessions reported no agent name."""
    conflicting_items: int
    """Unattributed only: items whose sessions reported different agent names."""
    arms: tuple[ArmComparison, ...]
    leaderboard: tuple[str, ...]
    winner_arm_id: str | None
    verdict: Verdict


@dataclass(frozen=True, slots=True)
class SweepComparison:
    comparable: bool
    void_reason: str | None
    bar: Bar
    baseline_arm_id: str
    item_count: int
    """Frozen items of the dataset version."""
    uncaptured_items: int
    """Items no arm captured: they are in no n and no agent group."""
    arms: tuple[ArmComparison, ...]
    """In position order."""
    leaderboard: tuple[str, ...]
    """Arm ids, best first; empty when not comparable."""
    winner_arm_id: str | None
    verdict: Verdict
    agents: tuple[AgentComparison, ...]
    frontier: Frontier | None
    """Each arm by cost per case against pass rate; None for a void sweep."""
