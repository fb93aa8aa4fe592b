"""Push mode: Neens calls the agent endpoint once per frozen prompt and records each answer.

The job re-derives what is left from table state — it calls only items still `pending` — so a
server that stops mid-run resumes where it was (an item whose call was in flight is called
again). Each answer becomes a session (trace id `<run id>:<item id>`, so a repeated call merges
into the same session rather than making a second one) and is linked to its item. One endpoint
failure costs one item, recorded with its reason; when every item failed the run is `failed`.

An answer is checked before it is written (a NUL or a lone surrogate cannot be stored), and a
batch the database still refuses is written again item by item, so one bad reply errors its own
item, once, instead of sinking the job and with it every healthy item of the batch.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select, update

from neens.domain.conventions import (
    DATASET_ITEM_ID_KEY,
    EVAL_RUN_ID_KEY,
    VERSION_LABEL_KEY,
    record_unstorable_reason,
    unstorable_text_reason,
)
from neens.domain.spans import SpanRecord
from neens.engine.agent_call import AgentCallFailed, AgentEndpoint, AgentReply, call_agent
from neens.engine.batching import BatchWriter, batch_writer
from neens.queue.worker import JobContext
from neens.secrets import SecretKeyError
from neens.store.db import Database
from neens.store.models import AgentConnection, PreprodItem, PreprodRun, TraceSession
from neens.store.run_lifecycle import move
from neens.store.run_liveness import fail_run
from neens.store.runs import dispatch_scoring_once, mark_item_error, refusal, write_or_split
from neens.store.sessions import write_spans
from neens.store.types import utcnow

log = logging.getLogger("neens.push")


def push_trace_id(run_id: str, item_id: str) -> str:
    return f"{run_id}:{item_id}"


def reply_spans(
    run: PreprodRun, item_id: str, prompt: str, reply: AgentReply, agent_name: str
) -> list[SpanRecord]:
    """The session recorded for one answer: an agent span, and an LLM span when usage came back.

    The LLM span carries the run's frozen model (or the model the reply names), so the session is
    priced like any other; without usage in the reply there is no LLM span and no cost claim.
    """
    trace_id = push_trace_id(run.id, item_id)
    ended = utcnow()
    started = ended - timedelta(milliseconds=reply.latency_ms)
    correlation = {
        EVAL_RUN_ID_KEY: run.id,
        DATASET_ITEM_ID_KEY: item_id,
        VERSION_LABEL_KEY: run.version_label,
    }
    root = SpanRecord(
        trace_id=trace_id,
        span_id="agent",
        parent_span_id=None,
        name="agent.call",
        kind="agent",
        start_time=started,
        end_time=ended,
        status_code="ok",
        status_message=None,
        attributes={**correlation, "neens.agent_connection_id": run.agent_connection_id},
        input=prompt,
        output=reply.answer,
        agent_name=agent_name,
    )
    spans = [root]
    model = reply.model or run.model
    if reply.input_tokens is not None or reply.output_tokens is not None:
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if model is not None:
            attributes["gen_ai.request.model"] = model
        if reply.input_tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = reply.input_tokens
        if reply.output_tokens is not None:
            attributes["gen_ai.usage.output_tokens"] = reply.output_tokens
        spans.append(
            SpanRecord(
                trace_id=trace_id,
                span_id="llm",
                parent_span_id="agent",
                name="chat",
                kind="llm",
                start_time=started,
                end_time=ended,
                status_code="ok",
                status_message=None,
                attributes=attributes,
            )
        )
    return spans


async def run_push(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Job `preprod.push`: call every pending item of the run, then finish or dispatch scoring."""
    db = ctx.db
    run_id = str(payload["run_id"])
    async with db.read() as s:
        run = await s.get(PreprodRun, run_id)
        connection = (
            await s.get(AgentConnection, run.agent_connection_id)
            if run is not None and run.agent_connection_id
            else None
        )
        if run is None or run.status != "running":
            return
        pending = list(
            (
                await s.execute(
                    select(PreprodItem.item_id, PreprodItem.input)
                    .where(PreprodItem.run_id == run_id, PreprodItem.status == "pending")
                    .order_by(PreprodItem.position)
                )
            ).all()
        )
    if connection is None:
        await fail_run(db, run_id, "the run's agent connection no longer exists")
        return
    try:
        headers = db.secrets.open_headers(connection.headers, what=f"connection {connection.id}")
    except SecretKeyError as exc:
        await fail_run(db, run_id, str(exc))
        return
    endpoint = AgentEndpoint(
        url=connection.url,
        request_format=connection.request_format,
        answer_path=connection.answer_path,
        headers=headers,
        # The model sent is the one frozen on the run, never the connection's current one.
        model=run.model,
    )
    client = ctx.http
    settings = ctx.settings
    slots = asyncio.Semaphore(settings.push_concurrency)
    watch = _CancelWatch(db, run_id)

    async def one(outcomes: BatchWriter[_Outcome], item_id: str, prompt: str) -> None:
        async with slots:
            if await watch.cancelled():
                return
            try:
                reply: AgentReply | str = await call_agent(
                    client,
                    endpoint,
                    prompt,
                    run_id=run_id,
                    item_id=item_id,
                    version_label=run.version_label,
                    timeout_s=settings.push_timeout_s,
                )
            except AgentCallFailed as failure:
                reply = failure.reason
            except Exception as exc:  # a reply no guardrail foresaw costs its item, not the run
                log.exception("push call for item %s of run %s failed", item_id, run_id)
                reply = f"Neens could not read the endpoint's reply ({type(exc).__name__})"
            await outcomes.put(_Outcome(item_id, prompt, reply))

    async def store(batch: list[_Outcome]) -> None:
        await _store_batch(db, run, connection.name, batch)

    async with batch_writer(store) as outcomes:
        await asyncio.gather(*(one(outcomes, item_id, prompt) for item_id, prompt in pending))
    await _finish_calls(db, run_id)
    ctx.notify()


