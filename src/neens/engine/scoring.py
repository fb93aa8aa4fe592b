"""Scoring a pre-prod run: every judge on every captured session, then the baseline and status.

Job `preprod.score`, dispatched once per run when its last item is captured: in runner mode,
and in push mode only to recover items a push job captured but could not judge (it stopped
mid-run); a push job scores its answers itself as they are stored (`engine/push.py`), with the
per-item function and the writers here. It is safe to run again after a crash: items already
scored are skipped, and an item's scores are replaced, not added to, when it is scored again.

For each captured item, each judge on the run scores the session (case: the frozen prompt, the
session's final output, the expected output). Scores are stored with `source: preprod`, next to
the prompt and raw reply behind them. The item's score is the mean of the run's judges' scores
(components of a composite are stored too, for per-metric floors, but do not count twice); it
passes at 0.7 or above. An item whose judges all failed to score is `error`, with their reasons;
a judge that raises on one answer is that answer's unscored verdict, not the run's failure.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from neens.domain.baseline import parse_range
from neens.domain.judges import JudgeCase, Verdict, passes
from neens.domain.preprod import candidate_verdict, cohort_stats, is_regression
from neens.domain.stats import mean
from neens.engine.batching import batch_writer, refusal, write_or_split
from neens.engine.judging import CaseJudge, Outbound, outbound_of
from neens.queue.worker import JobContext
from neens.store.db import Database
from neens.store.insights import add_insight
from neens.store.judges import JudgeInfo, judges_by_id
from neens.store.models import PreprodItem, PreprodRun, Score, TraceSession
from neens.store.review import item_outcome
from neens.store.run_lifecycle import move
from neens.store.scores import insert_scores, score_values
from neens.store.tenancy import owned_by
from neens.store.types import storable_text, utcnow

log = logging.getLogger("neens.scoring")

PASS_LABELS = frozenset({"pass", "passed"})
FAIL_LABELS = frozenset({"fail", "failed"})


async def score_run(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Score the captured items, then finish the run; again while content that arrived late
    (`store.rescoring`) has put an item back to captured before the run could finish."""
    while await _score_captured(ctx, str(payload["run_id"])):
        pass
    ctx.notify()


async def _score_captured(ctx: JobContext, run_id: str) -> bool:
    """One pass; True when the run is still running with captured items left to score."""
    db = ctx.db
    async with db.read() as s:
        run = await s.get(PreprodRun, run_id)
        if run is None or run.status != "running":
            return False
        judges = await judges_by_id(s, run.project_id, list(run.judge_ids))
        rows = (
            await s.execute(
                select(PreprodItem, TraceSession.output, TraceSession.pk)
                .join(TraceSession, TraceSession.pk == PreprodItem.session_pk)
                .where(PreprodItem.run_id == run_id, PreprodItem.status == "captured")
                .order_by(PreprodItem.position)
            )
        ).all()
    slots = asyncio.Semaphore(ctx.settings.judge_concurrency)
    outbound = outbound_of(ctx)
    names = {judge_id: info.name for judge_id, info in judges.items()}

    async def store(batch: list[Judged]) -> None:
        await write_or_split(
            batch,
            lambda entries: _store_items(db, run, names, entries),
            lambda judged, exc: mark_refused(db, run.id, judged, exc),
            "verdicts",
        )

    async with batch_writer(store) as writer:

        async def one(item: PreprodItem, output: str | None, session_pk: int) -> None:
            async with slots:
                case = JudgeCase(item.input, output, item.expected_output)
                judged = await judge_item(
                    judges, run.judge_ids, item.item_id, session_pk, case, outbound
                )
            await writer.put(judged)

        await asyncio.gather(*(one(item, output, pk) for item, output, pk in rows))
    await finish_run(db, run_id)
    async with db.read() as s:
        left = await s.scalar(
            select(PreprodItem.pk)
            .join(PreprodRun, PreprodRun.id == PreprodItem.run_id)
            .where(
                PreprodItem.run_id == run_id,
                PreprodItem.status == "captured",
                PreprodRun.status == "running",
            )
            .limit(1)
        )
    return left is not None


@dataclass(frozen=True, slots=True)
class Judged:
    """One item's verdicts, ready to be stored."""

    item_id: str
    session_pk: int
    output: str | None
    """The session's output the judges saw."""
    verdicts: dict[str, Verdict]
    """Every judge evaluated for the item, composite components included."""
    top: list[tuple[str, Verdict]]
    """The run's own judges, whose scores make the item's score."""


