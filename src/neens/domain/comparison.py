"""Comparisons of pre-prod runs: one run against its baseline, and N versions side by side.

`compare_run` is GET /preprod-evals/{id}/comparison: the per-item pass/fail matrix, the
regression set, the new passes, and the cohorts' average cost, latency and step-count deltas.
`compare_versions` is GET /preprod-compare: N runs over the same frozen prompts, one row per
prompt and a cell per run, each run measured against the one the user picked as the baseline.

Both share the item verdict of `neens.domain.preprod` (an error is a failure; pending and
captured items have no verdict yet) and its cohort averages (unpriced sessions left out, None
when nothing is known). A delta is None whenever either side is unknown: a cost delta against a
baseline with no priced session would be a comparison against a made-up rate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from neens.domain.gate import run_summary
from neens.domain.preprod import (
    CohortStats,
    ItemOutcome,
    ItemStatus,
    candidate_verdict,
    is_new_pass,
    is_regression,
)
from neens.errors import Unprocessable

__all__ = [
    "Comparison",
    "ComparisonRow",
    "RunColumn",
    "VersionCell",
    "VersionRow",
    "VersionSummary",
    "VersionsComparison",
    "compare_run",
    "compare_versions",
]


# --- one run against its baseline ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """One frozen prompt: the candidate's verdict next to the baseline's."""

    item_id: str
    position: int
    input: str
    expected_output: str | None
    status: ItemStatus
    candidate_passed: bool | None
    """False for an item in status error; None while pending or captured."""
    baseline_passed: bool | None
    regression: bool
    new_pass: bool
    score: float | None
    output: str | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Comparison:
    """The response of GET /preprod-evals/{id}/comparison."""

    rows: tuple[ComparisonRow, ...]
    """One per item, in frozen order."""
    regressions: tuple[str, ...]
    """Item ids, in frozen order."""
    new_passes: tuple[str, ...]
    cost_usd_delta: float | None
    """Candidate avg minus baseline avg, over priced sessions; None when a side has none."""
    latency_ms_delta: float | None
    step_count_delta: float | None
    candidate: CohortStats
    baseline: CohortStats | None


def compare_run(
    items: Iterable[ItemOutcome], candidate: CohortStats, baseline: CohortStats | None
) -> Comparison:
    """Compare a run's items with their baseline verdicts, and its cohort with the baseline's.

    Rows are in frozen order (by position, then item id); an item id may appear only once.
    """
    ordered = _frozen_order(items)
    rows = tuple(
        ComparisonRow(
            item_id=item.item_id,
            position=item.position,
            input=item.input,
            expected_output=item.expected_output,
            status=item.status,
            candidate_passed=candidate_verdict(item),
            baseline_passed=item.baseline_passed,
            regression=is_regression(item),
            new_pass=is_new_pass(item),
            score=item.score,
            output=item.output,
            error=item.error,
        )
        for item in ordered
    )
    return Comparison(
        rows=rows,
        regressions=tuple(row.item_id for row in rows if row.regression),
        new_passes=tuple(row.item_id for row in rows if row.new_pass),
        cost_usd_delta=_delta(
            candidate.avg_cost_usd, None if baseline is None else baseline.avg_cost_usd
        ),
        latency_ms_delta=_delta(
            candidate.avg_latency_ms, None if baseline is None else baseline.avg_latency_ms
        ),
        step_count_delta=_delta(
            candidate.avg_step_count, None if baseline is None else baseline.avg_step_count
        ),
        candidate=candidate,
        baseline=baseline,
    )


# --- N versions side by side --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunColumn:
    """One run to line up: its identity, its items and its candidate cohort."""

    run_id: str
    version_label: str
    model: str | None
    items: Sequence[ItemOutcome]
    stats: CohortStats


@dataclass(frozen=True, slots=True)
class VersionCell:
    """One run's result for one prompt."""

    run_id: str
    status: ItemStatus
    passed: bool | None
    """The run's verdict: False for an error, None while pending or captured."""
    score: float | None
    output: str | None
    """None when nothing was captured; the page words that, not this layer."""
    regressed_vs_baseline: bool
    """The baseline run passed this prompt and this run failed it. Never for the baseline."""
    new_pass_vs_baseline: bool
    """The baseline run failed this prompt and this run passed it. Never for the baseline."""


@dataclass(frozen=True, slots=True)
class VersionRow:
    """One frozen prompt across every run, in the order the runs were given."""

    item_id: str
    position: int
    input: str
    expected_output: str | None
    cells: tuple[VersionCell, ...]


@dataclass(frozen=True, slots=True)
class VersionSummary:
    """One run's column header: its pass rate, cohort averages and changes vs the baseline."""

    run_id: str
    version_label: str
    model: str | None
    is_baseline: bool
    pass_rate: float | None
    avg_cost_usd: float | None
    priced_sessions: int
    sessions: int
    avg_latency_ms: float | None
    avg_step_count: float | None
    regressions_vs_baseline: int | None
    """None for the baseline run itself: it is not compared with itself."""
    new_passes_vs_baseline: int | None


