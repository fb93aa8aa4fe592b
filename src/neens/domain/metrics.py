"""The per-metric rollup of a pre-prod run: GET /preprod-evals/{id}/metrics, one row per judge.

Unscored verdicts are counted, never averaged: a judge that failed to run is not a judge that
gave 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from neens.domain.stats import mean, proportion


@dataclass(frozen=True, slots=True)
class JudgeScore:
    """One judge's verdict on one captured session of a run (the newest, if re-scored)."""

    judge_id: str
    judge_name: str
    session_id: str
    score: float | None
    passed: bool | None
    unscored: bool
    """The judge could not score the session (it errored or abstained)."""


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One row of GET /preprod-evals/{id}/metrics."""

    metric: str
    """The judge's name."""
    judge_id: str
    avg_score: float | None
    """Over scored sessions that carry a score; None when there is none."""
    pass_rate: float | None
    """Over scored sessions that carry a verdict; None when there is none."""
    sessions_scored: int
    sessions_unscored: int


def metrics_rollup(scores: Iterable[JudgeScore]) -> list[MetricRow]:
    """One row per judge, sorted by metric name (then judge id); [] for no scores.

    Unscored verdicts are counted in `sessions_unscored` and kept out of every average, so a
    judge that failed to run is not read as a judge that gave 0. The caller passes one verdict
    per (judge, session): a duplicate would count a session twice, so it is refused.
    """
    by_judge: dict[str, list[JudgeScore]] = {}
    seen: set[tuple[str, str]] = set()
    for score in scores:
        key = (score.judge_id, score.session_id)
        if key in seen:
            raise ValueError(f"judge {score.judge_id!r} scored session {score.session_id!r} twice")
        seen.add(key)
        by_judge.setdefault(score.judge_id, []).append(score)

    rows = []
    for judge_id, verdicts in by_judge.items():
        scored = [verdict for verdict in verdicts if not verdict.unscored]
        values = [verdict.score for verdict in scored if verdict.score is not None]
        passes = [verdict.passed for verdict in scored if verdict.passed is not None]
        rows.append(
            MetricRow(
                metric=verdicts[0].judge_name,
                judge_id=judge_id,
                avg_score=mean(values),
                pass_rate=proportion(passes.count(True), len(passes)),
                sessions_scored=len(scored),
                sessions_unscored=len(verdicts) - len(scored),
            )
        )
    return sorted(rows, key=lambda row: (row.metric, row.judge_id))