async def judge_item(
    judges: dict[str, JudgeInfo],
    judge_ids: list[str],
    item_id: str,
    session_pk: int,
    case: JudgeCase,
    outbound: Outbound,
) -> Judged:
    """Every judge of the run on one item's case. A judge that raises on this case is this
    case's unscored verdict, with the reason, so one odd answer costs its own item only."""
    judge = CaseJudge(judges, case, outbound)
    top = []
    for judge_id in judge_ids:
        try:
            verdict = await judge.verdict(judge_id)
        except Exception as exc:
            log.exception("judge %s failed on item %s", judge_id, item_id)
            verdict = Verdict.unscored(
                "judge_call_failed",
                f"the judge failed on this answer ({type(exc).__name__}: {exc})",
            )
            judge.verdicts[judge_id] = verdict
        top.append((judge_id, verdict))
    return Judged(item_id, session_pk, case.output, judge.verdicts, top)


async def _store_items(
    db: Database, run: PreprodRun, names: dict[str, str], batch: list[Judged]
) -> None:
    async with db.write() as s:
        await store_items(s, run, names, batch)


async def mark_refused(db: Database, run_id: str, judged: Judged, exc: Exception) -> None:
    """The item errors with why the database refused its verdicts, so one item cannot hold its
    run's scoring hostage."""
    log.warning("the verdicts of item %s of run %s were refused", judged.item_id, run_id)
    error = f"its scores cannot be stored: the database refused them ({refusal(exc)})"
    async with db.write() as s:
        await s.execute(
            update(PreprodItem)
            .where(PreprodItem.run_id == run_id, PreprodItem.item_id == judged.item_id)
            .values(
                status="error",
                error=error,
                scored_at=utcnow(),
            )
        )


async def store_items(
    s: AsyncSession, run: PreprodRun, names: dict[str, str], batch: list[Judged]
) -> None:
    """Replace the items' scores (a re-run never adds a second set) and set their verdicts, in
    the caller's transaction: four statements for the whole batch.

    The sessions are read under their row locks first: a verdict on an output that is no longer
    the session's is not stored, and its item stays as it was, for the next pass to judge."""
    if not batch:
        return
    outputs = dict(
        (
            await s.execute(
                select(TraceSession.pk, TraceSession.output)
                .where(TraceSession.pk.in_([judged.session_pk for judged in batch]))
                .order_by(TraceSession.pk)
                .with_for_update()
            )
        ).all()
    )
    batch = [judged for judged in batch if outputs.get(judged.session_pk) == judged.output]
    if not batch:
        return
    await s.execute(
        delete(Score).where(
            Score.run_id == run.id, Score.item_id.in_([judged.item_id for judged in batch])
        )
    )
    await insert_scores(
        s,
        [
            score_values(
                verdict,
                project_id=run.project_id,
                session_pk=judged.session_pk,
                judge_id=judge_id,
                judge_name=names.get(judge_id, judge_id),
                source="preprod",
                run_id=run.id,
                item_id=judged.item_id,
            )
            for judged in batch
            for judge_id, verdict in judged.verdicts.items()
        ],
    )
    now = utcnow()
    rows = []
    for judged in batch:
        item_score = mean(v.score for _, v in judged.top if v.score is not None)
        row: dict[str, Any] = {"b_item": judged.item_id, "b_scored_at": now}
        if item_score is not None:
            row.update(
                b_status="scored", b_score=item_score, b_passed=passes(item_score), b_error=None
            )
        else:
            reasons = "; ".join(f"{names.get(j, j)}: {v.reason}" for j, v in judged.top)
            error = storable_text(f"no judge could score this item ({reasons})")
            row.update(b_status="error", b_score=None, b_passed=None, b_error=error)
        rows.append(row)
    items = cast(Table, PreprodItem.__table__)
    await s.execute(
        update(items)
        .where(items.c.run_id == run.id, items.c.item_id == bindparam("b_item"))
        .values(
            status=bindparam("b_status"),
            score=bindparam("b_score"),
            passed=bindparam("b_passed"),
            error=bindparam("b_error"),
            scored_at=bindparam("b_scored_at"),
        ),
        rows,
    )
    await s.flush()


async def finish_run(db: Database, run_id: str) -> None:
    """Resolve the baseline, stamp `baseline_passed`, and set the run's final status."""
    async with db.write() as s:
        await finish_run_in(s, run_id)


