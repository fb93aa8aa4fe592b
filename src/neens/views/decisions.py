"""A sweep's decision: its evidence read once, and `domain.decision.compare_sweep` over it.

Every number of the comparison (rates, intervals, costs, regressions, the ranking, the verdict
sentence, per agent) comes from that one function; the API, the CLI, the MCP tools and the share
page render it and never re-derive a ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from neens.domain.decision import (
    DEFAULT_BAR,
    ArmEvidence,
    Bar,
    ItemArrays,
    SweepComparison,
    compare_sweep,
    regression_items,
)
from neens.domain.stats import mean
from neens.domain.sweeps import SweepRollup
from neens.errors import Conflict, NotFound
from neens.store import decisions as store
from neens.store import run_evidence
from neens.store.db import Database
from neens.store.failure_modes import annotations_for_sessions, failure_modes_named
from neens.store.models import ModelSweep
from neens.views.sweeps import SweepStanding, sweep_standing


@dataclass(frozen=True, slots=True)
class SweepDecision:
    view: SweepStanding
    comparison: SweepComparison
    answers: dict[str, ItemArrays]
    """Arm id -> its answers added up per item, as the comparison read them (the drill-down
    finds its regressed items in them)."""
    item_ids: Sequence[str]

    @property
    def sweep(self) -> ModelSweep:
        return self.view.sweep

    @property
    def rollup(self) -> SweepRollup:
        return self.view.rollup


def bar_of(sweep: ModelSweep, asked: float | None) -> Bar:
    """The bar and where it came from: the query's, else the sweep's pinned gate's
    `min_pass_rate`, else the documented default (always said, never silent)."""
    if asked is not None:
        return Bar(asked + 0.0, "query")  # `+ 0.0`: a bar of -0 is 0 (not echoed as -0.0)
    pinned = dict(sweep.gate).get("min_pass_rate")
    if isinstance(pinned, int | float) and not isinstance(pinned, bool):
        return Bar(float(pinned), "gate")
    return Bar(DEFAULT_BAR, "default")


async def sweep_decision(
    db: Database,
    project_id: str,
    sweep_id: str,
    *,
    bar: float | None = None,
    baseline_arm_id: str | None = None,
) -> SweepDecision:
    """The comparison of the sweep as it is now (a void sweep compares nothing across arms)."""
    view = await sweep_standing(db, project_id, sweep_id)
    rollup = view.rollup
    version_id = view.sweep.dataset_version_id
    async with db.read() as s:
        item_ids = await store.frozen_item_ids(s, version_id)
        by_run, packed = await run_evidence.runs_answers(
            s, [run_id for arm in rollup.arms for run_id in arm.run_ids], item_ids, version_id
        )
    await run_evidence.store_packed(db, packed)
    answers = {
        arm.id: ItemArrays.add_up([by_run[run_id] for run_id in arm.run_ids], len(item_ids))
        for arm in rollup.arms
    }
    arms = [
        ArmEvidence(
            id=arm.id,
            label=arm.label,
            position=position,
            status=arm.status,
            passed=arm.passed,
            runs=arm.runs,
            repeats=answers[arm.id],
        )
        for position, arm in enumerate(rollup.arms)
    ]
    comparison = compare_sweep(
        arms,
        item_ids,
        comparable=rollup.status != "void",
        void_reason=rollup.void_reason,
        bar=bar_of(view.sweep, bar),
        baseline_arm_id=baseline_arm_id,
    )
    return SweepDecision(view, comparison, answers, item_ids)


@dataclass(frozen=True, slots=True)
class Signal:
    """The one failure signal a drill-down groups by, for the whole response, and its name."""

    kind: str
    """`annotation` (failure modes people confirmed), `classifier` (a classifier judge's
    labels) or `none` (nothing classifies these)."""
    name: str | None
    """The classifier judge's name; None for the other kinds."""


@dataclass(frozen=True, slots=True)
class RegressedItem:
    item_id: str
    input: str
    expected_output: str | None
    baseline_passed_runs: int
    baseline_scored_runs: int
    passed_runs: int
    scored_runs: int
    score: float | None
    """The mean of this arm's scores on the item's scored answers."""
    answer: str | None
    """What this arm answered on a failing run."""
    reason: str | None
    """What the judges said of that answer."""
    session_ids: list[str]
    mode: str | None


@dataclass(frozen=True, slots=True)
class Regressions:
    decision: SweepDecision
    arm_id: str
    signal: Signal
    modes: list[tuple[str, int]]
    """(label, regressed items), most first; over the whole set, not the page."""
    mode_ids: dict[str, str]
    """Label -> the failure mode (`fm_…`) it resolves to in the taxonomy, when it does."""
    unclassified: int
    items: list[RegressedItem]
    total: int
    new_passes: int


def _runs(answers: list[store.Answer]) -> tuple[int, int]:
    """(runs that passed the item, runs that scored it) over an arm's answers."""
    scored = {a.run_id for a in answers if a.status == "scored"}
    passed = {a.run_id for a in answers if a.status == "scored" and a.passed}
    return len(passed), len(scored)