@dataclass(frozen=True, slots=True)
class _Outcome:
    item_id: str
    prompt: str
    reply: AgentReply | str
    """The answer, or the reason there is none."""


async def _store_batch(
    db: Database, run: PreprodRun, agent_name: str, batch: list[_Outcome]
) -> None:
    """Store a batch; when the database refuses it, store its outcomes one by one, so only the
    outcome it refuses errors (a lost connection or lock is not the data's fault: it raises)."""

    async def refused(entry: tuple[_Outcome, list[SpanRecord]], exc: Exception) -> None:
        outcome = entry[0]
        log.warning("the answer of item %s of run %s was refused", outcome.item_id, run.id)
        error = f"the answer cannot be stored: the database refused it ({refusal(exc)})"
        await _write(db, run, [(_Outcome(outcome.item_id, outcome.prompt, error), [])])

    await write_or_split(
        [_checked(run, agent_name, o) for o in batch],
        lambda entries: _write(db, run, entries),
        refused,
        "push answers",
        # only an item error was written, and it was refused: nothing to split
        alone_again=lambda entry: not isinstance(entry[0].reply, str),
    )


def _checked(
    run: PreprodRun, agent_name: str, outcome: _Outcome
) -> tuple[_Outcome, list[SpanRecord]]:
    """The outcome with its session's spans, or turned into an error when they cannot be stored."""
    reply = outcome.reply
    if isinstance(reply, str):
        return outcome, []
    spans = reply_spans(run, outcome.item_id, outcome.prompt, reply, agent_name)
    error = None
    if (reason := unstorable_text_reason(reply.answer)) is not None:
        error = f"the answer cannot be stored: it {reason}, which the database refuses"
    elif (reason := unstorable_text_reason(reply.model)) is not None:
        error = f"the answer cannot be stored: the model the reply names {reason}"
    else:
        reasons = (record_unstorable_reason(span) for span in spans)
        if (reason := next((r for r in reasons if r is not None), None)) is not None:
            error = f"the answer cannot be stored: its recorded {reason}"
    if error is not None:
        return _Outcome(outcome.item_id, outcome.prompt, error), []
    return outcome, spans


async def _write(
    db: Database, run: PreprodRun, checked: list[tuple[_Outcome, list[SpanRecord]]]
) -> None:
    spans = [span for _, outcome_spans in checked for span in outcome_spans]
    answered = [o for o, outcome_spans in checked if outcome_spans]
    if spans:
        await write_spans(db, run.project_id, spans, source="push")
    async with db.write() as s:
        for o, _ in checked:
            if isinstance(o.reply, str):
                await mark_item_error(s, run.id, o.item_id, o.reply)
        if answered:
            trace_ids = {push_trace_id(run.id, o.item_id): o.item_id for o in answered}
            rows = await s.execute(
                select(TraceSession.pk, TraceSession.trace_id).where(
                    TraceSession.project_id == run.project_id,
                    TraceSession.trace_id.in_(list(trace_ids)),
                )
            )
            links = [
                {"b_item": trace_ids[trace_id], "b_session": session_pk}
                for session_pk, trace_id in rows.all()
            ]
            items = cast(Table, PreprodItem.__table__)
            if links:
                await s.execute(
                    update(items)
                    .where(
                        items.c.run_id == run.id,
                        items.c.item_id == bindparam("b_item"),
                        items.c.status == "pending",
                    )
                    .values(
                        status="captured", session_pk=bindparam("b_session"), captured_at=utcnow()
                    ),
                    links,
                )


class _CancelWatch:
    """Whether the run was cancelled, read from the database at most every `interval_s`, so a
    thousand calls do not cost a thousand reads."""

    def __init__(self, db: Database, run_id: str, interval_s: float = 0.25) -> None:
        self.db = db
        self.run_id = run_id
        self.interval_s = interval_s
        self._checked = -float("inf")
        self._cancelled = False
        self._lock = asyncio.Lock()

    async def cancelled(self) -> bool:
        async with self._lock:
            now = asyncio.get_running_loop().time()
            if not self._cancelled and now - self._checked >= self.interval_s:
                self._checked = now
                async with self.db.read() as s:
                    status = await s.scalar(
                        select(PreprodRun.status).where(PreprodRun.id == self.run_id)
                    )
                self._cancelled = status != "running"
            return self._cancelled


async def _finish_calls(db: Database, run_id: str) -> None:
    """After the calls: fail the run when nothing was captured, else dispatch scoring."""
    async with db.write() as s:
        run = await s.scalar(select(PreprodRun).where(PreprodRun.id == run_id).with_for_update())
        if run is None or run.status != "running":
            return
        counts = dict(
            (
                await s.execute(
                    select(PreprodItem.status, func.count())
                    .where(PreprodItem.run_id == run_id)
                    .group_by(PreprodItem.status)
                )
            ).all()
        )
        if counts.get("pending"):
            return  # cancelled part-way, or another worker still calling
        if not counts.get("captured") and not counts.get("scored"):
            error = "every item failed: the agent endpoint produced no answer (see items)"
            await move(s, run, "failed", error=error)
            return
        await dispatch_scoring_once(s, run_id)