async def finish_run_in(s: AsyncSession, run_id: str) -> None:
    """`finish_run` in the caller's transaction, so the write that scores a run's last item can
    finish the run with it; does nothing while an item is pending or captured."""
    run = await s.scalar(select(PreprodRun).where(PreprodRun.id == run_id).with_for_update())
    if run is None or run.status != "running":
        return
    items = list(
        await s.scalars(
            select(PreprodItem).where(PreprodItem.run_id == run_id).order_by(PreprodItem.position)
        )
    )
    if any(item.status in ("pending", "captured") for item in items):
        return
    verdicts, cohort = await _baseline(s, run, items)
    regressions = 0
    for item in items:
        item.baseline_passed = verdicts.get(item.item_id)
        if is_regression(item_outcome(item)):
            regressions += 1
    run.baseline_cohort = cohort
    if not any(item.status == "scored" for item in items):
        await move(s, run, "failed", error="no item could be scored (see each item's error)")
        return
    await move(s, run, "completed_with_regressions" if regressions else "completed")
    if regressions:
        await add_insight(
            s,
            run.project_id,
            kind="preprod_regression",
            title=(
                f"Pre-prod regression: {regressions} item{'s' if regressions > 1 else ''} "
                f"regressed in {run.version_label}"
            ),
            run_id=run.id,
            details={
                "runId": run.id,
                "runName": run.name,
                "versionLabel": run.version_label,
                "regressions": regressions,
                "items": len(items),
                "baseline": run.baseline,
                "model": run.model,
            },
        )


async def _baseline(
    s: Any, run: PreprodRun, items: list[PreprodItem]
) -> tuple[dict[str, bool | None], dict[str, Any] | None]:
    """Per-item baseline verdicts and the baseline cohort's averages, or nothing."""
    if run.baseline is None:
        return {}, None
    if run.baseline["kind"] == "preprod_run":
        return await _prior_run_baseline(s, run.baseline["value"])
    return await _prod_window_baseline(s, run, items)


async def _prior_run_baseline(
    s: Any, prior_id: str
) -> tuple[dict[str, bool | None], dict[str, Any] | None]:
    rows = (
        await s.execute(
            select(PreprodItem, TraceSession)
            .outerjoin(TraceSession, TraceSession.pk == PreprodItem.session_pk)
            .where(PreprodItem.run_id == prior_id)
        )
    ).all()
    verdicts: dict[str, bool | None] = {}
    sessions = []
    for item, session in rows:
        verdicts[item.item_id] = candidate_verdict(item_outcome(item))
        if session is not None:
            sessions.append(session)
    return verdicts, _cohort(sessions)


async def _prod_window_baseline(
    s: Any, run: PreprodRun, items: list[PreprodItem]
) -> tuple[dict[str, bool | None], dict[str, Any] | None]:
    """Production sessions whose input equals an item's prompt; each one's newest non-preprod
    score within the window gives the verdict (a pass label, or a score of at least 0.7)."""
    assert run.baseline is not None
    since = utcnow() - parse_range(run.baseline["range"])
    by_input: dict[str, list[str]] = {}
    for item in items:
        by_input.setdefault(item.input, []).append(item.item_id)
    verdicts: dict[str, bool | None] = {}
    sessions: dict[int, TraceSession] = {}
    inputs = list(by_input)
    for start in range(0, len(inputs), 200):
        chunk = inputs[start : start + 200]
        rows = (
            await s.execute(
                select(Score, TraceSession)
                .join(TraceSession, TraceSession.pk == Score.session_pk)
                .where(
                    owned_by(Score, run.project_id),
                    Score.source != "preprod",
                    Score.created_at >= since,
                    TraceSession.eval_run_id.is_(None),
                    TraceSession.input.in_(chunk),
                )
                .order_by(Score.created_at.desc(), Score.pk.desc())
            )
        ).all()
        for score, session in rows:
            verdict = _prod_verdict(score)
            assert session.input is not None
            for item_id in by_input[session.input]:
                if item_id not in verdicts and verdict is not None:
                    verdicts[item_id] = verdict
                    sessions[session.pk] = session
    return verdicts, _cohort(list(sessions.values()))


def _prod_verdict(score: Score) -> bool | None:
    label = (score.label or "").strip().lower()
    if label in PASS_LABELS:
        return True
    if label in FAIL_LABELS:
        return False
    if score.score is not None:
        return passes(score.score)
    return None


def _cohort(sessions: list[TraceSession]) -> dict[str, Any] | None:
    if not sessions:
        return None
    stats = cohort_stats(
        [x.cost_usd for x in sessions],
        [x.latency_ms for x in sessions],
        [x.step_count for x in sessions],
    )
    return {
        "avgCostUsd": stats.avg_cost_usd,
        "pricedSessions": stats.priced_sessions,
        "sessions": stats.sessions,
        "avgLatencyMs": stats.avg_latency_ms,
        "avgStepCount": stats.avg_step_count,
    }