async def arm_regressions(
    db: Database,
    project_id: str,
    sweep_id: str,
    arm_id: str,
    *,
    limit: int,
    baseline_arm_id: str | None = None,
) -> Regressions:
    """Where an arm breaks against the baseline: its regressed items (by `regression_items`,
    the rule the comparison counts with), grouped by one failure signal, the first `limit` with
    their prompts, answers and the judges' reasons. Refused (409) on a void sweep: a regression
    is a cross-arm claim."""
    decision = await sweep_decision(db, project_id, sweep_id, baseline_arm_id=baseline_arm_id)
    if not decision.comparison.comparable:
        raise Conflict(
            f"sweep {sweep_id} is void, so no arm is compared with another: "
            f"{decision.comparison.void_reason}",
            field="sweep_id",
        )
    arms = {arm.id: arm for arm in decision.rollup.arms}
    if arm_id not in arms:
        raise NotFound(f"no arm {arm_id!r} in sweep {sweep_id}", field="arm_id")
    base_id = decision.comparison.baseline_arm_id
    answers, item_ids = decision.answers, decision.item_ids

    def evidence(ident: str) -> ArmEvidence:
        arm = arms[ident]
        return ArmEvidence(
            id=arm.id,
            label=arm.label,
            position=0,
            status=arm.status,
            passed=arm.passed,
            runs=arm.runs,
            repeats=answers[ident],
        )

    regressed, newly = regression_items(evidence(arm_id), evidence(base_id), item_ids)
    async with db.read() as s:
        mine = await store.arm_answers(s, sweep_id, arm_id, regressed)
        theirs = await store.arm_answers(s, sweep_id, base_id, regressed)
        failing = {
            item: [a for a in mine.get(item, []) if a.status == "scored" and not a.passed]
            for item in regressed
        }
        failing_pks = [a.session_pk for found in failing.values() for a in found]
        notes = await store.judge_notes(s, failing_pks)
        confirmed = await annotations_for_sessions(s, project_id, failing_pks)
        texts = await store.item_texts(s, regressed[:limit])
        signal, labels = _signal(notes, confirmed)
        mode_ids = await failure_modes_named(s, project_id, set(labels.values()))
    modes_of = {
        item: _mode([labels.get(a.session_pk) for a in failing[item]]) for item in regressed
    }
    counts: dict[str, int] = {}
    for mode in modes_of.values():
        if mode is not None:
            counts[mode] = counts.get(mode, 0) + 1
    reasons = _reasons(notes)
    items = []
    for item in regressed[:limit]:
        text = texts[item]
        base_passed, base_scored = _runs(theirs.get(item, []))
        passed, scored = _runs(mine.get(item, []))
        scores = [a.score for a in mine.get(item, []) if a.score is not None]
        first = failing[item][0] if failing[item] else None
        items.append(
            RegressedItem(
                item_id=item,
                input=text.input,
                expected_output=text.expected_output,
                baseline_passed_runs=base_passed,
                baseline_scored_runs=base_scored,
                passed_runs=passed,
                scored_runs=scored,
                score=mean(scores),
                answer=None if first is None else first.output,
                reason=None if first is None else reasons.get(first.session_pk),
                session_ids=[a.session_id for a in mine.get(item, [])],
                mode=modes_of[item],
            )
        )
    return Regressions(
        decision=decision,
        arm_id=arm_id,
        signal=signal,
        modes=sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])),
        mode_ids=mode_ids,
        unclassified=sum(1 for mode in modes_of.values() if mode is None),
        items=items,
        total=len(regressed),
        new_passes=len(newly),
    )


def _signal(
    notes: list[store.JudgeNote], confirmed: dict[int, list[str]]
) -> tuple[Signal, dict[int, str]]:
    """The one signal for the whole response, and its label per session. People's confirmed
    failure modes first (a session confirmed in several takes the first in the taxonomy's
    order); else the classifier judge that labelled most of these sessions (ties by name); else
    `none`. Never a blend: a regression is never counted under two names."""
    annotated = {pk: names[0] for pk, names in confirmed.items() if names}
    if annotated:
        return Signal("annotation", None), annotated
    labelled: dict[tuple[str, str], dict[int, str]] = {}
    for note in notes:
        if note.judge_type == "classifier" and note.label:
            labelled.setdefault((note.judge_id, note.judge_name), {})[note.session_pk] = note.label
    if not labelled:
        return Signal("none", None), {}
    (_, name), labels = min(labelled.items(), key=lambda kv: (-len(kv[1]), kv[0][1]))
    return Signal("classifier", name), labels


def _mode(labels: list[str | None]) -> str | None:
    """One label per regressed item, so no regression is counted under two names: the label
    most of its failing answers got (ties alphabetically); None when none got one."""
    named = [label for label in labels if label]
    if not named:
        return None
    return min(set(named), key=lambda label: (-named.count(label), label))


def _reasons(notes: list[store.JudgeNote]) -> dict[int, str]:
    """Per session, the reason of the first judge that did not pass it, else the first reason."""
    first: dict[int, str] = {}
    failing: dict[int, str] = {}
    for note in notes:
        if note.judge_type == "classifier" or not note.reason:
            continue
        first.setdefault(note.session_pk, note.reason)
        if note.passed is False:
            failing.setdefault(note.session_pk, note.reason)
    return {**first, **failing}