@dataclass(frozen=True, slots=True)
class VersionsComparison:
    """The response of GET /preprod-compare."""

    baseline_run_id: str
    runs: tuple[VersionSummary, ...]
    rows: tuple[VersionRow, ...]
    """In the baseline run's frozen order."""


def compare_versions(runs: Sequence[RunColumn], baseline_run_id: str) -> VersionsComparison:
    """Line up runs of the same frozen prompts, each measured against the baseline run.

    "Against the baseline" means the baseline run's own verdict on the same prompt (not each
    run's stamped `baseline_passed`, which may come from a different baseline): a cell regressed
    when the baseline run passed the prompt and this run failed it (an error is a failure).

    Refused with `Unprocessable`: no runs, a run listed twice or runs whose item ids differ
    (field "runs"), and a baseline that is not among the runs (field "baseline"). That the runs
    snapshot the same golden version is the caller's check; equal item sets are the part this
    function depends on.
    """
    if not runs:
        raise Unprocessable("runs must name at least one run", field="runs")
    counts = Counter(run.run_id for run in runs)
    duplicates = sorted(run_id for run_id, count in counts.items() if count > 1)
    if duplicates:
        raise Unprocessable(f"runs lists {', '.join(duplicates)} more than once", field="runs")
    by_id = {run.run_id: run for run in runs}
    if baseline_run_id not in by_id:
        raise Unprocessable(
            f"baseline {baseline_run_id!r} is not one of the compared runs", field="baseline"
        )

    baseline = _frozen_order(by_id[baseline_run_id].items)
    baseline_verdicts = {item.item_id: candidate_verdict(item) for item in baseline}
    columns: dict[str, dict[str, ItemOutcome]] = {}
    for run in runs:
        column = {item.item_id: item for item in _frozen_order(run.items)}
        if column.keys() != baseline_verdicts.keys():
            missing = len(baseline_verdicts.keys() - column.keys())
            extra = len(column.keys() - baseline_verdicts.keys())
            raise Unprocessable(
                f"run {run.run_id} does not have the same items as baseline {baseline_run_id} "
                f"({missing} missing, {extra} not in the baseline); compare runs of one golden "
                "version",
                field="runs",
            )
        columns[run.run_id] = column

    def cell(run: RunColumn, item_id: str) -> VersionCell:
        item = columns[run.run_id][item_id]
        against = replace(item, baseline_passed=baseline_verdicts[item_id])
        compared = run.run_id != baseline_run_id
        return VersionCell(
            run_id=run.run_id,
            status=item.status,
            passed=candidate_verdict(item),
            score=item.score,
            output=item.output,
            regressed_vs_baseline=compared and is_regression(against),
            new_pass_vs_baseline=compared and is_new_pass(against),
        )

    rows = tuple(
        VersionRow(
            item_id=item.item_id,
            position=item.position,
            input=item.input,
            expected_output=item.expected_output,
            cells=tuple(cell(run, item.item_id) for run in runs),
        )
        for item in baseline
    )

    summaries = []
    for index, run in enumerate(runs):
        cells = [row.cells[index] for row in rows]
        compared = run.run_id != baseline_run_id
        summaries.append(
            VersionSummary(
                run_id=run.run_id,
                version_label=run.version_label,
                model=run.model,
                is_baseline=not compared,
                pass_rate=run_summary(run.items).pass_rate,
                avg_cost_usd=run.stats.avg_cost_usd,
                priced_sessions=run.stats.priced_sessions,
                sessions=run.stats.sessions,
                avg_latency_ms=run.stats.avg_latency_ms,
                avg_step_count=run.stats.avg_step_count,
                regressions_vs_baseline=(
                    sum(c.regressed_vs_baseline for c in cells) if compared else None
                ),
                new_passes_vs_baseline=(
                    sum(c.new_pass_vs_baseline for c in cells) if compared else None
                ),
            )
        )
    return VersionsComparison(baseline_run_id=baseline_run_id, runs=tuple(summaries), rows=rows)


# --- helpers ------------------------------------------------------------------------------------


def _frozen_order(items: Iterable[ItemOutcome]) -> list[ItemOutcome]:
    ordered = sorted(items, key=lambda item: (item.position, item.item_id))
    counts = Counter(item.item_id for item in ordered)
    duplicates = sorted(item_id for item_id, count in counts.items() if count > 1)
    if duplicates:
        raise ValueError(f"item {duplicates[0]!r} appears more than once in a run")
    return ordered


def _delta(candidate: float | None, baseline: float | None) -> float | None:
    """candidate - baseline, or None when either is unknown (never a comparison with 0)."""
    if candidate is None or baseline is None:
        return None
    return candidate - baseline
