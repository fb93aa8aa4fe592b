"""Scoring production sessions with the judges marked `scoreProduction`, as they arrive.

A session is scored once, shortly after its root span arrives (the root carries the agent's
final answer). Its scores have `source: production` and never mix with pre-prod scores.
Sessions of pre-prod runs (those tagged with a run id, `EVAL_RUN_ID_KEY`) are not production
traffic.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from neens.domain.judges import JudgeCase
from neens.domain.spans import SpanRecord
from neens.engine.judging import CaseJudge, outbound_of
from neens.queue.worker import JobContext
from neens.store.db import Database
from neens.store.jobs import JobKind, enqueue
from neens.store.judges import judges_by_id
from neens.store.models import Judge, TraceSession
from neens.store.scores import insert_scores, score_values
from neens.store.tenancy import owned_by

SETTLE_S = 1.0
"""Wait after the root span before scoring, for late sibling spans of the same export."""
MEMO_S = 5.0


async def production_judges(db: Database, project_id: str) -> list[str]:
    """Ids of the project's enabled production judges (remembered for a few seconds)."""
    remembered = db.memo_get("production-judges", project_id, ttl_s=MEMO_S)
    if remembered is not None:
        return list(remembered)
    async with db.read() as s:
        ids = list(
            await s.scalars(
                select(Judge.id).where(
                    owned_by(Judge, project_id),
                    Judge.score_production.is_(True),
                    Judge.enabled.is_(True),
                )
            )
        )
    db.memo_set("production-judges", project_id, ids)
    return ids


async def enqueue_production_scoring(
    db: Database, project_id: str, spans: list[SpanRecord], tagged: set[str]
) -> bool:
    """Queue scoring for each untagged trace whose root span is in `spans`."""
    roots = {r.trace_id for r in spans if r.parent_span_id is None} - tagged
    if not roots or not await production_judges(db, project_id):
        return False
    async with db.write() as s:
        for trace_id in sorted(roots):
            await enqueue(
                s,
                JobKind.PRODUCTION_SCORE,
                {"project_id": project_id, "trace_id": trace_id},
                dedupe_key=f"production:{project_id}:{trace_id}",
                delay_s=SETTLE_S,
            )
    return True


async def score_production_session(ctx: JobContext, payload: dict[str, Any]) -> None:
    db = ctx.db
    project_id, trace_id = str(payload["project_id"]), str(payload["trace_id"])
    judge_ids = await production_judges(db, project_id)
    async with db.read() as s:
        session = await s.scalar(
            select(TraceSession).where(
                owned_by(TraceSession, project_id), TraceSession.trace_id == trace_id
            )
        )
        judges = await judges_by_id(s, project_id, judge_ids)
    if session is None or session.eval_run_id is not None or not judge_ids:
        return
    judge = CaseJudge(judges, JudgeCase(session.input, session.output, None), outbound_of(ctx))
    verdicts = {judge_id: await judge.verdict(judge_id) for judge_id in judge_ids}
    async with db.write() as s:
        await insert_scores(
            s,
            [
                score_values(
                    verdict,
                    project_id=project_id,
                    session_pk=session.pk,
                    judge_id=judge_id,
                    judge_name=judges[judge_id].name,
                    source="production",
                )
                for judge_id, verdict in verdicts.items()
            ],
        )
